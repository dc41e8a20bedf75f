"""The whole training topology on the session's local Ray cluster (issue 3, §6).

1. `train(cfg)` in-process with the smoke config: every stage, on the cluster that is already
   running (no second one is started).
2. The driver process killed (SIGKILL) after a stage and resumed: the finished stage is not
   rerun and the killed driver's actors free their CPUs; the resumed run stopped with Ctrl-C in
   the middle of RL exits cleanly (130); resumed again, it continues at that RL step and finishes.

A benchmark actor killed in the middle of a batch (no result lost) is tested on the pool itself:
tests/actors/test_bench_pool.py::test_killed_actor_loses_no_result and
::test_a_pool_of_one_gives_the_second_opinion_itself_and_a_killed_call_without_retries_is_labelled.

Slow (tens of seconds each: they start the generator, learner and benchmark actors for real).
"""

from __future__ import annotations

import json
import math
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import SMOKE_TASKS

ray = pytest.importorskip("ray")
pytestmark = pytest.mark.slow  # each test starts the generator, learner and benchmark actors: 1-3 min

ROOT = Path(__file__).resolve().parents[2]
STAGES = ["sft", "self_train", "contrastive_rl"]
RL_STEPS = 3  # in the resume test: enough RL steps to interrupt the last one in the middle (at unit 2)


