"""RunState: the store a resumed run's MLflow run is continued in."""

from cudal1.pipeline.state import RunState


def test_a_resumed_run_continues_in_the_store_it_started_in(tmp_path):
    run_dir = tmp_path / "elsewhere" / "a"
    assert RunState().tracking_store(run_dir) is None  # a new run: the project's default
    recorded = RunState(mlflow_run_id="abc", mlflow_uri="sqlite:////p/runs/mlflow.db")
    assert recorded.tracking_store(run_dir) == "sqlite:////p/runs/mlflow.db"
    old = RunState(mlflow_run_id="abc")  # recorded before state.json named its store
    assert old.tracking_store(run_dir) is None  # nothing beside it either
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "mlflow.db").touch()  # the default of that time, beside the run
    assert old.tracking_store(run_dir) == f"sqlite:///{(tmp_path / 'elsewhere' / 'mlflow.db').resolve()}"
    assert RunState().tracking_store(run_dir) is None  # no MLflow run to continue: the default
