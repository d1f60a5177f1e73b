"""What the Ray launcher does: start (or join) Ray, run each job as a task, account for every job.

- ``ray.init`` gets ``hydra.launcher.ray.init``; ``address: local`` (the default) starts a private
  Ray instance on this machine, ``auto`` or ``ray://HOST:10001`` joins an existing cluster (then
  the options that only make sense for a new instance, such as ``num_cpus``, are left out).
- Each job is one task with ``hydra.launcher.ray.remote`` as its options (``num_cpus: 1``,
  ``max_retries: 0``: a job whose worker died is recorded FAILED rather than run again).
- A local instance listens on 127.0.0.1 only — GCS, raylet, workers, agents, and the dashboard when asked for
  (``dashboard_host``): ray is imported with Ray's single-machine switch on (:func:`ragexp._compat.import_ray`;
  no ``ray.init`` option does it on Linux). A process that imported ray earlier gets a warning line.
- A job needs what the launching process has: the environment variables ragexp's jobs read (the
  sweep's launch id and parent run, the tracking URI, ...) travel as the task's ``runtime_env`` —
  except those holding a secret (a store URL with its password, a key, a typed secret override:
  :func:`split_secrets`) and every variable ``hydra.launcher.ray.env_vars`` names, which travel as an argument of the task, set in the worker's environment
  by the job itself: Ray writes a task's ``runtime_env`` to its logs (``runtime_env_agent.log``), never
  its arguments,
  and the task works in the launch directory (where relative paths — the dataset, the index and
  judge caches, the sweep folder — were meant), which on a cluster must be a shared file system.
- A job that raised ends FAILED as with Hydra's basic launcher; a job whose worker process died
  (killed, out of memory) cannot report itself, so this process does: a FAILED ``JobReturn`` with
  the reason, passed to the callbacks' ``on_job_end`` (ragexp logs a FAILED run for it), and the
  other jobs go on.
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path
from typing import Any, Sequence

log = logging.getLogger(__name__)

#: Environment variables of the launching process every job gets (when set): the sweep's launch id
#: and parent run, the store, the offline price map litellm needs, where the datasets are.
RAGEXP_ENV = ("RAGEXP_LAUNCH_ID", "RAGEXP_PARENT_RUN_ID", "RAGEXP_PARENT_TRACKING_URI", "MLFLOW_TRACKING_URI",
              "LITELLM_LOCAL_MODEL_COST_MAP", "RAGEXP_DATA_DIR", "MLFLOW_HTTP_REQUEST_MAX_RETRIES",
              "MLFLOW_HTTP_REQUEST_TIMEOUT")

#: ``ray.init`` options for a new local instance only; Ray refuses them when joining a cluster.
LOCAL_ONLY = ("num_cpus", "num_gpus", "resources", "object_store_memory", "include_dashboard", "dashboard_host",
              "dashboard_port", "_temp_dir", "_node_ip_address")
#: A local instance's dashboard (when ``include_dashboard``) listens on the loopback interface only
LOOPBACK = {"dashboard_host": "127.0.0.1"}


def forwarded_env(extra: Sequence[str]) -> dict[str, str]:
    """The variables (ragexp's own, the typed secret overrides, then ``extra`` names) set in this process."""
    from ragexp.common.secrets import HIDDEN_ENV

    names = list(RAGEXP_ENV) + [n for n in os.environ if n.startswith(HIDDEN_ENV)] + [str(n) for n in extra]
    return {n: os.environ[n] for n in names if n in os.environ}


def split_secrets(env: dict[str, str]) -> tuple[dict[str, str], dict[str, str]]:
    """(plain, secret) variables: secret when the name says so, the config names it as holding a key, it holds
    a typed secret override, or its value holds credentials (:func:`ragexp.common.secrets.holds_secret`).

    >>> split_secrets({"RAGEXP_LAUNCH_ID": "x1", "MLFLOW_TRACKING_URI": "postgresql://u:pw-123@db/runs"})
    ({'RAGEXP_LAUNCH_ID': 'x1'}, {'MLFLOW_TRACKING_URI': 'postgresql://u:pw-123@db/runs'})
    """
    from ragexp.common.secrets import holds_secret

    plain, secret = {}, {}
    for k, v in env.items():
        (secret if holds_secret(k, v) else plain)[k] = v
    return plain, secret


def init_options(init: dict[str, Any]) -> dict[str, Any]:
    """``ray.init`` keyword arguments: unset keys dropped, local-only ones dropped when joining a cluster.

    >>> init_options({"address": "local", "num_cpus": 2, "include_dashboard": False, "namespace": None})
    {'address': 'local', 'num_cpus': 2, 'include_dashboard': False}
    >>> init_options({"address": "ray://head:10001", "num_cpus": 2, "include_dashboard": False})
    {'address': 'ray://head:10001'}
    """
    opts = {k: v for k, v in init.items() if v is not None}
    if str(opts.get("address", "local")) != "local":
        return {k: v for k, v in opts.items() if k not in LOCAL_ONLY}
    return {**(LOOPBACK if opts.get("include_dashboard") else {}), **opts}


def launch(launcher: Any, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> list[Any]:
    from ragexp.common.extras import require

    require("ray", feature="hydra/launcher=ray")  # one line naming the extra, not an import traceback
    from hydra.core.singleton import Singleton
    from hydra.core.utils import configure_log, filter_overrides, setup_globals
    from omegaconf import OmegaConf, open_dict

    setup_globals()
    config = launcher.config
    configure_log(config.hydra.hydra_logging, config.hydra.verbose)
    Path(str(config.hydra.sweep.dir)).mkdir(parents=True, exist_ok=True)
    ray_cfg = OmegaConf.to_container(launcher.ray_cfg, resolve=True) or {}
    started = _start(ray_cfg.get("init") or {})  # imports ray first
    import ray

    remote = {"max_retries": 0, **(ray_cfg.get("remote") or {})}
    runtime_env = dict(remote.get("runtime_env") or {})
    extra = [str(n) for n in ray_cfg.get("env_vars") or []]
    plain, secret = split_secrets(forwarded_env([]))
    secret.update({n: os.environ[n] for n in extra if n in os.environ})  # the user's own: keys, mostly
    runtime_env["env_vars"] = {**plain, **(runtime_env.get("env_vars") or {})}
    remote["runtime_env"] = runtime_env
    task = ray.remote(**remote)(_run_job)
    launch_dir = str(config.hydra.runtime.cwd)
    log.info(f"Ray launcher: {len(job_overrides)} jobs, sweep folder {config.hydra.sweep.dir}")

    submitted = []
    for n, overrides in enumerate(job_overrides):
        idx = initial_job_idx + n
        log.info(f"\t#{idx} : {' '.join(filter_overrides(overrides))}")
        sweep_config = launcher.hydra_context.config_loader.load_sweep_config(config, list(overrides))
        with open_dict(sweep_config):
            sweep_config.hydra.job.id = f"ray_{config.hydra.job.name}_{idx}"
            sweep_config.hydra.job.num = idx
        ref = task.remote(launcher.hydra_context, sweep_config, launcher.task_function, Singleton.get_state(),
                          launch_dir, secret)
        submitted.append((sweep_config, ref))
    try:
        return [_result(launcher, sweep_config, ref) for sweep_config, ref in submitted]
    finally:
        if started:
            ray.shutdown()


def _start(init: dict[str, Any]) -> bool:
    """Start or join Ray unless this process already did; whether this call started it."""
    from ragexp._compat import import_ray, ray_exposed

    opts = init_options(init)
    address = str(opts.get("address", "local"))
    ray = import_ray(address)  # a local instance on 127.0.0.1 only
    if ray.is_initialized():
        return False
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")  # no usage report leaves the machine
    log.info(f"Ray launcher: ray.init({', '.join(f'{k}={v!r}' for k, v in opts.items())})")
    ray.init(**opts)
    warning = ray_exposed(ray, address)
    if warning:
        print(warning, file=sys.stderr)
    return True


def _result(launcher: Any, sweep_config: Any, ref: Any) -> Any:
    """The job's ``JobReturn``; for a task Ray lost (its worker died), a FAILED one this process reports."""
    import ray

    try:
        return ray.get(ref)
    except ray.exceptions.RayError as exc:
        num = sweep_config.hydra.job.num
        if isinstance(exc, ray.exceptions.WorkerCrashedError):
            reason = "its Ray worker process died while running it (killed, out of memory, or a crash)"
        else:
            reason = f"Ray could not run it: {type(exc).__name__}: {_first_line(exc)}"
        ret = _failed_return(sweep_config, RuntimeError(f"job #{num}: {reason}"))
        launcher.hydra_context.callbacks.on_job_end(config=sweep_config, job_return=ret)
        return ret


def _failed_return(sweep_config: Any, exc: BaseException) -> Any:
    from hydra.core.utils import JobReturn, JobStatus
    from omegaconf import OmegaConf

    ret = JobReturn()
    ret.cfg = sweep_config
    ret.hydra_cfg = sweep_config
    ret.overrides = OmegaConf.to_container(sweep_config.hydra.overrides.task)
    ret.status = JobStatus.FAILED
    ret.return_value = exc
    return ret


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:300] if text else ""


def _run_job(hydra_context: Any, sweep_config: Any, task_function: Any, singleton_state: Any,
             launch_dir: str, secret_env: dict[str, str] | None = None) -> Any:
    """One job, in a Ray worker: in the launch directory, as Hydra's own launchers run it, with the launching
    process's secret variables set (they came as this argument, not in the logged ``runtime_env``)."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.core.singleton import Singleton
    from hydra.core.utils import JobStatus, run_job, setup_globals

    os.environ.update(secret_env or {})
    setup_globals()
    Singleton.set_state(singleton_state)
    if os.path.isdir(launch_dir):
        os.chdir(launch_dir)
    else:
        print(f"ragexp: warning: the launch directory {launch_dir} does not exist on this Ray worker "
              f"({os.uname().nodename}); relative paths are read from {os.getcwd()} (use a shared file system)",
              file=sys.stderr)
    HydraConfig.instance().set_config(sweep_config)
    try:
        return run_job(hydra_context=hydra_context, task_function=task_function, config=sweep_config,
                       job_dir_key="hydra.sweep.dir", job_subdir_key="hydra.sweep.subdir")
    except SystemExit as exc:  # the job stopped itself (ragexp: a user error is one line and exit 2)
        ret = _failed_return(sweep_config, RuntimeError(f"the job exited with status {exc.code}"))
        if exc.code in (0, None):
            ret.status, ret.return_value = JobStatus.COMPLETED, None
        else:
            hydra_context.callbacks.on_job_end(config=sweep_config, job_return=ret)
        return ret
