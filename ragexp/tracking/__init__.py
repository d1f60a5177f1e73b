"""Everything that talks to MLflow; what a run writes to disk is :mod:`ragexp.results`', what a person
reads :mod:`ragexp.report`'s.

- ``store``       the tracking URI (``./mlflow.db`` by default), its checks, retry on a locked SQLite store
- ``log``         saving one evaluation run's folder and logging it (docs/tracking.md#what-a-run-leaves-in-mlflow)
- ``upload``      ``python -m ragexp.tracking.upload``: log saved folders later
- ``launch``      which launch and which sweep's parent run a run nests under (ids, the parent's file)
- ``callbacks``   the Hydra callback that opens one parent run per multirun and closes it
- ``jobs``        a sweep's failed and killed jobs, each a FAILED child run
- ``leaderboard`` a sweep's leaderboard logged on its parent run
- ``traces``      each sample as an MLflow trace with its assessments
- ``scorers``     ragexp's metrics as ``mlflow.genai`` scorers
- ``runs``        finding and reading logged runs (``python -m ragexp.compare``), logging a comparison
- ``testset``     a generated test set as an MLflow run
- ``settings``    the ``tracking`` config node as typed settings, built once at the top and passed down
"""

import os as _os

# ragexp sends nothing anywhere: MLflow's usage telemetry is off unless the user turns it on.
_os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
