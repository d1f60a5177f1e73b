"""A test set from the user's own corpus (``python -m ragexp.generate``; docs/testset.md).

- :mod:`.passages` — the corpus cut by ragexp's chunkers, each chunk with its document id and character
  offsets; seeded sampling stratified across documents; the BM25 neighbour rule for two-passage questions;
- :mod:`.replies` — the generator's and the answerability check's reply forms, read tolerantly;
- :mod:`.checks` — the filters that need no model: refusals, length, language, near-duplicates;
- :mod:`.generator` — the questions asked and checked through the judge's one client (cache, concurrency,
  budget, statuses), one candidate per sampled item, each ending kept or filtered with its reason.

Orchestration (files, report, MLflow) is :mod:`ragexp.workflow.generation`.
"""
