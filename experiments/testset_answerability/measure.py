"""How far ragexp.generate's answerability filter agrees with people: SQuAD v2's human labels.

SQuAD v2 annotators wrote, over the same paragraphs, questions the paragraph answers and questions it
does not (``is_impossible``). Each question goes to the filter (the ``testset_answerable`` prompt, through
the judge's client: cache, limits) with its paragraph alone; its yes/no is compared with the label by
:func:`ragexp.stats.agreement.judge_agreement` (Cohen's kappa, percent agreement, AC1, each with a bootstrap
interval clustered by paragraph). A failed or unreadable verdict is counted and left out, never guessed.

    python experiments/testset_answerability/measure.py --n 600 judge=openai_compatible judge.api_base=http://127.0.0.1:8000/v1

``--n``: questions, drawn seeded and balanced (half answerable). Judge overrides as for ``python -m ragexp``.
Prints one JSON object (written to ``--out`` too).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def items(path: Path, n: int, seed: int) -> list[dict]:
    doc = json.loads(path.read_text(encoding="utf-8"))
    pos, neg = [], []
    for a, art in enumerate(doc["data"]):
        for i, para in enumerate(art["paragraphs"]):
            for qa in para["qas"]:
                item = {"paragraph": f"{a}-{i}", "context": para["context"], "question": qa["question"],
                        "human": 0.0 if qa.get("is_impossible") else 1.0}
                (neg if qa.get("is_impossible") else pos).append(item)
    rng = random.Random(seed)
    picked = rng.sample(pos, min(n // 2, len(pos))) + rng.sample(neg, min(n - n // 2, len(neg)))
    rng.shuffle(picked)
    return picked


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=600)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--data", default=os.environ.get("RAGEXP_DATA_DIR", str(ROOT.parent / "shared" / "data")))
    ap.add_argument("--out", default="answerability_agreement.json")
    ap.add_argument("overrides", nargs="*", help="judge=... judge.api_base=... (conf/judge)")
    args = ap.parse_args()
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    from ragexp.core.labels import ONE_VERDICT
    from ragexp.judge import build_judge
    from ragexp.stats.agreement import judge_agreement
    from ragexp.testset.generator import answerability

    with initialize_config_dir(str(ROOT / "conf"), version_base="1.3"):
        cfg = compose("generate", overrides=args.overrides)
    judge = build_judge(OmegaConf.to_container(cfg.judge, resolve=True))
    chosen = items(Path(args.data) / "squad2" / "dev-v2.0.json", args.n, args.seed)
    verdicts, usage = answerability(judge, [([it["context"]], it["question"]) for it in chosen])
    ok = [(it, v) for it, (v, status, _) in zip(chosen, verdicts) if v is not None]
    statuses: dict[str, int] = {}
    for _, status, _ in verdicts:
        statuses[status] = statuses.get(status, 0) + 1
    agreement = judge_agreement("answerable", [it["human"] for it, _ in ok], [float(v["answerable"]) for _, v in ok],
                                kind="binary", clusters=[it["paragraph"] for it, _ in ok], seed=args.seed)
    said = [bool(v["answerable"]) for _, v in ok]
    yes = sum(said)
    result = {"judge": judge.settings.model, "api_base": judge.settings.api_base, "asked": len(chosen),
              "statuses": statuses, "human_answerable": sum(it["human"] for it in chosen),
              "judge_answerable": yes, "agreement": agreement.as_dict(), "usage": usage.as_metrics()}
    one = max(yes, len(said) - yes) / len(said) if said else 0.0
    if one >= ONE_VERDICT:  # as a run's judge trust flags it (docs/judge-trust.md, "A useless judge")
        result["degenerate"] = (f"the judge said {'answerable' if yes * 2 >= len(said) else 'unanswerable'} to "
                                f"{one:.0%} of {len(said)} questions: kappa is about 0 by construction and its "
                                "interval says nothing; it does not tell the two kinds apart")
    text = json.dumps(result, indent=2)
    Path(args.out).write_text(text + "\n", encoding="utf-8")
    print(text)
    k, a = agreement.statistics["kappa"], agreement.statistics["percent_agreement"]
    fmt = lambda v: "n/a" if v is None else f"{v:.3f}"  # noqa: E731
    print(f"kappa {fmt(k.mean)} [{fmt(k.ci_low)}, {fmt(k.ci_high)}], agreement {fmt(a.mean)} over {agreement.n} "
          f"questions ({len(chosen) - agreement.n} without a verdict; {yes} judged answerable, "
          f"{result['human_answerable']:.0f} by people)", file=sys.stderr)
    if "degenerate" in result:
        print(f"degenerate judge: {result['degenerate']}", file=sys.stderr)


if __name__ == "__main__":
    main()
