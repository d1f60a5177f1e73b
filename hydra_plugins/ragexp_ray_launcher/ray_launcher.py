"""The launcher class Hydra instantiates for ``hydra/launcher=ray`` (conf/hydra/launcher/ray.yaml).

Its config has the shape of hydra-ray-launcher's: ``ray.init`` (keyword arguments of
``ray.init``: ``address``, ``num_cpus``, ``include_dashboard``, ...), ``ray.remote`` (options of
each job's task: ``num_cpus``, ``memory``, ``max_retries``, ...), and ``ray.env_vars`` (names of
environment variables the driver passes to every job).
"""

from __future__ import annotations

from typing import Any, Sequence

from hydra.plugins.launcher import Launcher


class RagexpRayLauncher(Launcher):
    """Runs each job of a multirun as one Ray task, locally or on an existing cluster."""

    def __init__(self, ray: Any) -> None:
        self.ray_cfg = ray
        self.hydra_context: Any = None
        self.task_function: Any = None
        self.config: Any = None

    def setup(self, *, hydra_context: Any, task_function: Any, config: Any) -> None:
        self.hydra_context, self.task_function, self.config = hydra_context, task_function, config

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[Any]:
        from ._core import launch

        return launch(self, job_overrides, initial_job_idx)
