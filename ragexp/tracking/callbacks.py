"""The Hydra callback that groups a multirun under one MLflow parent run.

``on_multirun_start`` opens the parent run (in the launching process, before any job) and
leaves its id in the sweep folder and the environment; every job — in this process with the
basic launcher, in worker processes with joblib — nests its run under it. ``on_multirun_end``
logs a comparison table of the children (``sweep_results.json``) on the parent and closes it.
A job that fails — it raised, exited, or its process was killed — is a FAILED child run with its
reason (``on_job_end``, :mod:`ragexp.tracking.jobs`); the parent counts them (``ragexp.jobs_failed``)
and ends FAILED, also when Hydra stops at the sweep's end because of them (then at exit).
Creating the parent first also creates the SQLite schema once, so parallel jobs never race
on it.
"""

from __future__ import annotations

import atexit
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

from ragexp.tracking.launch import LAUNCH_TAG, PARENT_ENV, PARENT_FILE, PARENT_URI_ENV, git_commit, launch_id
from ragexp.tracking.log import UPLOAD_COMMAND, close_failed, interrupt_reason
from ragexp.common.secrets import redact, redact_url, redact_yaml_file, scrub
from ragexp.tracking.store import (FAILURE_TAG, bounded_http, check_store, configure_http, fail_orphaned_runs, first_line,
                                   open_client, owner_tags, resolve_uri, retrying, ui_command)
from ragexp.errors import GateFailed, TrackingError

#: The pid of the process that opened the sweep's parent run (joblib's workers inherit it, and are not it).
PARENT_OWNER_ENV = "RAGEXP_PARENT_OWNER_PID"


