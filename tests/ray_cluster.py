"""The two-node local Ray cluster of the execution=ray tests (``ray start`` twice on 127.0.0.1, by
benchmarks/ray_nodes.py), as a fixture: ``from ray_cluster import two_nodes``."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from ray_nodes import two_nodes as start_two_nodes  # noqa: E402


@pytest.fixture
def two_nodes(tmp_path, monkeypatch):
    """The cluster's address; a node that did not start fails the test with its log's end."""
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    try:
        with start_two_nodes(tmp_path) as address:
            yield address
    except RuntimeError as exc:
        pytest.fail(str(exc))
