"""Everything that talks to MLflow: run creation, params, metrics, artifacts, sweeps.

- ``params``     the few params and the name that tell a run apart
- ``store``      the tracking URI (``./mlflow.db`` by default) and retry on a locked SQLite store
- ``log``        logging one evaluation run (docs/tracking.md#what-a-run-leaves-in-mlflow)
- ``callbacks``  the Hydra callback that opens one parent run per multirun
"""

import os as _os

# ragexp sends nothing anywhere: MLflow's usage telemetry is off unless the user turns it on.
_os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
