"""A sweep's jobs that failed: each one a FAILED MLflow run under the sweep's parent, with its reason.

A job that raised reaches Hydra's ``on_job_end`` with a FAILED ``JobReturn``, in whatever process
ran it (the launching one, a joblib or submitit worker, a Ray worker): :func:`record_failed_job`
logs a FAILED child run named by the job's overrides, with ``ragexp.failure_reason``, and leaves
``job_failed.json`` in the job's folder. A job whose process was killed never gets there: the Ray
launcher reports it from the launching process; for other launchers the sweep's end finds its
folder with neither results nor that file (:func:`unreported_jobs`) and records it the same way.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ragexp.common.secrets import restore_url, scrub
from ragexp.errors import ConfigError, RagexpError

if TYPE_CHECKING:
    from ragexp.tracking.settings import TrackingSettings

#: Left in a job's folder once its FAILED run is recorded (the job is accounted for).
FAILED_FILE = "job_failed.json"
#: The parent run's tag and metric: how many of the sweep's jobs failed.
JOBS_FAILED_TAG = "ragexp.jobs_failed"
JOBS_FAILED_METRIC = "sweep/jobs_failed"
JOB_TAG = "ragexp.job"
KILLED = "its process ended before the job finished (killed, out of memory, or a crash)"


def failure_reason(exc: BaseException | None) -> str:
    """One line: the exception's type and first line (secrets scrubbed).

    >>> failure_reason(ValueError("bad value\\nmore"))
    'ValueError: bad value'
    >>> failure_reason(KeyError("top_k"))
    "KeyError: 'top_k'"
    """
    if exc is None:
        return "the job failed without an exception"
    text = str(exc).strip()
    first = text.splitlines()[0][:300] if text else ""
    return scrub(f"{type(exc).__name__}: {first}" if first else type(exc).__name__)


def job_dir(config: Any) -> Path:
    """The job's output folder (Hydra's ``runtime.output_dir`` once the job ran, else sweep dir / subdir)."""
    from omegaconf import OmegaConf

    out = OmegaConf.select(config, "hydra.runtime.output_dir", default=None)
    return Path(str(out)) if out else Path(str(config.hydra.sweep.dir)) / str(config.hydra.sweep.subdir)


def record_failed_job(config: Any, reason: str, folder: Path | None = None) -> str | None:
    """Log the job as a FAILED child run of the sweep's parent; its id (None: no parent to log under).

    ``config`` is the job's composed config; the run is named by its overrides, tagged with the
    reason, the job number and the launch id, and ``job_failed.json`` is left in its folder.
    """
    from omegaconf import OmegaConf

    from ragexp.tracking.settings import TrackingSettings

    tracking = TrackingSettings.from_config(config.tracking if "tracking" in config else None)
    return _record_failed(str(config.hydra.sweep.dir), [str(o) for o in config.hydra.overrides.task],
                          OmegaConf.select(config, "hydra.job.num", default=None), tracking, reason,
                          folder or job_dir(config))


def _record_failed(sweep_dir: str, overrides: list[str], num: Any, tracking: TrackingSettings, reason: str,
                   folder: Path) -> str | None:
    from ragexp.tracking.launch import LAUNCH_TAG, PARENT_ENV, PARENT_FILE, PARENT_URI_ENV, launch_id
    from ragexp.tracking.log import MANIFEST_FILE
    from ragexp.tracking.store import FAILURE_TAG, bounded_http, open_client, resolve_uri, retrying

    if (folder / MANIFEST_FILE).exists():  # results saved: the job failed while logging, and that run is closed FAILED
        return None
    try:  # the parent this launch opened, else the one its folder names
        saved = json.loads((Path(sweep_dir) / PARENT_FILE).read_text())
    except (OSError, ValueError):
        saved = {}
    parent = os.environ.get(PARENT_ENV) or saved.get("run_id")
    if not parent:
        return None
    try:  # saved without credentials: restored from the environment
        saved = restore_url(saved["tracking_uri"]) if saved.get("tracking_uri") else None
    except ConfigError:
        saved = None
    uri = os.environ.get(PARENT_URI_ENV) or saved or resolve_uri(tracking.uri)
    tags = {"mlflow.parentRunId": parent, FAILURE_TAG: scrub(reason), LAUNCH_TAG: launch_id(),
            "ragexp.overrides": scrub(" ".join(overrides))}
    if num is not None:
        tags[JOB_TAG] = str(num)
    with bounded_http():
        client = open_client(uri)
        exp_id = retrying(client.get_run, parent).info.experiment_id
        run = retrying(client.create_run, exp_id, run_name=scrub(",".join(overrides) or f"job {num}"), tags=tags)
        retrying(client.set_terminated, run.info.run_id, "FAILED")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / FAILED_FILE).write_text(json.dumps({"run_id": run.info.run_id, "reason": scrub(reason)}))
    except OSError:
        pass
    return run.info.run_id


def unreported_jobs(sweep_dir: str | Path) -> list[Path]:
    """Job folders of the sweep that started (Hydra wrote ``.hydra/overrides.yaml``) and then neither
    saved results (``mlflow_run.json``) nor recorded a failure: their process was killed."""
    from ragexp.tracking.log import MANIFEST_FILE

    found = []
    for f in sorted(Path(sweep_dir).glob("**/.hydra/overrides.yaml")):
        folder = f.parent.parent
        if folder == Path(sweep_dir):
            continue
        if not (folder / MANIFEST_FILE).exists() and not (folder / FAILED_FILE).exists():
            found.append(folder)
    return found


def unlogged_jobs(sweep_dir: str | Path) -> list[Path]:
    """Job folders of the sweep whose results were saved (``mlflow_run.json``) but never logged and that
    recorded no failure: their process was killed between the two (loky ends every worker when one dies)."""
    from ragexp.tracking.log import MANIFEST_FILE

    found = []
    for f in sorted(Path(sweep_dir).glob(f"**/{MANIFEST_FILE}")):
        if (f.parent / FAILED_FILE).exists():
            continue
        try:
            logged = json.loads(f.read_text()).get("logged")
        except (OSError, ValueError):
            continue
        if logged is None:
            found.append(f.parent)
    return found


def log_unlogged(config: Any) -> int:
    """Log, at the sweep's end, the results its killed jobs had saved (:func:`unlogged_jobs`): a finished
    evaluation is a run, not a loss; how many were logged. One that cannot be logged says so in one line."""
    import sys

    from ragexp.tracking.log import log_run

    done = 0
    for folder in unlogged_jobs(str(config.hydra.sweep.dir)):
        try:
            log_run(folder)
            done += 1
        except Exception as exc:  # noqa: BLE001 - the other jobs are still to be counted; say it in one line
            said = str(exc) if isinstance(exc, RagexpError) else f"{type(exc).__name__}: {exc}"
            print(f"ragexp: warning: job {folder.name} saved its results but was stopped before logging them, "
                  f"and they could not be logged now: {scrub(said)}", file=sys.stderr)
    return done


def record_unreported(config: Any) -> int:
    """Record every killed job of the sweep (:func:`unreported_jobs`) as a FAILED run; how many. The
    results a killed job had saved but not logged are logged first (:func:`log_unlogged`)."""
    import yaml

    from ragexp.tracking.settings import TrackingSettings

    log_unlogged(config)
    tracking = TrackingSettings.from_config(config.tracking if "tracking" in config else None)
    done = 0
    for folder in unreported_jobs(str(config.hydra.sweep.dir)):
        try:
            saved = [str(o) for o in (yaml.safe_load((folder / ".hydra" / "overrides.yaml").read_text()) or [])]
        except (OSError, ValueError, yaml.YAMLError):
            saved = []
        if _record_failed(str(config.hydra.sweep.dir), saved, folder.name, tracking, KILLED, folder) is not None:
            done += 1
    return done


def sweep_size(config: Any) -> int | None:
    """How many jobs the sweep launches (Hydra's basic sweeper: the product of the swept values, from
    ``hydra.sweeper.params`` and the command line); None for another sweeper (Optuna decides as it goes)."""
    from omegaconf import OmegaConf

    if not str(OmegaConf.select(config, "hydra.sweeper._target_", default="")).endswith(".BasicSweeper"):
        return None
    try:
        import math

        from hydra.core.override_parser.overrides_parser import OverridesParser

        params = OmegaConf.select(config, "hydra.sweeper.params", default=None) or {}
        args = [f"{k}={v}" for k, v in params.items()] + [str(o) for o in config.hydra.overrides.task]
        values = {}  # a key's last override wins, as in the basic sweeper; the jobs are every combination
        for o in OverridesParser.create().parse_overrides(args):
            values[o.get_key_element()] = len(list(o.sweep_string_iterator())) if o.is_sweep_override() else 1
        return math.prod(values.values())
    except Exception:  # noqa: BLE001 - a sweep it cannot enumerate here (glob, interval): say nothing rather than something wrong
        return None