def wait_for_cpus(total: float, timeout_s: float) -> float:
    """Seconds until the cluster has `total` CPUs available again. Fails the test after `timeout_s`."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout_s:
        if ray.available_resources().get("CPU", 0.0) >= total:
            return time.monotonic() - t0
        time.sleep(0.5)
    pytest.fail(f"CPUs still held after {timeout_s:.0f} s: available {ray.available_resources()}")


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_train_all_stages_on_the_running_cluster(ray_cluster, smoke_run):
    from cudal1.actors.cluster import alive_nodes

    # The session's smoke run (tests/conftest.py): weights by broadcast over a gloo group (NCCL
    # between GPUs); the resume test below covers the default object-store sync.
    cfg, state, run_dir = smoke_run.cfg, smoke_run.state, smoke_run.run_dir
    assert cfg.ray.num_cpus == 6  # the config asks for a 6-CPU local cluster: it must be ignored here
    assert not list(run_dir.glob(".storage-probe-*"))  # the probe passed and was removed

    # The session's cluster was joined, not replaced or doubled.
    assert ray.get_runtime_context().gcs_address == ray_cluster["address"]
    assert len(alive_nodes()) == 1 and ray.cluster_resources()["CPU"] == 4

    assert state.completed == STAGES and state.stage is None
    assert sorted(state.registered) == sorted(STAGES)  # tracked: each stage's export is a model version
    # The RL rollouts were sampled with broadcast weights (version 0 would be the checkpoint's).
    assert all(r["generation"]["model_version"] >= 1 for r in read_jsonl(run_dir / "rollouts" / "rl_step0.jsonl"))
    assert json.loads((run_dir / "state.json").read_text())["completed"] == STAGES
    assert [h["stage"] for h in state.history] == STAGES  # one unit each in the smoke config
    assert (run_dir / "checkpoints" / "latest").is_file()
    for stage in STAGES:
        assert (run_dir / "exports" / stage / "config.json").is_file()

    # Seeds, and each task's reference as a 1.00x variant, validated by the benchmark, went into
    # the buffer.
    exemplars = read_jsonl(run_dir / "buffer" / "exemplars.jsonl")
    for origin in ("seed", "reference"):
        found = [e for e in exemplars if e["origin"] == origin]
        assert sorted(e["task_id"] for e in found) == sorted(cfg.tasks.ids), origin
        assert all(e["status"] == "ok" and e["speedup"] > 0 for e in found)
    # At the speedup the reward would pay: the reference is the baseline, exactly 1.00x.
    assert {e["speedup"] for e in exemplars if e["origin"] == "reference"} == {1.0}

    # One record per response: tasks × samples, each (group, sample) once; evaluable ones evaluated.
    for name, n_tasks, n in (
        ("self_train_round0", cfg.stage.self_train.tasks_per_round, cfg.stage.self_train.samples_per_task),
        ("rl_step0", cfg.stage.contrastive_rl.tasks_per_step, cfg.stage.contrastive_rl.group_size),
    ):
        rollouts = read_jsonl(run_dir / "rollouts" / f"{name}.jsonl")
        assert len(rollouts) == n_tasks * n
        assert len({(r["group"], r["sample"]) for r in rollouts}) == len(rollouts)
        for r in rollouts:
            assert r["reward_reason"], r
            if r["parse_error"] is None and r["generation"]["finish_reason"] != "length":
                assert r["result"] is not None and r["result"]["status"], r
            else:  # not evaluated: the failure reward, -ln(max_credit) by default
                assert r["result"] is None and r["reward"] == pytest.approx(-math.log(10.0)), r
                assert r["trainable"] == (r["generation"]["finish_reason"] != "length"), r

    # close() stopped every actor: the CPUs come back (the next tests need them).
    wait_for_cpus(4, timeout_s=60)

    # The review notebook runs headless, in a real kernel, on this smoke run.
    from tests.test_review import NOTEBOOK, execute_headless, outputs_text

    text = outputs_text(execute_headless(NOTEBOOK, run_dir))
    assert str(run_dir) in text  # (a cell that raises fails the execution itself)
    assert all(task in text for task in cfg.tasks.ids)  # the best-per-task table names each task


def test_smoke_runs_overview_is_one_step_axis_across_the_stages(smoke_run):
    """The session's smoke run in its MLflow store: the "_overview/" metrics, one curve each across
    all stages on the overview's own step axis (a point per unit), with `overview_key("stage")` marking
    the stages; the stages' own metrics at the learner's updates."""
    from mlflow import MlflowClient

    from cudal1.pipeline.metrics import STAGE_INDEX, overview_key

    state, run_id = smoke_run.state, smoke_run.state.mlflow_run_id
    assert state.mlflow_uri == smoke_run.tracking_uri  # recorded for a resume and the review
    client = MlflowClient(smoke_run.tracking_uri)

    def history(key: str) -> list[tuple[int, float]]:
        """(step, value) of every logged value of `key`, in the order logged."""
        return [(m.step, m.value) for m in sorted(client.get_metric_history(run_id, key), key=lambda m: m.timestamp)]

    stages = history(overview_key("stage"))
    # One unit per stage in the smoke config: one overview point each, at steps 1, 2, 3.
    assert stages == [(1, 1.0), (2, 2.0), (3, 3.0)]
    assert stages == [(h["overview_step"], float(STAGE_INDEX[h["stage"]])) for h in state.history]
    assert [h["unit"] for h in state.history] == [1, 1, 1]  # each stage's own count

    by_stage = {h["stage"]: h for h in state.history}
    for key, row_key in (("reward", "reward/mean"), ("pass_rate", "pass_rate"), ("fast_1", "fast_1")):
        # Both sampling stages on one curve, at their units' overview steps, with the values of their rows.
        assert history(overview_key(key)) == [
            (by_stage[s]["overview_step"], pytest.approx(by_stage[s][row_key]))
            for s in ("self_train", "contrastive_rl")
        ], key
    assert history(overview_key("sft_loss"))[0] == (1, pytest.approx(by_stage["sft"]["sft_loss"]))
    # The stages' own metrics stay on the learner's updates.
    assert [s for s, _ in history("rl/reward/mean")] == [by_stage["contrastive_rl"]["step"]]
    assert [s for s, _ in history("self_train/reward/mean")] == [by_stage["self_train"]["step"]]
    metrics = client.get_run(run_id).data.metrics
    if metrics["learner/skipped"] == 0.0:  # the RL step trained: its KL and entropy are in the overview
        assert [s for s, _ in history(overview_key("kl"))] == [by_stage["contrastive_rl"]["overview_step"]]
        assert metrics[overview_key("entropy")] == metrics["learner/entropy"] > 0
    for key in ("rl/reward/mean", "self_train/reward/mean", "rl/pass_rate", "learner/skipped"):
        assert key in metrics  # the stages' own keys stay as they were


def _start_train(run_dir: Path, address: str, log: Path, *overrides: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("RAY_ADDRESS", None)  # the address override is what joins the session's cluster
    cmd = [
        sys.executable,
        str(ROOT / "jobs" / "train.py"),
        "--config-name",
        "smoke",
        f"run_dir={run_dir}",
        "tracking=none",
        f"ray.address='{address}'",
        *overrides,
    ]
    with open(log, "ab") as out:
        # SIGINT back to its default in the child: a test runner started in the background may
        # ignore it, and the child would inherit that (the Ctrl-C check below needs it).
        return subprocess.Popen(
            cmd,
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )


def _state(run_dir: Path) -> dict:
    try:
        return json.loads((run_dir / "state.json").read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return {}


def _outside_error_reports(lines: list[str]) -> list[str]:
    """`lines` without the body of Python's own error reports: a "Traceback (most recent call
    last):" or "Exception ignored in: ..." line, the indented frame lines after it, up to and
    including its exception line (Ray's ObjectRefGenerator.__del__ printed one at a driver's exit,
    under load). Each report's "Traceback" line is kept, so the report still counts as an error."""
    kept, inside = [], False
    for line in lines:
        if line.startswith("Exception ignored in"):
            inside = True  # its "Traceback" line follows
        elif line.startswith("Traceback (most recent call last)"):
            kept.append(line)
            inside = True
        elif inside and (line.startswith((" ", "\t")) or line.lstrip().startswith("^")):
            continue
        elif inside:
            inside = False  # the exception line ends the report
        else:
            kept.append(line)
    return kept


