"""The run a comparison names (``baseline=`` / ``candidate=``), read from a real MLflow store: a name with a
typo says which run names are close (H8's walkthrough: ``baseline='dataset.system=wek'`` said only that no run
had that name)."""

from __future__ import annotations

import pytest


def test_a_mistyped_run_name_names_the_closest_runs(tmp_path):
    import mlflow

    from ragexp.errors import ConfigError
    from ragexp.tracking.runs import find_run

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = mlflow.MlflowClient(uri)
    experiment = client.create_experiment("ragexp", artifact_location=str(tmp_path / "artifacts"))
    for name in ("dataset.system=strong", "dataset.system=weak"):
        run = client.create_run(experiment, run_name=name)
        client.set_terminated(run.info.run_id)
    assert find_run(client, "dataset.system=weak", "baseline").info.run_name == "dataset.system=weak"
    with pytest.raises(ConfigError) as typo:
        find_run(client, "dataset.system=wek", "baseline")
    assert str(typo.value) == ("baseline=dataset.system=wek: no finished run has this id or name in the store; "
                               "did you mean 'dataset.system=weak'?")
    with pytest.raises(ConfigError) as far:
        find_run(client, "nosuch", "candidate")
    assert str(far.value) == "candidate=nosuch: no finished run has this id or name in the store"
