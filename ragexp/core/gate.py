"""The regression gate: ``max_drop`` (compare only: worse by more than the allowance *and* Holm-significant)
and ``min`` floors, from ``conf/gate/`` or overrides. Definitions: docs/uncertainty.md, "The regression
gate". A variant key's slash is written as a dot in overrides (nested maps joined with ``/``);
:func:`ragexp.cli.add_override_prefix` adds Hydra's ``++`` for keys the chosen gate does not declare. This module
computes the lines; the exit status (:class:`ragexp.errors.GateFailed`) is the commands', and a sweep job's
file of missed floors is :mod:`ragexp.results.gate_files`'.

>>> flat_conditions({"hit_rate": {"hit_rate_at_5": 0.5}, "answer_token_f1": 0.3})
{'hit_rate/hit_rate_at_5': 0.5, 'answer_token_f1': 0.3}
>>> floor_failures({"hit_rate/hit_rate_at_5": 0.4, "mrr": 0.7}, {"hit_rate/hit_rate_at_5": 0.5, "mrr": 0.6})
['gate: hit_rate/hit_rate_at_5 = 0.4000 is under its floor 0.5']
"""

from __future__ import annotations

import math
import warnings
from typing import Any, Mapping

from ragexp.common.renamed import current_key, renamed_note
from ragexp.errors import ConfigError, RenamedKeyWarning, closest

def flat_conditions(node: Any, where: str = "gate") -> dict[str, float]:
    """``{hit_rate: {hit_rate_at_5: 0.5}}`` → ``{"hit_rate/hit_rate_at_5": 0.5}``; every value must be a number."""
    if node is None:
        return {}
    if not hasattr(node, "items"):
        raise ConfigError(f"{where}: expected a map from metric key to number, got {node!r}")
    out: dict[str, float] = {}
    for key, value in node.items():
        if hasattr(value, "items"):
            for sub, v in flat_conditions(value, f"{where}.{key}").items():
                out[f"{key}/{sub}"] = v
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise ConfigError(f"{where}.{key}: expected a number, got {value!r}")
        out[str(key)] = float(value)
    return out


def read_gate(gate_cfg: Any) -> tuple[dict[str, float], dict[str, float]]:
    """``(max_drop, min)`` of a gate config node (None or absent → no condition)."""
    if gate_cfg is None:
        return {}, {}
    unknown = set(gate_cfg.keys()) - {"max_drop", "min"}
    if unknown:
        raise ConfigError(f"gate: unknown key(s) {', '.join(sorted(map(str, unknown)))}; a gate has max_drop and min")
    return (_current(flat_conditions(gate_cfg.get("max_drop"), "gate.max_drop"), "gate.max_drop"),
            _current(flat_conditions(gate_cfg.get("min"), "gate.min"), "gate.min"))


def _current(conditions: dict[str, float], where: str) -> dict[str, float]:
    """Conditions on an old key (the keyword verdict's confusion metrics, a cut-off's ``hit_rate/k5``) read as on
    today's key, with one warning line each (ragexp.common.renamed)."""
    for key in conditions:
        note = renamed_note(key, f"{where}.{key.replace('/', '.')}")
        if note:
            warnings.warn(note, RenamedKeyWarning, stacklevel=3)
    return {current_key(k): v for k, v in conditions.items()}


def floor_failures(values: Mapping[str, float | None], floors: Mapping[str, float],
                   what: str = "") -> list[str]:
    """One line per floor the values miss (a metric not computed, or undefined, misses it too)."""
    lines = []
    for key, floor in floors.items():
        if key not in values:
            near = closest(key, values)
            known = f"did you mean {near[0]}?" if near else f"metrics: {', '.join(sorted(values)) or 'none'}"
            lines.append(f"gate: {key} was not computed{what}, so it cannot be checked against its floor "
                         f"{floor:g} ({known})")
            continue
        value = values[key]
        if value is None or not math.isfinite(value):
            lines.append(f"gate: {key} is undefined{what} (no sample scored), under its floor {floor:g}")
        elif value < floor:
            lines.append(f"gate: {key} = {value:.4f}{what} is under its floor {floor:g}")
    return lines


def drop_failures(rows: Mapping[str, Mapping[str, Any]], allowances: Mapping[str, float],
                  alpha: float) -> list[str]:
    """One line per metric of a comparison that got worse by more than its allowance, significantly.

    ``rows`` maps a metric key to its comparison row (``ragexp.compare``): ``diff``,
    ``higher_is_better``, ``p_holm``, ``ci_low``, ``ci_high``, the two means.
    """
    lines = []
    for key, allowed in allowances.items():
        row = rows.get(key)
        if row is None or row.get("diff") is None:
            why = row.get("note") if row else "not computed in both runs"
            lines.append(f"gate: {key} cannot be checked for a drop: {why}")
            continue
        drop = -row["diff"] if row["higher_is_better"] else row["diff"]
        if drop > allowed and row["p_holm"] < alpha:
            lines.append(f"gate: {key} got worse by {drop:.4f} ({row['mean_baseline']:.4f} → "
                         f"{row['mean_candidate']:.4f}, CI of the change [{row['ci_low']:.4f}, "
                         f"{row['ci_high']:.4f}], Holm p = {row['p_holm']:.3g}), more than the {allowed:g} allowed")
    return lines
