"""The summary a finished run prints: seeds vs the policy per task, the last pass rate, where to look."""

from cudal1.pipeline.report import format_run_summary, task_outcomes, written_by_policy
from cudal1.records import Exemplar


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
    assert "step axis (learner updates since the run began; _overview/ charts): sft 1, contrastive_rl 4-6" in text
    assert "models:/cudal1-policy/3 (sft), models:/cudal1-policy/5 (contrastive_rl)" in text
    assert "MLflow run abc123: mlflow ui --backend-store-uri sqlite:///runs/mlflow.db" in text
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