class ParentRunCallback(Callback):
    def __init__(self) -> None:
        self.run_id: str | None = None
        self.uri: str | None = None
        self.config: DictConfig | None = None  # the sweep's (set with run_id), for the accounting at exit

    def __getstate__(self) -> dict[str, Any]:
        # Hydra's launchers pickle the callbacks with each job (submitit's job files on disk): the store's
        # address, which may hold a password, stays out; a job reads it from its environment
        return {**self.__dict__, "uri": None}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self.uri = self.uri or os.environ.get(PARENT_URI_ENV)

    def on_run_start(self, config: DictConfig, **kwargs: Any) -> None:
        _writable_output(str(config.hydra.run.dir), "hydra.run.dir")

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        from ragexp.common.extras import launcher_ready
        from ragexp.version import __version__

        if not launcher_ready(str(OmegaConf.select(config, "hydra.launcher._target_", default="") or "")):
            return  # the launcher's own line names the extra to install: no empty parent run left in the store
        _writable_output(str(config.hydra.sweep.dir), "hydra.sweep.dir")

        from ragexp.tracking.settings import TrackingSettings

        tracking = TrackingSettings.from_config(config.tracking) if config.get("tracking") else None
        if tracking is None or not tracking.enabled:
            return  # tracking.enabled=false (or tracking=null): the jobs log nothing, so neither does the sweep
        configure_http(tracking)
        self.uri = resolve_uri(tracking.uri)
        client, exp_id = _checked_store(self.uri, tracking.experiment)
        sweep_dir = Path(str(config.hydra.sweep.dir))
        overrides = list(config.hydra.overrides.task)
        tags = {"ragexp.version": __version__, "ragexp.sweep": scrub(" ".join(overrides)), "ragexp.role": "parent",
                LAUNCH_TAG: launch_id(), **owner_tags()}
        commit = git_commit()
        if commit:
            tags["mlflow.source.git.commit"] = commit
        tags["mlflow.note.content"] = scrub(_sweep_note(overrides))
        name = scrub(str(tracking.sweep_name or _sweep_name(config, overrides)))
        run = retrying(client.create_run, exp_id, run_name=name, tags=tags)
        self.run_id = run.info.run_id
        sweep_dir.mkdir(parents=True, exist_ok=True)
        (sweep_dir / PARENT_FILE).write_text(json.dumps({"run_id": self.run_id, "tracking_uri": redact_url(self.uri),
                                                         "launch_id": launch_id()}))
        os.environ[PARENT_ENV] = self.run_id
        os.environ[PARENT_URI_ENV] = self.uri
        os.environ[PARENT_OWNER_ENV] = str(os.getpid())
        self.config = config
        atexit.register(self._close_if_open)

    def _close_if_open(self) -> None:
        """A sweep that died mid-way leaves its parent FAILED with the reason in ``ragexp.failure_reason``,
        not RUNNING forever: an error or an interrupt closes it as it stops (:func:`close_parent`); any other
        exit (Hydra raising at the end because a job failed) here, at exit, with the jobs accounted for.
        (``kill -9`` leaves it RUNNING; the next start on the store closes it, see
        :func:`ragexp.tracking.store.fail_orphaned_runs`.)"""
        if self.run_id is None:
            return
        reason = "the sweep stopped before its end: the process exited (an error, or a job that exited)"
        try:
            with bounded_http():
                if open_client(self.uri).get_run(self.run_id).info.status != "RUNNING":
                    return
            self._finish(self.config, stopped=reason)
        except BaseException:  # noqa: BLE001 - at least close the parent
            close_failed(self.uri, self.run_id, scrub(reason), if_running=True)

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        from ragexp.results.gate_files import collect_failures

        missed = collect_failures(str(config.hydra.sweep.dir))  # floors missed by the jobs, whatever ran them
        if self.run_id is None:
            if missed:
                raise GateFailed()
            return
        _mark_ended(config)  # an upload may close the parent from now on (close_after_upload)
        try:
            failed = self._finish(config)
        except Exception as exc:  # noqa: BLE001 - the children's results are on disk; say so in one line
            print(f"ragexp: error: the sweep's parent run {self.run_id} could not be completed in "
                  f"{scrub(str(self.uri))}: {scrub(first_line(exc))}; it is closed by the upload below (or "
                  f"FAILED at exit if the store answers by then)", file=sys.stderr)
            failed = 0  # the parent is closed FAILED at exit (_close_if_open), else by the upload
        else:
            _redact_sweep_files(config)  # multirun.yaml (and a sweeper's results) as they are now final
        finally:
            os.environ.pop(PARENT_ENV, None)
        unlogged = _say_unlogged(config)
        if missed:
            raise GateFailed()
        if failed:
            sys.exit(1)  # a job's run ended FAILED (its process was killed): the sweep did not succeed
        if unlogged:
            sys.exit(3)  # every job computed and saved, some are not in MLflow yet (docs/guarantees.md)

    def _finish(self, config: DictConfig, stopped: str | None = None) -> int:
        """Close the parent: killed jobs recorded FAILED, the children's table, how many jobs failed
        (tag ``ragexp.jobs_failed``, metric ``sweep/jobs_failed``), the leaderboard; FAILED with the
        reason when a job failed or the sweep stopped early. Returns how many jobs failed or never ran."""
        from ragexp.tracking.jobs import JOBS_FAILED_METRIC, JOBS_FAILED_TAG, record_unreported, sweep_size
        from ragexp.tracking.leaderboard import log_leaderboard

        from ragexp.tracking.jobs import unlogged_jobs

        with bounded_http():  # a server gone at the sweep's end fails in seconds, not minutes
            client = open_client(self.uri)
            parent = retrying(client.get_run, self.run_id)  # a store still gone fails here, before any upload try
            record_unreported(config)  # jobs whose process was killed before they could report
            fail_orphaned_runs(client)  # a run a killed job's process had opened and could not close
            children = retrying(client.search_runs, [parent.info.experiment_id], max_results=5000,
                                filter_string=f"tags.mlflow.parentRunId = '{self.run_id}'")
            rows = [{"run_id": c.info.run_id, "run_name": c.info.run_name, "status": c.info.status,
                     **({"failure_reason": c.data.tags[FAILURE_TAG]} if FAILURE_TAG in c.data.tags else {}),
                     **{f"param.{k}": v for k, v in c.data.params.items() if k in _overridden(config)},
                     **c.data.metrics} for c in children]
            failed = [c for c in children if c.info.status == "FAILED"]
            planned = sweep_size(config)
            unlogged = unlogged_jobs(str(config.hydra.sweep.dir))  # saved, not logged: the store was away
            unstarted = max(0, (planned or 0) - len(children) - len(unlogged))  # the launcher stopped before they ran
            retrying(client.log_dict, self.run_id, redact({"children": rows}), "sweep_results.json")
            retrying(client.log_metric, self.run_id, "sweep/children", float(len(rows)))
            retrying(client.log_metric, self.run_id, JOBS_FAILED_METRIC, float(len(failed)))
            retrying(client.set_tag, self.run_id, JOBS_FAILED_TAG, str(len(failed)))
            from ragexp.stats.intervals import DEFAULTS

            given = OmegaConf.to_container(config.stats, resolve=True) if config.get("stats") else {}
            stats = {**DEFAULTS, **given}  # what the node leaves out: conf/stats/default.yaml's, once, here
            try:  # the sweep's leaderboard on the parent run (ragexp.tracking.leaderboard)
                log_leaderboard(client, self.run_id, children, primary=stats.get("primary"),
                                objective=config.get("objective"), stats=stats, sweep_dir=str(config.hydra.sweep.dir))
            except Exception as exc:  # noqa: BLE001 - the children are logged; say why the board is missing
                print(f"[ragexp] warning: no sweep leaderboard: {type(exc).__name__}: {exc}")
            if planned is not None:
                retrying(client.log_metric, self.run_id, "sweep/jobs_planned", float(planned))
            if failed or stopped or unstarted or unlogged:
                said = "; ".join(f"{c.info.run_name}: {c.data.tags.get(FAILURE_TAG, '?')}" for c in failed[:3])
                more = f" (and {len(failed) - 3} more)" if len(failed) > 3 else ""
                total = planned or len(children) + len(unlogged)
                reason = (f"{len(failed)} of {total} jobs failed: {said}{more}" if failed
                          else stopped or ("" if unlogged and not unstarted else "the sweep stopped early"))
                if unstarted:
                    reason += f"; {unstarted} of {total} jobs never started (the launcher stopped)"
                if unlogged:
                    reason += (f"; {len(unlogged)} of {total} jobs computed and saved but not logged (the store did "
                               f"not answer): log them with {upload_command(unlogged)}")
                retrying(client.set_tag, self.run_id, FAILURE_TAG, scrub(str(reason.lstrip("; ")))[:4000])
            elif FAILURE_TAG in parent.data.tags:  # closed again after an upload: the old reason no longer holds
                retrying(client.delete_tag, self.run_id, FAILURE_TAG)
            retrying(client.set_terminated, self.run_id,
                     "FAILED" if failed or stopped or unstarted or unlogged else "FINISHED")
        where = scrub(self.uri) if str(self.uri).startswith("http") else ui_command(str(self.uri))
        gone = f" ({len(failed)} FAILED, each with its reason in {FAILURE_TAG})" if failed else ""
        gone += f"; {unstarted} of {planned} jobs never started" if unstarted else ""
        print(f"[ragexp] sweep parent run {self.run_id} holds {len(rows)} child runs{gone}; compare them with: "
              f"{where}", file=sys.stderr if failed or unstarted else sys.stdout)
        return len(failed) + unstarted

    def on_job_end(self, config: DictConfig, job_return: Any, **kwargs: Any) -> None:
        """A job of the sweep that failed (in whatever process ran it) becomes a FAILED child run with the
        reason; the other jobs go on. The Ray launcher calls this for a job whose worker died."""
        from hydra.core.utils import JobStatus

        if str(config.hydra.mode) == "RunMode.MULTIRUN":
            # Hydra's launcher keeps every job's return to the sweep's end; its two copies of the job's config
            # (and, through the Hydra node's parent, the whole composed sweep config) are read by no sweeper:
            # dropped, a sweep no longer grows by one config a job (0.3-0.7 MB; docs/performance.md, "Sweeps")
            job_return.cfg = job_return.hydra_cfg = None
        if job_return.status != JobStatus.FAILED or str(config.hydra.mode) != "RunMode.MULTIRUN":
            return
        from ragexp.tracking.jobs import failure_reason, record_failed_job

        import contextlib
        import io

        try:  # a failed job's return_value raises its exception (and says so on stderr: kept quiet)
            with contextlib.redirect_stderr(io.StringIO()):
                job_return.return_value
            reason = failure_reason(None)
        except BaseException as exc:  # noqa: BLE001 - the job's own exception, whatever it was
            reason = failure_reason(exc)
        where = scrub(" ".join(str(o) for o in config.hydra.overrides.task)) or f"#{config.hydra.job.num}"
        try:
            run_id = record_failed_job(config, reason)
        except Exception as exc:  # noqa: BLE001 - the sweep's end counts it again (its folder has no results)
            print(f"ragexp: warning: job {where} failed ({reason}); its FAILED run could not be logged: "
                  f"{scrub(first_line(exc))}", file=sys.stderr)
            return
        if run_id:
            print(f"ragexp: job {where} FAILED: {reason} (MLflow run {run_id})", file=sys.stderr)

    def on_job_start(self, config: DictConfig, **kwargs: Any) -> None:
        """Hydra has just written this job's ``.hydra/*.yaml`` (and the sweep's ``multirun.yaml``):
        rewrite them with secrets redacted before the job does any work."""
        _redact_hydra_files(config)


