"""The contrastive RL stage in `pipeline.mode=async` with two-turn episodes, end to end, on the
session's Ray cluster with the real components of the smoke config (transformers generator,
DeepSpeed learner, CPU benchmark pool, buffer actor, MLflow in a local store): every step
recorded once with its rollouts (each turn with its episode) and its metrics (per turn too),
each step's rollouts tagged with the policy version that sampled them, and a run that
fails in the middle of a step (with the next step's sampling in flight) resumed from its
checkpoint without counting any step twice.

At the smoke config's size every response of a group fails alike, so the learner makes no update
and the policy version does not move within the stage: the version bookkeeping is checked here,
the one-step lag with real updates on the real generator and learner in
tests/pipeline/test_overlap.py::test_one_step_off_policy_with_the_real_generator_and_learner.

Slow (1-3 min: it starts the generator, learner and benchmark actors twice).
"""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from tests.conftest import SMOKE_TASKS

ray = pytest.importorskip("ray")
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
STEPS = 3


def compose(run_dir: Path, *overrides: str):
    from hydra import compose as hydra_compose, initialize_config_dir

    from cudal1.config import load_config, register_schema

    register_schema()
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base=None):
        cfg = hydra_compose(config_name="smoke", overrides=[f"run_dir={run_dir}", *overrides])
    return load_config(cfg)


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_async_rl_stage_records_each_step_once_with_its_policy_version_and_resumes(
    ray_cluster, small_model_dir, tmp_path, monkeypatch
):
    from mlflow.tracking import MlflowClient

    import cudal1.pipeline.stages as stages
    from cudal1.pipeline.driver import train

    run_dir = tmp_path / "run"
    overrides = (
        f"model.path={small_model_dir}",
        "stage=contrastive_rl",
        f"stage.contrastive_rl.steps={STEPS}",
        "stage.contrastive_rl.turns=2",
        "pipeline.mode=async",
        "ray.storage=driver_node",
        "tracking.system_metrics_s=0",
        f"tracking.uri=sqlite:///{tmp_path / 'mlflow.db'}",
        SMOKE_TASKS,
    )
    cfg = compose(run_dir, *overrides)

    # A failure in the middle of step 1, after its update and while step 2 is being sampled.
    real_save = stages.save_rollouts

    def failing_save(ctx, rollouts, name):
        if name == "rl_step1":
            raise RuntimeError("injected failure in step 1")
        return real_save(ctx, rollouts, name)

    monkeypatch.setattr(stages, "save_rollouts", failing_save)
    with pytest.raises(RuntimeError, match="injected failure"):
        train(cfg)
    at_failure = json.loads((run_dir / "state.json").read_text())
    assert at_failure["stage"] == "contrastive_rl" and at_failure["unit"] == 1  # step 0 checkpointed
    assert [h["step"] for h in at_failure["history"]] == [0]
    assert not (run_dir / "rollouts" / "rl_step2.jsonl").exists()  # step 2 was in flight: never recorded
    # ... and its sampling thread ended with the run: it no longer calls the stopped actors (it went
    # on restarting the killed engine, and after the session's Ray shutdown started a new cluster).
    assert [t.name for t in threading.enumerate() if t.name.startswith(("cudal1-sample", "pool-stream"))] == []
    # The tie-noise state (reward.tie_calibration, on by default) is checkpointed with the run state.
    assert set(at_failure["tie_noise"]) == {"settings", "diffs", "last"}

    monkeypatch.setattr(stages, "save_rollouts", real_save)
    state = train(compose(run_dir, *overrides, "resume=true"))

    # Each step exactly once: history, step counter, rollout files and the steps recorded in them.
    assert state.completed == ["contrastive_rl"] and state.stage is None
    rows = [h for h in state.history if h["stage"] == "contrastive_rl"]
    assert [h["step"] for h in rows] == list(range(STEPS)) and state.step == STEPS
    assert rows[0] == at_failure["history"][0]
    files = sorted(p.name for p in (run_dir / "rollouts").glob("rl_step*.jsonl"))
    assert files == [f"rl_step{k}.jsonl" for k in range(STEPS)]
    group = cfg.stage.contrastive_rl.tasks_per_step * cfg.stage.contrastive_rl.group_size
    for k in range(STEPS):
        rollouts = read_jsonl(run_dir / "rollouts" / f"rl_step{k}.jsonl")
        # Two-turn episodes: every episode's first turn, and a second turn for each that went on
        # (none stops early here: nothing passes), each with its episode and turn.
        first = [r for r in rollouts if r["turn"] == 1]
        second = [r for r in rollouts if r["turn"] == 2]
        assert len(first) == group and len(first) + len(second) == len(rollouts) and second
        assert {r["episode"] for r in second} <= {r["episode"] for r in first}
        assert all(r["feedback"] for r in second) and {r["step"] for r in rollouts} == {k}
        versions = {r["generation"]["model_version"] for r in rollouts}
        assert versions == {rows[k]["rollout_version"]}  # one policy version per step, all its turns

    # Versions: the first step of each run (k = 0, and k = 1 after the resume) is sampled inline,
    # on-policy; a step sampled in the background carries the version the learner had when it
    # trained the step before (here the same number: no group had a signal, so no update).
    assert rows[0]["rollout_version"] == rows[0]["learner_version"]
    assert rows[1]["rollout_version"] == rows[1]["learner_version"]
    assert rows[2]["rollout_version"] == rows[1]["learner_version"]
    assert all(h["learner_version"] >= h["rollout_version"] for h in rows)

    # Metrics per step in MLflow: the pipeline's and the step-time breakdown's.
    client = MlflowClient(tracking_uri=cfg.tracking.uri)
    for key in (
        "pipeline/staleness",
        "pipeline/rollout_version",
        "pipeline/learner_version",
        "pipeline/wait_s",
        "time/step_s",
        "time/weight_sync_s",
        "idle/learner",
        "rl/reward/mean",
        "rl/turn1/pass_rate",
        "rl/turn2/pass_rate",
        "rl/last_turn/pass_rate",
        "rl/episode/turns",
    ):
        logged = client.get_metric_history(state.mlflow_run_id, key)
        assert sorted({m.step for m in logged}) == list(range(STEPS)), key
    staleness = {m.step: m.value for m in client.get_metric_history(state.mlflow_run_id, "pipeline/staleness")}
    assert all(v >= 0 for v in staleness.values())
