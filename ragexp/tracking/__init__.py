"""Everything that talks to MLflow: run creation, params, metrics, artifacts, sweeps.

- ``secrets``    flattening the config to params, and redacting secrets everywhere
- ``store``      the tracking URI (``./mlflow.db`` by default) and retry on a locked SQLite store
- ``log``        logging one evaluation run (SPEC §4)
- ``callbacks``  the Hydra callback that opens one parent run per multirun
"""