def upload_command(folders: list[Path]) -> str:
    """The one command that logs these saved results folders (under their sweep's parent run)."""
    import shlex

    return " ".join([UPLOAD_COMMAND, *(shlex.quote(str(f)) for f in folders)])


def _say_unlogged(config: DictConfig) -> int:
    """At the sweep's end: which jobs computed and saved their results but are not in MLflow (the store went
    away), and the exact command that logs them; how many."""
    from ragexp.tracking.jobs import unlogged_jobs

    folders = unlogged_jobs(str(config.hydra.sweep.dir))
    if folders:
        names = ", ".join(f.name for f in folders)
        print(f"ragexp: {len(folders)} job(s) of this sweep computed and saved their results but are not logged "
              f"to MLflow (the tracking store did not answer): {names}. Log them, and close the sweep's parent "
              f"run, with:\n  {upload_command(folders)}", file=sys.stderr)
    return len(folders)


def _mark_ended(config: DictConfig) -> None:
    """The sweep's parent file says the sweep has ended: from then on an upload may close the parent."""
    path = Path(str(config.hydra.sweep.dir)) / PARENT_FILE
    try:
        saved = json.loads(path.read_text())
        path.write_text(json.dumps({**saved, "ended": True}))
    except (OSError, ValueError):
        pass


