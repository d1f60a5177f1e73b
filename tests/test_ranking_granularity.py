"""Ranked id metrics when the retrieval is coarser than the ground truth (sessions S<n> against evidence turns
D<n>:<m>): compared at the retrieval's granularity (docs/metrics.md#ranked-ids-of-two-granularities)."""

import math
from pathlib import Path

import pytest

from ragexp.metrics.locomo import locomo_evidence_recall
from ragexp.metrics.ranking import mrr, ndcg, recall_at_k

G = ["^D(\\d+):", "^S(\\d+)$"]  # conf/metric/locomo.yaml's group_ids
# a synthetic conversation: evidence D1:3, D1:7 (session 1) and D3:2 (session 3); retrieval S2, S3, S1
EVIDENCE = ["D1:3", "D1:7", "D3:2"]
RUN = ["S2", "S3", "S1"]


def test_sessions_against_turns_golden():
    # relevant items: the distinct sessions {S1, S3} (D1:3 and D1:7 collapse into S1); relevant ranks 2 and 3
    assert recall_at_k(RUN, EVIDENCE, k=2, group_ids=G) == 1 / 2
    assert recall_at_k(RUN, EVIDENCE, k=3, group_ids=G) == 2 / 2
    assert mrr(RUN, EVIDENCE, k=10, group_ids=G) == 1 / 2
    ideal = 1 + 1 / math.log2(3)
    assert ndcg(RUN, EVIDENCE, k=10, group_ids=G) == pytest.approx((1 / math.log2(3) + 1 / math.log2(4)) / ideal, abs=1e-15)
    # a session repeated brings nothing new
    assert recall_at_k(["S1", "S1", "S3"], EVIDENCE, k=2, group_ids=G) == 1 / 2
    # LoCoMo's evidence recall keeps its own formula: entries counted (2 of 3 in S1 at k=1, all 3 at k=3)
    assert locomo_evidence_recall(["S1"], EVIDENCE) == 2 / 3
    assert locomo_evidence_recall(RUN, EVIDENCE) == 3 / 3


def test_turn_level_unchanged_and_without_option_as_written():
    assert recall_at_k(["D1:3", "D2:1"], EVIDENCE, k=10, group_ids=G) == 1 / 3
    assert recall_at_k(RUN, EVIDENCE, k=10) == 0.0  # no group_ids: ids compared as written
    assert recall_at_k([], EVIDENCE, k=10, group_ids=G) == 0.0  # nothing retrieved: a miss


def test_entry_without_a_session_is_a_miss_and_unknown_cases_say_why():
    # 'D' names no session: a relevant item of its own, never found: {S1, 'D'} -> 1 of 2
    assert recall_at_k(["S1"], ["D1:3", "D"], k=10, group_ids=G) == 1 / 2
    mixed = recall_at_k(["S1", "D1:3"], EVIDENCE, k=10, group_ids=G)
    assert mixed.status == "undefined" and "mixed granularity: 1 of 2" in mixed.detail
    unknown = mrr(["S1"], ["a1", "a2"], k=10, group_ids=G)  # turn ids the rule cannot place
    assert unknown.status == "undefined" and "no ground-truth id has a key" in unknown.detail
    assert recall_at_k(["S1"], [], k=10, group_ids=G).status == "undefined"


def test_real_file_sessions_of_the_evidence_rank_first():
    """On locomo10.json: retrieving exactly the evidence's sessions scores 1 on every question whose evidence
    entries all name a session; the one with 'D' among its entries scores 1/2 (S<n> found, 'D' never)."""
    path = Path("/work/shared/data/locomo/locomo10.json")
    if not path.exists():
        pytest.skip("the real LoCoMo file is not on this machine")
    from ragexp.datasets.locomo import load_locomo

    records = load_locomo(str(path)).records
    scored = 0
    for r in records:
        sessions = list(dict.fromkeys(f"S{e.split(':')[0][1:]}" for e in r.gt_context_ids or [] if e[1:].split(":")[0].isdigit()))
        if not sessions:
            continue
        whole = all(e[1:].split(":")[0].isdigit() for e in r.gt_context_ids)
        want = 1.0 if whole else len(sessions) / (len(sessions) + sum(not e[1:].split(":")[0].isdigit() for e in set(r.gt_context_ids)))
        assert recall_at_k(sessions, r.gt_context_ids, k=None, group_ids=G) == want, r.id
        assert mrr(sessions, r.gt_context_ids, k=None, group_ids=G) == 1.0
        scored += 1
    assert scored == 1982  # 1,986 questions, 4 without evidence


def test_real_file_recall_agrees_with_locomo_where_sessions_are_distinct():
    """A fixed retrieval (sessions 1 to 5) on every question of locomo10.json: where each evidence entry names a
    session of its own, recall@k at session level and LoCoMo's evidence recall count the same thing."""
    path = Path("/work/shared/data/locomo/locomo10.json")
    if not path.exists():
        pytest.skip("the real LoCoMo file is not on this machine")
    from ragexp.datasets.locomo import load_locomo

    run = [f"S{n}" for n in range(1, 6)]
    compared = 0
    for r in load_locomo(str(path)).records:
        keys = [e.split(":")[0][1:] for e in r.gt_context_ids or []]
        if not keys or len(set(keys)) != len(keys) or not all(k.isdigit() for k in keys):
            continue
        assert recall_at_k(run, r.gt_context_ids, k=None, group_ids=G) == locomo_evidence_recall(run, r.gt_context_ids)
        compared += 1
    assert compared > 1000, compared
