"""Claim faithfulness (RAGChecker): the share of the answer's claims that some retrieved passage entails.

The answer is split into claims (the ``main_points`` verdict of ``answer_consistency``, shared with it
in a run that has both), and each claim is checked against each retrieved passage on its own
(prompt ``entailment.v1.txt``: entailment, neutral or contradiction). A claim counts as faithful when
at least one passage entails it — RAGChecker's generator faithfulness, where
``answer_consistency`` asks one support verdict of all passages together. The per-sample detail
keeps the claims-by-passages relations, so one can see which passage backs which claim.

An answer without any claim (a refusal, an empty answer) is undefined; with nothing retrieved no
claim is entailed: 0, and only the claims are asked. An empty passage entails nothing. People's
labels of ``answer_consistency`` (the share of supported claims: ExpertQA's ``support``) are the ones
its agreement is measured on.

RAGChecker's own example (``checking_outputs.json``, its first query): 11 response claims, of which
rows 1, 7, 9 and 10 are entailed by some of the 4 passages:

    >>> E, N = "entailment", "neutral"
    >>> rows = [[N, E, N, N]] + [[N] * 4] * 5 + [[N, E, N, N], [N] * 4, [E, N, N, E], [N, N, N, E], [N] * 4]
    >>> claim_faithfulness_value(rows) == 4 / 11
    True
"""

from __future__ import annotations

import asyncio
from typing import Any, Sequence

from ragexp.judge.errors import ParseError
from ragexp.metrics.base import Judged, Score, register
from ragexp.metrics.judged import (PROMPT_VERSION, STR, Outcome, VerdictKind, blank, detail, failed, listed, obj,
                                   passages)
from ragexp.metrics.judged.main_points import MAIN_POINTS

RELATIONS = {"entailment": "entailment", "entailed": "entailment", "entails": "entailment", "neutral": "neutral",
             "contradiction": "contradiction", "contradicted": "contradiction", "contradicts": "contradiction"}


def _relation(value: Any, field: str, ctx: dict[str, Any]) -> str:
    found = RELATIONS.get(value.strip().strip(".*`\"'").lower()) if isinstance(value, str) else None
    if found is None:
        raise ParseError(f"'{field}' must be one of 'entailment', 'neutral', 'contradiction', got {value!r}")
    return found


ENTAILMENT = VerdictKind("entailment", ("relation",), "entailment, neutral or contradiction", _relation,
                         obj(relation={"type": "string", "enum": ["entailment", "neutral", "contradiction"]},
                             reason=STR))


def claim_faithfulness_value(relations: Sequence[Sequence[str]]) -> float | None:
    """Claims some passage entails / claims, from one row of relations per claim (one per passage);
    None (undefined) without a claim. A claim only contradicted or left neutral is not faithful.

    >>> claim_faithfulness_value([["entailment", "contradiction"], ["neutral", "contradiction"]]) == 1 / 2
    True
    >>> claim_faithfulness_value([[], []])  # nothing retrieved: no claim is entailed
    0.0
    """
    if not relations:
        return None
    return sum(1 for row in relations if "entailment" in row) / len(relations)


@register(option_rules=PROMPT_VERSION, judge=Judged(asks=(MAIN_POINTS, ENTAILMENT), scale=1.0),
          agrees_with="answer_consistency")
async def claim_faithfulness(ask, answer: str, contexts: list[str], *, prompt_version: str = "v1") -> Score:
    """Share of the answer's claims entailed by at least one retrieved passage, each checked on its own."""
    if blank(answer):
        return Score.undefined("empty answer: no claim to check against the passages")
    claims = await listed(ask, MAIN_POINTS, prompt_version, "the judge found no claim in the answer", answer=answer)
    if isinstance(claims, Score):
        return claims
    kept = passages(contexts)

    async def row(claim: str) -> list[Outcome]:
        return list(await asyncio.gather(*[ask(ENTAILMENT, prompt_version, claim=claim, context=c) for c in kept]))

    outs = await asyncio.gather(*[row(c) for c in claims])
    bad = failed([o for r in outs for o in r])
    if bad:
        return bad
    relations = [[o.verdict.value for o in r] for r in outs]
    return Score(claim_faithfulness_value(relations), detail=detail(claims=claims, relations=relations))
