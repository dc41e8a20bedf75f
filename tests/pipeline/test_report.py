"""The summary a finished run prints: seeds vs the policy per task, the last pass rate, where to look."""

import os
import shlex
import sys
from pathlib import Path
from types import SimpleNamespace

from cudal1.pipeline.metrics import overview_due, overview_key
from cudal1.pipeline.report import (
    format_run_summary,
    mlflow_command,
    mlflow_review_lines,
    task_outcomes,
    written_by_policy,
)
from cudal1.pipeline.state import RunState
from cudal1.records import Exemplar

ROOT = Path(__file__).resolve().parents[2]


def ex(task, speedup, origin):
    return Exemplar(task, f"code {speedup}", speedup, origin=origin)


def test_outcomes_split_seeds_from_the_policys_rollouts():
    exemplars = {
        "level1/1": [
            ex("level1/1", 1.5, "seed"),
            ex("level1/1", 1.8, "step3/g0/s1"),
            ex("level1/1", 1.2, "step1/g0/s0"),
        ],
        "level1/2": [ex("level1/2", 2.0, "seed"), ex("level1/2", 2.0, "step2/g1/s0")],  # a tie is not a win
        "level1/3": [ex("level1/3", 1.1, "step4/g0/s0")],  # no seed: any correct rollout beats it
        "level1/4": [ex("level1/4", 3.0, "reference"), ex("level1/4", 1.4, "seed")],
    }
    rows = task_outcomes(["level1/1", "level1/2", "level1/3", "level1/4", "level1/5"], exemplars)
    assert rows == [
        {"task": "level1/1", "seed_best": 1.5, "policy_best": 1.8, "beat_seed": True},
        {"task": "level1/2", "seed_best": 2.0, "policy_best": 2.0, "beat_seed": False},
        {"task": "level1/3", "seed_best": None, "policy_best": 1.1, "beat_seed": True},
        {"task": "level1/4", "seed_best": 3.0, "policy_best": None, "beat_seed": None},
        {"task": "level1/5", "seed_best": None, "policy_best": None, "beat_seed": None},
    ]
    assert written_by_policy("step0/g0/s0") and not written_by_policy("seed")


def test_summary_text_names_everything_a_user_looks_for():
    rows = task_outcomes(
        ["level1/1", "level2/10"], {"level1/1": [ex("level1/1", 1.5, "seed"), ex("level1/1", 1.8, "step3/g0/s1")]}
    )
    history = [
        {"step": 1, "stage": "sft", "loss": 1.0},
        {"step": 4, "stage": "contrastive_rl", "pass_rate": 0.5, "fast_1": 0.25},
        {"step": 6, "stage": "contrastive_rl", "pass_rate": 0.75, "fast_1": 0.5},
    ]
    text = format_run_summary(
        rows, history, {"sft": "3", "contrastive_rl": "5"}, "/runs/a", "abc123", "sqlite:///runs/mlflow.db"
    )
    lines = text.splitlines()
    assert lines[2].split() == ["level1/1", "1.50x", "1.80x", "yes"]
    assert lines[3].split()[:3] == ["level2/10", "-", "-"] and lines[3].endswith("no new correct solution")
    assert "the policy beat its seeds on 1 of 2 tasks" in text
    # The stage's own count (no "unit" in these rows: counted) apart from MLflow's run-wide step.
    assert "last sampled unit: contrastive_rl step 2 (MLflow step 6): pass rate 0.75, fast_1 0.50" in text
    assert "other charts' step axis (learner calls since the run began): sft 1, contrastive_rl 4-6" in text
    assert "_overview/ charts' step axis" not in text  # rows without "overview_step"
    assert "models:/cudal1-policy/3 (sft), models:/cudal1-policy/5 (contrastive_rl)" in text
    assert f"MLflow run abc123: {mlflow_command()} ui --backend-store-uri sqlite:///runs/mlflow.db" in text
    assert "then open" not in text  # no experiment id: no page
    assert lines[-1] == "  run directory: /runs/a"
    history = [
        {"step": 200, "stage": "sft", "unit": 200},
        {"step": 200, "stage": "self_train", "unit": 1, "pass_rate": 0.5},
        {"step": 203, "stage": "contrastive_rl", "unit": 3, "pass_rate": 1.0},
    ]
    text = format_run_summary(rows, history, {}, "/runs/a", None, None)
    assert "sft 200, self_train 200, contrastive_rl 203" in text
    assert "last sampled unit: contrastive_rl step 3 (MLflow step 203): pass rate 1.00" in text
    bare = format_run_summary(rows, [], {}, "/runs/b", None, None)
    assert "MLflow" not in bare and "pass rate" not in bare and "registered" not in bare


def test_the_mlflow_command_is_the_environments_own(tmp_path):
    venv = tmp_path / "proj" / ".venv" / "bin"
    venv.mkdir(parents=True)
    python = venv / "python"
    python.write_text("")
    # No mlflow script beside the interpreter: the interpreter runs the module.
    assert mlflow_command(str(python), cwd=tmp_path / "proj") == f"{python} -m mlflow"
    (venv / "mlflow").write_text("")
    assert (
        mlflow_command(str(python), cwd=tmp_path / "proj") == ".venv/bin/mlflow"
    )  # under cwd: as the README writes it
    assert mlflow_command(str(python), cwd=tmp_path / "elsewhere") == str(venv / "mlflow")
    spaced = tmp_path / "my proj" / "bin"
    spaced.mkdir(parents=True)
    (spaced / "mlflow").write_text("")
    assert mlflow_command(str(spaced / "python"), cwd=tmp_path) == "'my proj/bin/mlflow'"
    # This test's own interpreter (the project's environment): its own mlflow script, which
    # that interpreter runs.
    (cmd,) = shlex.split(mlflow_command(cwd=ROOT))
    script = ROOT / cmd
    assert script.name == "mlflow" and script.parent == Path(sys.executable).parent.absolute()
    shebang = script.read_text().splitlines()[0]
    assert os.access(script, os.X_OK) and Path(shebang[2:]).resolve() == Path(sys.executable).resolve(), shebang


