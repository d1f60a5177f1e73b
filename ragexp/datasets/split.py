"""``dataset.split=dev|test|all``: a seeded split of the records into a dev part, to tune a judge's
prompt on, and a test part, to report agreement on (docs/judge-trust.md).

Records are grouped by their labels (the ``human`` mapping and ``label``; records without any form
one group), each group is shuffled with ``numpy.random.default_rng(seed)`` and its first
``round(split_fraction * size)`` records go to dev, the rest to test; both parts keep the file's
order. So each part holds about ``split_fraction`` of every label class, and the same records and
seed give the same split on every machine.

    >>> from ragexp.common.records import Record
    >>> recs = [Record(str(i), "q", human={"answer_consistency_binary": float(i % 2)}) for i in range(10)]
    >>> dev = split_records(recs, "dev", 0.4, 0)
    >>> test = split_records(recs, "test", 0.4, 0)
    >>> len(dev), len(test), sorted(r.id for r in dev + test) == sorted(r.id for r in recs)
    (4, 6, True)
    >>> sum(r.human["answer_consistency_binary"] for r in dev)  # 2 of the 5 ones, 2 of the 5 zeros
    2.0
"""

from __future__ import annotations

import numbers
from typing import Any, Mapping, NamedTuple

from ragexp.common.records import Record
from ragexp.errors import ConfigError, DataError

SPLITS = ("all", "dev", "test")
#: The keys a dataset with people's labels takes; their defaults' one place is conf/dataset_labelled.yaml.
SPLIT_KEYS = ("split", "split_fraction", "split_seed")


class Split(NamedTuple):
    """A labelled dataset's split settings (``dataset.split``, ``split_fraction``, ``split_seed``), typed once by
    :func:`split_of` and passed down to :func:`split_records` (``split_records(records, *split)``)."""

    split: str
    fraction: float
    seed: int


def split_of(options: Mapping[str, Any]) -> Split:
    """:class:`Split` from a loader's split options, what they leave out taken from
    ``conf/dataset_labelled.yaml``; an unknown key is a ConfigError naming the known ones.

    >>> split_of({"split": "dev", "split_fraction": 0.3, "split_seed": 7})
    Split(split='dev', fraction=0.3, seed=7)
    """
    from ragexp.common.paths import conf_file

    unknown = sorted(set(options) - set(SPLIT_KEYS))
    if unknown:
        raise ConfigError(f"dataset has no setting {', '.join(map(repr, unknown))} (besides its loader's own "
                          f"arguments it takes {', '.join(SPLIT_KEYS)})")
    base = conf_file("dataset_labelled")
    return Split(*(options.get(k, base[k]) for k in SPLIT_KEYS))


def split_records(records: list[Record], split: str, fraction: float, seed: int) -> list[Record]:
    """The ``split`` part of ``records`` (module docstring); ``all`` returns them unchanged."""
    if split not in SPLITS:
        raise DataError(f"dataset.split must be one of {', '.join(SPLITS)}, got {split!r}")
    if isinstance(fraction, bool) or not isinstance(fraction, numbers.Real) or not 0 < fraction < 1:
        raise DataError(f"dataset.split_fraction must be a number between 0 and 1 (the share in dev), got {fraction!r}")
    if split == "all":
        return records
    import numpy as np

    groups: dict[tuple, list[int]] = {}
    for i, r in enumerate(records):
        groups.setdefault((tuple(sorted((r.human or {}).items())), r.label), []).append(i)
    rng = np.random.default_rng(seed)
    dev: set[int] = set()
    for key in sorted(groups, key=repr):
        members = groups[key]
        order = rng.permutation(len(members))
        dev.update(members[j] for j in order[:round(fraction * len(members))])
    keep = [r for i, r in enumerate(records) if (i in dev) == (split == "dev")]
    if not keep:
        raise DataError(f"dataset.split={split} with split_fraction={fraction} leaves no record of {len(records)}")
    return keep
