"""Tracker against a real local MLflow store (SQLite + local artifacts), read back with MlflowClient.

One store per module: creating the SQLite schema takes seconds, a run in it milliseconds.
"""

import json
import logging
import time
from pathlib import Path
from urllib.parse import urlparse
from urllib.request import url2pathname

import pytest

from cudal1.tracking import Tracker, TrackingError, default_tracking_uri, flatten_config, resolve_tracking_uri

mlflow = pytest.importorskip("mlflow")


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    """A project's runs/ folder whose default store (runs/mlflow.db) exists; the env cannot
    redirect it. The trackers here run with the project (`root.parent`) as working directory."""
    runs = tmp_path_factory.mktemp("project") / "runs"
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("MLFLOW_TRACKING_URI", raising=False)
        mp.chdir(runs.parent)
        Tracker(None, "cudal1-test", runs / "init").close()
    return runs


@pytest.fixture
def tracker(root, request, monkeypatch):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.chdir(root.parent)
    t = Tracker(None, "cudal1-test", root / request.node.name)
    yield t
    t.close()


@pytest.fixture
def client(tracker):
    return mlflow.MlflowClient(tracker.uri)


def _local(uri: str) -> Path:
    return Path(url2pathname(urlparse(uri).path))


def test_default_store_is_the_projects_sqlite_file(root, tracker, client):
    assert tracker.uri == default_tracking_uri() == default_tracking_uri(root.parent)
    assert tracker.uri == f"sqlite:///{root.resolve()}/mlflow.db"
    assert (root / "mlflow.db").is_file()
    run = client.get_run(tracker.run_id)
    assert _local(run.info.artifact_uri).is_relative_to(root.resolve() / "mlartifacts")
    assert run.info.run_name == "test_default_store_is_the_projects_sqlite_file"
    assert run.info.status == "RUNNING"


def test_run_dirs_in_different_folders_share_the_projects_store(root, tmp_path, monkeypatch, client):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.chdir(root.parent)
    elsewhere = tmp_path / "scratch" / "exp1" / "a"  # not under the project at all
    with Tracker(None, "cudal1-test", elsewhere) as a, Tracker(None, "cudal1-test", root / "nested" / "b") as b:
        assert a.uri == b.uri == f"sqlite:///{root.resolve()}/mlflow.db"
        a.log_metrics({"x": 1.0}, step=0)
        b.log_metrics({"x": 2.0}, step=0)
    assert not (elsewhere.parent / "mlflow.db").exists() and not (root / "nested" / "mlflow.db").exists()
    exp = client.get_experiment_by_name("cudal1-test")
    found = {r.info.run_id: r for r in client.search_runs([exp.experiment_id], max_results=1000)}
    assert found[a.run_id].data.metrics == {"x": 1.0} and found[b.run_id].data.metrics == {"x": 2.0}
    assert found[a.run_id].data.tags["cudal1.run_dir"] == str(elsewhere.resolve())
    assert _local(found[a.run_id].info.artifact_uri).is_relative_to(root.resolve() / "mlartifacts")