def close_after_upload(folder: Path, uri: str) -> str | None:
    """After ``folder`` (a sweep's folder or a job folder in it) was uploaded: when that sweep has ended,
    close (again) its parent run with the jobs as they stand now — FINISHED once every job is logged and none failed, else
    FAILED with the reason. Returns a line to print, or None (not a sweep's job, or the sweep still runs)."""
    sweep_dir = next((p for p in (Path(folder), *Path(folder).parents) if (p / PARENT_FILE).is_file()), None)
    if sweep_dir is None:
        return None
    try:
        saved = json.loads((sweep_dir / PARENT_FILE).read_text())
    except (OSError, ValueError):
        return None
    if not saved.get("ended") or not saved.get("run_id") or saved.get("tracking_uri") != redact_url(uri):
        return None
    config = OmegaConf.load(sweep_dir / "multirun.yaml")
    OmegaConf.update(config, "hydra.sweep.dir", str(sweep_dir), force_add=True)
    callback = ParentRunCallback()
    callback.run_id, callback.uri = saved["run_id"], uri
    failed = callback._finish(config)
    with bounded_http():
        status = open_client(uri).get_run(saved["run_id"]).info.status
    return f"sweep parent run {saved['run_id']} closed {status}" + (f" ({failed} jobs failed)" if failed else "")


