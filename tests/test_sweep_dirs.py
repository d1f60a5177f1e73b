"""Two multiruns started in the same second: each gets its own sweep folder, each parent holds its own children.

Hydra's default sweep folder is named by the time to the second, so two sweeps launched together
shared it, and the parent-run file one of them left there: every child attached to one parent and
the other parent held none. Both sweeps here run their jobs in joblib worker processes, where the
parent is found through the inherited environment and the sweep folder's file.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cli import parent_and_children

SWEEPS = {"a": "metric.hit_rate.k=1,3", "b": "metric.hit_rate.k=5,10"}


def _start(cwd: Path, data_dir: Path, sweep: str) -> subprocess.Popen:
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1"}
    env.pop("MLFLOW_TRACKING_URI", None)
    args = [sys.executable, "-m", "ragexp", "-m", "hydra/launcher=joblib", "hydra.launcher.n_jobs=2",
            "dataset.system=strong,weak", "metric=hit_rate", sweep, f"data_dir={data_dir}", "progress=false"]
    return subprocess.Popen(args, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _launch_together(cwd: Path, data_dir: Path) -> list[tuple[str, str]]:
    while time.time() % 1 > 0.05:  # just after a second starts: both compose their config within it
        time.sleep(0.01)
    procs = [_start(cwd, data_dir, sweep) for sweep in SWEEPS.values()]
    outs = [p.communicate(timeout=900) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, f"exit {p.returncode}\n{out[-3000:]}\n{err[-3000:]}"
    return outs


def _stamps(folders: list[Path]) -> set[str]:
    return {f.parent.name + "/" + f.name.rpartition("_")[0] for f in folders}


@pytest.mark.integration
def test_two_sweeps_in_the_same_second_keep_their_own_folders_and_children(tmp_path, data_dir):
    for attempt in range(3):  # a loaded host can push one start into the next second: launch the pair again
        where = tmp_path / f"launch{attempt}"
        where.mkdir()
        _launch_together(where, data_dir)
        folders = sorted(p for p in (where / "multirun").glob("*/*") if p.is_dir())
        assert len(folders) == 2, folders  # one folder per launch, never a shared one
        if len(_stamps(folders)) == 1:
            break
    assert len(_stamps(folders)) == 1, f"the two sweeps never started in the same second: {_stamps(folders)}"
    # readable: date/time then the launch's short id
    for f in folders:
        time_part, _, launch = f.name.rpartition("_")
        assert time.strptime(f"{f.parent.name} {time_part}", "%Y-%m-%d %H-%M-%S")
        assert len(launch) == 6 and int(launch, 16) >= 0
        assert sorted(p.name for p in f.iterdir() if p.is_dir()) == ["0", "1", "2", "3"]  # its own 4 jobs

    client, parents, children = parent_and_children(f"sqlite:///{where / 'mlflow.db'}")
    assert len(parents) == 2 and len(children) == 8
    by_sweep = {}
    for parent in parents:
        (name,) = [n for n, sweep in SWEEPS.items() if sweep in parent.data.tags["ragexp.sweep"]]
        by_sweep[name] = parent
    for name, parent in by_sweep.items():
        mine = [c for c in children if c.data.tags["mlflow.parentRunId"] == parent.info.run_id]
        wanted = SWEEPS[name].split("=", 1)[1].split(",")
        assert len(mine) == 4, f"sweep {name}: parent holds {len(mine)} children, expected its own 4"
        assert sorted(c.data.params["metric.hit_rate.k"] for c in mine) == sorted(wanted * 2)
        assert parent.info.status == "FINISHED"
        assert client.get_metric_history(parent.info.run_id, "sweep/children")[-1].value == 4


def test_parent_lookup_takes_only_this_launchs_parent(tmp_path, monkeypatch):
    import json

    from ragexp.tracking.launch import LAUNCH_ENV, PARENT_ENV, PARENT_FILE, find_parent_run

    monkeypatch.delenv(PARENT_ENV, raising=False)
    monkeypatch.setenv(LAUNCH_ENV, "aaaaaa")
    (tmp_path / PARENT_FILE).write_text(json.dumps({"run_id": "theirs", "launch_id": "bbbbbb"}))
    assert find_parent_run(str(tmp_path)) is None  # another launch's parent in a shared folder
    (tmp_path / PARENT_FILE).write_text(json.dumps({"run_id": "mine", "launch_id": "aaaaaa"}))
    assert find_parent_run(str(tmp_path)) == "mine"
    monkeypatch.setenv(PARENT_ENV, "from-env")
    assert find_parent_run(str(tmp_path)) == "from-env"  # what on_multirun_start set in this process tree
    assert find_parent_run(None) is None  # a plain run never nests under an inherited parent