def test_store_precedence(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    assert resolve_tracking_uri(None) == f"sqlite:///{tmp_path.resolve()}/runs/mlflow.db"
    assert resolve_tracking_uri(None, "sqlite:////old/mlflow.db") == "sqlite:////old/mlflow.db"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://mlflow:5000")
    assert resolve_tracking_uri(None, "sqlite:////old/mlflow.db") == "http://mlflow:5000"
    assert resolve_tracking_uri("sqlite:////cfg/mlflow.db") == "sqlite:////cfg/mlflow.db"
    assert not (tmp_path / "runs").exists()  # resolving creates nothing


def test_config_becomes_dotted_params(tracker, client):
    cfg = {
        "model": {"name": "small", "dtype": "float32"},
        "rollout": {"n": 4, "stop": ["```"]},
        "tracking": {"uri": None},
        "notes": "x" * 7000,
        "many": {f"k{i}": i for i in range(150)},
    }  # more than one params batch (100)
    tracker.log_config(cfg)
    params = client.get_run(tracker.run_id).data.params
    assert params["model.name"] == "small"
    assert params["rollout.n"] == "4"
    assert json.loads(params["rollout.stop"]) == ["```"]
    assert params["tracking.uri"] == "None"
    assert len(params["notes"]) == 6000 and params["notes"].endswith("[truncated]")
    assert params["many.k149"] == "149"
    assert len(params) == len(flatten_config(cfg)) == 156
    full = json.loads(_local(client.download_artifacts(tracker.run_id, "config.json")).read_text())
    assert full["notes"] == "x" * 7000  # the artifact keeps what the params truncate


def test_metrics_over_steps(tracker, client):
    for step in range(3):
        tracker.log_metrics(
            {
                "reward/mean": 0.5 * step,
                "speedup/mean": None,
                "kl": float("nan"),
                "fast_1.5": 0.25,
                "parse/bad (label)": 1,
            },
            step=step,
        )
    history = client.get_metric_history(tracker.run_id, "reward/mean")
    assert [(m.step, m.value) for m in history] == [(0, 0.0), (1, 0.5), (2, 1.0)]
    metrics = client.get_run(tracker.run_id).data.metrics
    assert "speedup/mean" not in metrics and "kl" not in metrics  # skipped, no error
    assert metrics["fast_1.5"] == 0.25
    assert metrics["parse/bad _label_"] == 1  # unsafe characters replaced, batch not lost
    assert tracker.errors == 0


def test_artifacts_text_dict_files_tables(tracker, client, tmp_path):
    tracker.log_text("## prompt\n...", "samples/step_0.md")
    tracker.log_dict({"level1/1": {"speedup": 1.5, "path": Path("/x")}}, "best/solutions.json")
    (tmp_path / "best.py").write_text("class ModelNew: ...\n")
    tracker.log_artifact(tmp_path / "best.py", "best")
    (tmp_path / "buffer").mkdir()
    (tmp_path / "buffer" / "level1_1.jsonl").write_text("{}\n")
    tracker.log_artifact(tmp_path / "buffer")
    rows = [
        {"task": "level1/1", "status": "ok", "speedup": 1.5, "labels": ["custom_kernel"]},
        {"task": "level1/2", "status": "incorrect"},
    ]
    tracker.log_table(rows, "results.json")
    tracker.log_table(rows, "tables/results.csv")

    def listing(path=None):
        return sorted(a.path for a in client.list_artifacts(tracker.run_id, path))

    assert listing() == ["best", "buffer", "results.json", "samples", "tables"]
    assert listing("best") == ["best/best.py", "best/solutions.json"]
    assert listing("buffer") == ["buffer/level1_1.jsonl"]
    table = json.loads(_local(client.download_artifacts(tracker.run_id, "results.json")).read_text())
    assert table["columns"] == ["task", "status", "speedup", "labels"]
    assert table["data"][0][:3] == ["level1/1", "ok", 1.5]
    csv_text = _local(client.download_artifacts(tracker.run_id, "tables/results.csv")).read_text()
    assert csv_text.splitlines()[0] == "task,status,speedup,labels"
    assert csv_text.splitlines()[2] == "level1/2,incorrect,,"
    assert tracker.errors == 0


def test_rollout_tables_append_across_units(tracker, client, tmp_path):
    """Each unit's rollouts go to one MLflow table (the UI sorts and filters it by task, reward,
    status); a later unit appends its rows."""
    from types import SimpleNamespace

    from cudal1.pipeline.stages import ROLLOUT_TABLE, save_rollouts
    from cudal1.bench.result import EvalResult, Status
    from cudal1.records import Generation, Rollout
    from cudal1.review import ROLLOUT_COLUMNS
    from cudal1.rl.rewards import Priced

    def rollout(task, step, result, reward, parse_error=None):
        gen = Generation(prompt_ids=[1, 2], response_ids=[3, 4, 5], text="...", logprobs=[-1.0] * 3)
        return Rollout(
            task,
            step,
            0,
            0,
            "prompt",
            gen,
            parse_error=parse_error,
            result=result,
            priced=Priced(reward, "ok" if result else "unparsed"),
        )

    ctx = SimpleNamespace(run_dir=tmp_path, tracker=tracker)
    ok = EvalResult("level1/1", Status.OK, speedup=1.7, labels=["custom_kernel", "pytorch_only"], message="correct")
    save_rollouts(ctx, [rollout("level1/1", 3, ok, 0.5)], "rl_step0")
    save_rollouts(ctx, [rollout("level1/2", 4, None, -2.3, parse_error="no code block")], "rl_step1")
    table = json.loads(_local(client.download_artifacts(tracker.run_id, ROLLOUT_TABLE)).read_text())
    assert table["columns"] == ROLLOUT_COLUMNS
    rows = [dict(zip(table["columns"], row)) for row in table["data"]]
    assert [(r["stage"], r["unit"], r["task_id"], r["status"], r["reward"]) for r in rows] == [
        ("contrastive_rl", 0, "level1/1", "ok", 0.5),
        ("contrastive_rl", 1, "level1/2", "unparsed", -2.3),
    ]
    assert rows[0]["speedup"] == 1.7 and rows[0]["labels"] == "custom_kernel,pytorch_only"
    assert rows[0]["message"] == "correct" and rows[1]["parse_error"] == "no code block"
    assert (tmp_path / "rollouts" / "rl_step1.jsonl").is_file()  # the raw record is still written
    tags = client.get_run(tracker.run_id).data.tags
    assert {"path": ROLLOUT_TABLE, "type": "table"} in json.loads(tags["mlflow.loggedArtifacts"])
    assert tracker.errors == 0


def test_curves_are_a_png(tracker, client):
    history = [{"step": s, "reward/mean": s / 10, "speedup/mean": 1 + s / 20 if s % 2 else None} for s in range(10)]
    tracker.log_curves(history, ["reward/mean", "speedup/mean", "fast_1"], "plots/reward.png", "stage 3")
    png = _local(client.download_artifacts(tracker.run_id, "plots/reward.png")).read_bytes()
    assert png.startswith(b"\x89PNG\r\n\x1a\n") and len(png) > 5000


def test_system_metrics_are_sampled_until_close(root, monkeypatch):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.chdir(root.parent)
    t = Tracker(None, "cudal1-test", root / "sysmetrics", system_metrics_s=0.2)
    client = mlflow.MlflowClient(t.uri)
    deadline = time.monotonic() + 30
    while "system/cpu_utilization_percentage" not in client.get_run(t.run_id).data.metrics:
        assert time.monotonic() < deadline, client.get_run(t.run_id).data.metrics
        time.sleep(0.2)
    t.close()
    assert "system/system_memory_usage_megabytes" in client.get_run(t.run_id).data.metrics
    n = len(client.get_metric_history(t.run_id, "system/cpu_utilization_percentage"))
    time.sleep(1.0)  # five sampling intervals: a monitor still running would have logged more
    assert len(client.get_metric_history(t.run_id, "system/cpu_utilization_percentage")) == n


def test_stage_boundaries_are_marked(tmp_path):
    from cudal1.tracking import plot_curves, stage_starts

    history = [
        {"step": 1, "stage": "sft"},
        {"step": 2, "stage": "sft", "reward/mean": 0.1},
        {"step": 3, "stage": "self_train", "reward/mean": 0.2},
        {"step": 5},
        {"step": 6, "stage": "contrastive_rl", "reward/mean": 0.4},
        {"step": 7, "stage": "contrastive_rl"},
    ]
    assert stage_starts(history) == [(1.0, "sft"), (3.0, "self_train"), (6.0, "contrastive_rl")]
    plain = plot_curves(
        [{k: v for k, v in h.items() if k != "stage"} for h in history], ["reward/mean"], tmp_path / "plain.png"
    )
    marked = plot_curves(history, ["reward/mean"], tmp_path / "marked.png")
    assert marked.read_bytes() != plain.read_bytes()  # the lines and names are drawn


def test_checkpoint_registered_as_a_transformers_model_that_loads_back(tracker, client, small_model_dir, tmp_path):
    import mlflow
    import transformers

    from cudal1.tracking import checkpoint_from_registry

    assert tracker.register_checkpoint(small_model_dir, "policy-reg-test", {"stage": "sft", "step": 40}) == "1"
    assert tracker.register_checkpoint(small_model_dir, "policy-reg-test", {"stage": "rl"}) == "2"
    mv = client.get_model_version("policy-reg-test", "1")
    assert mv.run_id == tracker.run_id
    assert mv.tags == {"stage": "sft", "step": "40"}
    assert "transformers" in (_local(mv.source) / "MLmodel").read_text()
    requirements = (_local(mv.source) / "requirements.txt").read_text()
    assert f"transformers=={transformers.__version__}" in requirements

    mlflow.set_tracking_uri(tracker.uri)
    mlflow.set_registry_uri(tracker.uri)
    pyfunc = mlflow.pyfunc.load_model("models:/policy-reg-test/1")
    out = pyfunc.predict(["def forward(x):"])
    assert isinstance(out, list) and len(out) == 1 and isinstance(out[0], str)
    components = mlflow.transformers.load_model("models:/policy-reg-test/2", return_type="components")
    assert components["task"] == "text-generation" and components["tokenizer"] is not None

    # What the jobs load for `model.path=models:/...`: one local directory, weights and tokenizer.
    local = checkpoint_from_registry("models:/policy-reg-test/1", tmp_path / "fetched", tracking_uri=tracker.uri)
    model = transformers.AutoModelForCausalLM.from_pretrained(local, local_files_only=True)
    original = transformers.AutoModelForCausalLM.from_pretrained(small_model_dir, local_files_only=True)
    for (name, p), (_, q) in zip(model.state_dict().items(), original.state_dict().items()):
        assert p.equal(q), name
    assert transformers.AutoTokenizer.from_pretrained(local, local_files_only=True).encode(
        "def f"
    ) == transformers.AutoTokenizer.from_pretrained(small_model_dir, local_files_only=True).encode("def f")
    assert checkpoint_from_registry("models:/policy-reg-test/1", tmp_path / "fetched") == local  # reused
    with pytest.raises(ValueError, match="models:/"):
        checkpoint_from_registry(str(small_model_dir), tmp_path / "x")


def test_resume_continues_the_same_run(root, client, tracker):
    tracker.log_config({"lr": 1e-5})
    tracker.log_metrics({"loss": 2.0}, step=0)
    tracker.log_metrics({"loss": 1.5}, step=1)
    tracker.close("KILLED")
    assert client.get_run(tracker.run_id).info.status == "KILLED"

    resumed = Tracker(None, "cudal1-test", root / "resumed", resume_run_id=tracker.run_id)
    assert resumed.run_id == tracker.run_id
    assert client.get_run(tracker.run_id).info.status == "RUNNING"
    resumed.log_config({"lr": 2e-5, "resume": True})  # params are immutable: lr keeps 1e-05
    resumed.log_metrics({"loss": 1.0}, step=2)
    resumed.close()
    run = client.get_run(tracker.run_id)
    assert [(m.step, m.value) for m in client.get_metric_history(run.info.run_id, "loss")] == [
        (0, 2.0),
        (1, 1.5),
        (2, 1.0),
    ]
    assert run.data.params == {"lr": "1e-05", "resume": "True"}
    assert run.info.status == "FINISHED"
    assert resumed.errors == 0


def test_disabled_tracker_is_a_noop(tmp_path):
    t = Tracker(None, "x", tmp_path / "run", enabled=False)
    (tmp_path / "ckpt").mkdir()
    assert t.run_id is None
    assert t.log_config({"a": 1}) is None
    assert t.log_metrics({"a": 1.0}, step=0) is None
    assert t.log_text("t", "a.txt") is None and t.log_dict({}, "a.json") is None
    assert t.log_artifact(tmp_path / "missing") is None
    assert t.log_table([{"a": 1}], "t.json") is None
    assert t.log_curves([{"a": 1}], ["a"], "c.png") is None
    assert t.register_checkpoint(tmp_path / "ckpt", "m") is None
    assert t.close() is None
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt"]  # no store, no artifacts


def test_bad_store_or_run_fails_clearly(root):
    with pytest.raises(TrackingError, match="bogus://nowhere"):
        Tracker("bogus://nowhere", "x", root / "bad")
    with pytest.raises(TrackingError, match="no-such-run"):
        Tracker(f"sqlite:///{root / 'mlflow.db'}", "x", root / "bad", resume_run_id="no-such-run")


def test_mlflow_error_is_a_warning_once_and_logging_goes_on(tracker, client, caplog):
    too_long = "k" * 300  # over MLflow's 250-character key limit: the store refuses it
    with caplog.at_level(logging.DEBUG, logger="cudal1.tracking"):
        assert tracker.log_metrics({too_long: 1.0}, step=0) is None
        assert tracker.log_metrics({too_long: 2.0}, step=1) is None
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "log_metrics" in warnings[0].getMessage()
    assert tracker.errors == 2
    tracker.log_metrics({"reward/mean": 1.0}, step=2)
    assert client.get_run(tracker.run_id).data.metrics == {"reward/mean": 1.0}


def test_caller_mistakes_still_raise(tracker, tmp_path):
    with pytest.raises(FileNotFoundError):
        tracker.log_artifact(tmp_path / "missing.txt")
    with pytest.raises(ValueError):
        tracker.log_table([{"a": 1}], "t.parquet")
    with pytest.raises(ValueError):
        tracker.log_curves([{"a": 1}], ["a"], "c.svg")
    with pytest.raises(NotADirectoryError):
        tracker.register_checkpoint(tmp_path / "missing", "m")
    with pytest.raises(ValueError):
        tracker.close("DONE")


def test_context_manager_marks_a_crash_failed(root, client):
    with pytest.raises(RuntimeError):
        with Tracker(None, "cudal1-test", root / "crash") as t:
            raise RuntimeError("boom")
    assert client.get_run(t.run_id).info.status == "FAILED"