def test_driver_killed_after_sft_then_interrupted_then_resumed(ray_cluster, small_model_dir, tmp_path):
    run_dir, log = tmp_path / "run", tmp_path / "train.log"
    # The session's model instead of building one, and no seed validation (the first test covers
    # it): ~30 s less per run on a busy machine.
    # The buffer and the learner pinned to the driver's node (the first test proves the shared run_dir instead).
    quick = (
        f"model.path={small_model_dir}",
        "stage.sft.validate_seeds=false",
        f"stage.contrastive_rl.steps={RL_STEPS}",
        "ray.storage=driver_node",
        SMOKE_TASKS,
    )
    wait_for_cpus(4, timeout_s=60)
    proc = _start_train(run_dir, ray_cluster["address"], log, *quick)
    try:
        deadline = time.monotonic() + 240
        while "sft" not in _state(run_dir).get("completed", []):
            assert proc.poll() is None, (
                f"train.py exited ({proc.returncode}) before sft finished:\n{log.read_text()[-3000:]}"
            )
            assert time.monotonic() < deadline, f"sft not finished after 240 s:\n{log.read_text()[-3000:]}"
            time.sleep(0.05)  # self-training takes a second or two here: poll faster than that
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    at_kill = _state(run_dir)
    assert proc.returncode == -signal.SIGKILL
    # Killed mid-run (on a very busy machine the kill may land after self-training, never after all).
    assert at_kill["completed"] in (["sft"], ["sft", "self_train"]), at_kill

    # Non-detached actors die with their driver: the killed run's CPUs come back.
    freed_s = wait_for_cpus(4, timeout_s=60)

    first_log = log.read_text()
    # Resumed, then Ctrl-C in the middle of contrastive RL: a clean stop (exit 130, actors closed).
    resumed = _start_train(run_dir, ray_cluster["address"], log, *quick, "resume=true")
    try:
        deadline = time.monotonic() + 300
        while not (_state(run_dir).get("stage") == "contrastive_rl" and _state(run_dir).get("unit", 0) >= 2):
            assert resumed.poll() is None, (
                f"resumed run exited ({resumed.returncode}) early:\n{log.read_text()[-3000:]}"
            )
            assert time.monotonic() < deadline, f"no RL progress after 300 s:\n{log.read_text()[-3000:]}"
            time.sleep(0.05)
        os.killpg(resumed.pid, signal.SIGINT)
        rc = resumed.wait(timeout=120)
    finally:
        if resumed.poll() is None:
            os.killpg(resumed.pid, signal.SIGKILL)
            resumed.wait()
    second_log = log.read_text()[len(first_log) :]
    at_interrupt = _state(run_dir)
    assert rc == 130, second_log[-3000:]
    assert "interrupted: the buffer and the last checkpoint are kept" in second_log
    assert "stage sft already completed: skipped" in second_log
    assert "resuming: loading the learner checkpoint" in second_log
    assert second_log.count("stage sft from unit") == 0
    assert at_interrupt["stage"] == "contrastive_rl" and at_interrupt["unit"] < RL_STEPS
    wait_for_cpus(4, timeout_s=60)

    # Resumed again: it continues at the RL step the interrupted run had checkpointed, and finishes.
    finished = _start_train(run_dir, ray_cluster["address"], log, *quick, "resume=true")
    try:
        rc = finished.wait(timeout=300)
    finally:
        if finished.poll() is None:
            os.killpg(finished.pid, signal.SIGKILL)
            finished.wait()
    third_log = log.read_text()[len(first_log) + len(second_log) :]
    assert rc == 0, third_log[-3000:]
    # It ends with the summary (tracking is off here: no MLflow line, no registered versions).
    assert "run summary" in third_log and f"run directory: {run_dir}" in third_log
    assert "the policy beat its seeds on" in third_log and "MLflow run" not in third_log
    assert f"stage contrastive_rl from unit {at_interrupt['unit']}" in third_log

    # What the three runs printed (stdout and stderr, as a terminal shows them) is the product's
    # own: no Ray, DeepSpeed or transformers lines and nothing forwarded from an actor but errors;
    # those went to the run's log files (cudal1.engines.logs).
    from benchmarks.terminal_lines import classify

    lines = log.read_bytes().decode(errors="replace").split("\n")
    engine = [line for line, kind in zip(lines, classify(lines)) if kind == "engine" and line.strip()]
    assert [
        line for line in _outside_error_reports(engine) if not re.search(r"\bERROR\b|Error|Traceback", line)
    ] == [], "\n".join(engine)
    assert "Connecting to existing Ray cluster" in (run_dir / "logs" / "driver.log").read_text()
    assert "weights synced" in "".join(p.read_text() for p in (run_dir / "logs").glob("RolloutGenerator-*.log"))

    state = _state(run_dir)
    assert state["completed"] == STAGES
    # sft ran once: one history row for it, unchanged, and the step counter went on from the kill:
    # one step for self-training (if the kill came before it) and one per RL step.
    assert [h["stage"] for h in state["history"]].count("sft") == 1
    assert state["history"][0] == at_kill["history"][0]
    assert state["step"] == at_kill["step"] + ("self_train" not in at_kill["completed"]) + RL_STEPS
    wait_for_cpus(4, timeout_s=60)
    print(f"killed run's CPUs freed after {freed_s:.1f} s")
