"""Writes evaluate_dataframe.ipynb (run it after editing the cells here): python experiments/notebook/make_notebook.py"""

from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

CELLS = [
    new_markdown_cell("""# Evaluating a DataFrame with ragexp

Your RAG system's outputs are in a pandas DataFrame with your own column names. `ragexp.evaluate`
scores it with the same configs and code as `python -m ragexp`, in the notebook's process.

Here the DataFrame holds what two systems (`strong` and `weak`) answered for the 50 questions of
ragexp's bundled demo: for each question, the ids of the passages each system retrieved, its
answer, the gold passage ids and the reference answers. Everything runs offline."""),
    new_code_cell("""import json
from importlib.resources import files

import pandas as pd

import ragexp

demo = files("ragexp.datasets.demo")
questions = pd.read_json(demo / "questions.jsonl", lines=True)


def outputs_of(system):
    \"\"\"One row per question: the question, what `system` retrieved and answered, the gold data.\"\"\"
    answers = pd.read_json(demo / f"{system}.jsonl", lines=True)
    df = questions.merge(answers, on="id")
    return df.rename(columns={"query": "question", "context_ids": "retrieved", "answer": "response",
                              "gt_context_ids": "gold", "reference_answers": "truth", "latency_s": "seconds"})


strong, weak = outputs_of("strong"), outputs_of("weak")
strong[["id", "question", "retrieved", "response", "gold"]].head(3)"""),
    new_markdown_cell("""## Evaluate one system

`columns` maps ragexp's record fields to the DataFrame's columns. `metric="default"` computes every
deterministic metric these fields allow; `log=False` keeps it in memory (no MLflow run, no files)."""),
    new_code_cell("""COLUMNS = {"query": "question", "context_ids": "retrieved", "answer": "response",
           "gt_context_ids": "gold", "reference_answers": "truth", "latency_s": "seconds"}

result = ragexp.evaluate(strong, columns=COLUMNS, run_name="strong", log=False)
result"""),
    new_markdown_cell("""## The per-sample table

One row per input row, in input order: every metric's value, status and detail."""),
    new_code_cell("""result.per_sample[["id", "query", "answer", "hit_rate/hit_rate_at_1", "answer_token_f1"]].head(10)"""),
    new_markdown_cell("""## Compare two configurations

The weak system is the baseline, the strong one the candidate. The comparison pairs the samples
by id and says, metric by metric, whether the difference is larger than the noise (paired
bootstrap interval, permutation or McNemar test, Holm-adjusted)."""),
    new_code_cell("""baseline = ragexp.evaluate(weak, columns=COLUMNS, run_name="weak", log=False)
comparison = ragexp.compare_results(baseline, result)
comparison"""),
    new_code_cell("""comparison.metrics.loc[["answer_token_f1", "hit_rate/hit_rate_at_1", "avg_latency"],
                       ["mean_baseline", "mean_candidate", "diff", "ci_low", "ci_high", "p_holm", "verdict"]]"""),
    new_markdown_cell("""The questions the strong system did worse on, by answer token F1:"""),
    new_code_cell("""pd.DataFrame(comparison.regressions["answer_token_f1"])"""),
    new_markdown_cell("""## Log it

`log=True` logs the run as `python -m ragexp` does (here to `./mlflow.db`; open it with
`python -m ragexp.ui`); `log="<tracking uri>"` logs elsewhere."""),
    new_code_cell("""logged = ragexp.evaluate(strong, columns=COLUMNS, run_name="strong (notebook)", log=True)
print(logged.run_id)"""),
]


def main() -> None:
    nb = new_notebook(cells=CELLS, metadata={"kernelspec": {"name": "python3", "display_name": "Python 3",
                                                            "language": "python"},
                                             "language_info": {"name": "python"}})
    path = Path(__file__).with_name("evaluate_dataframe.ipynb")
    nbformat.validate(nb)
    path.write_text(nbformat.writes(nb) + "\n", encoding="utf-8")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