def test_review_lines_name_the_store_and_the_model_training_page():
    local = mlflow_review_lines("sqlite:////data/x y/runs/mlflow.db", "7", "r1", python="/nowhere/bin/python")
    assert local == [
        "MLflow run r1: /nowhere/bin/python -m mlflow ui --backend-store-uri 'sqlite:////data/x y/runs/mlflow.db'",
        "then open http://127.0.0.1:5000/#/experiments/7/runs/r1/model-metrics?workflowType=machine_learning",
    ]
    assert mlflow_review_lines("http://host:5000/", "7", "r1") == [
        "MLflow run r1: open http://host:5000/#/experiments/7/runs/r1/model-metrics?workflowType=machine_learning"
    ]
    assert mlflow_review_lines("databricks", "7", "r1") == ["MLflow run r1 in databricks"]


def test_sft_gets_at_most_20_overview_points_and_the_sampling_stages_one_each():
    sft300 = [u for u in range(1, 301) if overview_due("sft", u, 300)]
    assert sft300 == list(range(15, 301, 15))  # 20 points, the last epoch among them
    assert [u for u in range(1, 26) if overview_due("sft", u, 25)] == [*range(2, 25, 2), 25]
    assert [u for u in range(1, 6) if overview_due("sft", u, 5)] == [1, 2, 3, 4, 5]
    assert all(overview_due(stage, u, 1000) for stage in ("self_train", "contrastive_rl") for u in (1, 7, 1000))


def test_the_overview_axis_gives_each_stage_a_share_and_the_summary_explains_both_axes(tmp_path):
    """`finish_unit` over 10 SFT epochs (at most 5 overview points here), a self-training round
    and 3 RL steps, into a real MLflow store: the `_overview/` charts count points (SFT sampled to
    5 of them), the other metrics the learner's updates, and the summary names where each stage
    lies on both."""
    from mlflow import MlflowClient

    from cudal1.pipeline.stages import finish_unit
    from cudal1.tracking import Tracker

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    tracker = Tracker(uri, "axes", tmp_path / "run")
    ctx = SimpleNamespace(state=RunState(), tracker=tracker)

    def unit(stage, metrics, summary, updates=1, overview=True):
        if ctx.state.stage != stage:
            ctx.state.stage, ctx.state.unit = stage, 0
        sampled_at = ctx.state.step
        ctx.state.step += updates
        log_step = None if stage == "sft" else sampled_at
        finish_unit(ctx, metrics, summary, checkpoint=False, sync=False, log_step=log_step, overview=overview)

    for epoch in range(1, 11):
        due = overview_due("sft", epoch, 10, sft_points=5)
        unit("sft", {"sft/epoch": epoch}, {"sft_loss": 1.0 / epoch}, overview=due)
    unit("self_train", {"self_train/reward/mean": 0.2, "self_train/pass_rate": 0.5}, {"pass_rate": 0.5})
    for k in range(3):
        rl = {"rl/reward/mean": 0.1 * k, "rl/pass_rate": 0.75, "learner/kl": 0.01}
        unit("contrastive_rl", rl, {"reward/mean": 0.1 * k, "pass_rate": 0.75})
    tracker.close()

    client = MlflowClient(uri)

    def steps(key):
        return [m.step for m in sorted(client.get_metric_history(tracker.run_id, key), key=lambda m: m.step)]

    assert steps(overview_key("stage")) == list(range(1, 10))
    assert steps(overview_key("sft_loss")) == [1, 2, 3, 4, 5]  # epochs 2, 4, ..., 10
    assert client.get_metric_history(tracker.run_id, overview_key("sft_loss"))[0].value == 0.5  # epoch 2's loss
    assert steps(overview_key("pass_rate")) == [6, 7, 8, 9]  # the round, then the RL steps
    assert steps("sft/epoch") == list(range(1, 11))  # the other metrics: learner updates, as before
    assert steps("self_train/reward/mean") == [10]
    assert steps("rl/reward/mean") == [11, 12, 13]
    assert ctx.state.overview_step == 9
    assert [h.get("overview_step") for h in ctx.state.history[:4]] == [None, 1, None, 2]

    text = format_run_summary(
        [], ctx.state.history, {}, str(tmp_path / "run"), tracker.run_id, uri, tracker.experiment_id
    )
    assert (
        "  _overview/ charts' step axis (one point per unit; sft: one per 2 epochs): "
        "sft 1-5, self_train 6, contrastive_rl 7-9"
    ) in text
    assert (
        "  other charts' step axis (learner calls since the run began): sft 1-10, self_train 10, contrastive_rl 11-13"
    ) in text
    assert "last sampled unit: contrastive_rl step 3 (MLflow step 13, _overview/ step 9): pass rate 0.75" in text
    page = f"/#/experiments/{tracker.experiment_id}/runs/{tracker.run_id}/model-metrics?workflowType=machine_learning"
    assert f"  then open http://127.0.0.1:5000{page}" in text.splitlines()