def _redact_hydra_files(config: DictConfig) -> None:
    """Hydra's copies of the config and overrides in the job's output folder, secrets redacted."""
    try:
        hydra = config.hydra
        if hydra.output_subdir is not None:
            for f in (Path(str(hydra.runtime.output_dir)) / str(hydra.output_subdir)).glob("*.yaml"):
                redact_yaml_file(f)
        if str(hydra.mode) == "RunMode.MULTIRUN":
            _redact_sweep_files(config)
    except Exception as exc:  # noqa: BLE001 - never stop a job over this; say it
        print(f"ragexp: warning: could not redact Hydra's files: {type(exc).__name__}: {exc}", file=sys.stderr)


def _redact_sweep_files(config: DictConfig) -> None:
    """The sweep folder's own YAML files (``multirun.yaml``, Optuna's ``optimization_results.yaml``)."""
    for f in Path(str(config.hydra.sweep.dir)).glob("*.yaml"):
        redact_yaml_file(f)


def _overridden(config: DictConfig) -> set[str]:
    """The dotted keys a sweep varies (``retriever.top_k=3,5`` → ``retriever.top_k``)."""
    keys = set()
    for override in config.hydra.overrides.task:
        key = str(override).split("=", 1)[0].lstrip("+~")
        key = key if "/" not in key else key.split("/")[-1]
        keys.add(key)
        if "." not in key:  # a group choice (retriever=bm25,dense): its options carry `name`
            keys.add(f"{key}.name")
    return keys


def _sweep_name(config: DictConfig, overrides: list[str]) -> str:
    """The parent's name: what the sweep varies and when it started (``sweep retriever=bm25,dense ×
    top_k=3,5 · 2026-11-23 14:05``), from the command line and the sweeper's ``params``."""
    from ragexp.results.params import sweep_name

    params = OmegaConf.select(config, "hydra.sweeper.params")
    params = OmegaConf.to_container(params, resolve=True) if params is not None else {}
    return sweep_name(overrides, params, time.strftime("%Y-%m-%d %H:%M"))


def _sweep_note(overrides: list[str]) -> str:
    """The parent's description: the command, and where the comparison is."""
    command = " ".join(["python -m ragexp -m", *overrides])
    return (f"A sweep: `{command}`. Each job is a child run below (its description gives its means, "
            "intervals and n); this run holds the comparison: `leaderboard.png`, `leaderboard.json`, "
            "`heatmap.png` (every child against the headline metrics) and `sweep_results.json` (every "
            "child's params and metrics).")


def close_parent(exc: BaseException) -> None:
    """The sweep's parent run ends FAILED now with what stopped the sweep (``exc``: a user error, Ctrl-C,
    SIGTERM), when this process opened it (not a joblib worker) and it is still RUNNING."""
    parent = os.environ.get(PARENT_ENV)
    if not parent or os.environ.get(PARENT_OWNER_ENV) != str(os.getpid()):
        return
    said = str(exc).splitlines()[0][:200] if str(exc) else ""
    why = interrupt_reason(exc) if isinstance(exc, KeyboardInterrupt) else f"{type(exc).__name__}: {said}"
    close_failed(os.environ.get(PARENT_URI_ENV) or resolve_uri(None), parent,
                 scrub(f"the sweep stopped before its end: {why}"), if_running=True)


def _writable_output(folder: str, key: str) -> None:
    """Before Hydra makes the run's output folder: one line and exit 2 when it cannot be written (a launch
    from a read-only folder), not the traceback of Hydra's mkdir."""
    where = Path(folder).absolute()
    while not where.exists() and where.parent != where:
        where = where.parent
    if not os.access(where, os.W_OK | os.X_OK):
        print(f"ragexp: error: cannot write the run's output folder {folder}: {where} is read-only; start ragexp "
              f"from a folder you can write (cd ~), or point it elsewhere with {key}=/a/writable/folder",
              file=sys.stderr)
        sys.exit(2)


def _checked_store(uri: str, experiment: str) -> tuple[Any, str]:
    """The store checked before the sweep starts: one line and exit 2 if MLflow cannot use it."""
    try:
        return check_store(uri, experiment)
    except TrackingError as exc:  # raised inside Hydra, which would print it with a traceback hint
        print(f"ragexp: error: {scrub(str(exc))}", file=sys.stderr)
        sys.exit(2)
