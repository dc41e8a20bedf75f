"""Kill a rollout engine or a learner rank while the smoke training job runs, and see what the run does.

A local Ray cluster of one head node (`ray.cluster_utils.Cluster`, 6 CPUs) and the smoke job
(`jobs/train.py --config-name smoke`, every stage, two RL steps, its own MLflow store) started as
that cluster's driver (RAY_ADDRESS), as `ray job submit` would start it. The driver logs its
actors' ids at start ("actors: rollout engine 0 (actor 1a2b3c4d), learner rank 0 (...)"); this
script finds their processes through Ray's actor table, waits for stage 2 to end (its export,
`exports/self_train`), then delivers one fault with SIGKILL:

- `engine`: to the rollout engine's process while it streams the RL step's groups (its title
  reads `ray::ActorShell.stream`), with `rollout.weight_sync=broadcast` and the engine sampling
  one group per batch (`+rollout.engine_kwargs.batch_size=2`). Expected: the job finishes (exit 0),
  the step records every rollout, `rollout/engine_restarts` 1, `rollout/resampled_groups` the
  groups it had not finished, and the log-probabilities the engines recorded for every RL
  response (the replacement's among them) equal the learner's weights' on the same tokens. The
  smoke run's RL responses are all cut at 48 tokens, so the learner takes no update and measures
  no gap itself (`learner/engine_abs_log_ratio`); the script measures it: the weights that
  sampled RL step 0 are the stage-2 export (`exports/self_train`), and with step 0 taking no
  update (`learner/skipped` 1) step 1's are the same (`policy_gap`); the same measure against the
  checkpoint a replacement starts from (`base_model`) is the control.
- `learner_rank`: to rank 1 of a learner group of two (`learner.num_ranks=2`) while it is in a
  call after stage 2's export (title `ray::ActorShell.call`: a checkpoint save or an update). Expected: the job stops with exit 1 and one
  message naming the rank, the RL stage exports nothing (the title must hold for two polls 50 ms
  apart, so the kill lands in a long call, the update, rather than a short one); then the same job with `resume=true`
  (no fault) continues from the last checkpoint and finishes (exit 0).

One JSON line per scenario (also appended to <out>/reports.jsonl); the run directories, MLflow
stores and job logs stay under --out.

    python benchmarks/engine_faults.py --scenario engine --scenario learner_rank --out /tmp/engine_faults

Runs on one machine (a CPU is enough). Not a test by itself: a run takes minutes and its timing
depends on the load (tests/pipeline/test_engine_faults.py runs it with CUDAL1_SLOW_TESTS=1).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
TASKS = "tasks.ids=[level1/4,level2/2]"  # the two cheapest builtin tasks to evaluate (tests/conftest.py)
RL_STEPS = 2
FAULTS = {
    "engine": ("rollout engine 0", "ray::ActorShell.stream"),
    "learner_rank": ("learner rank 1", "ray::ActorShell.call"),
}
"""scenario -> (the actor's label in the driver's "actors:" log line, the process title to hit)."""
OVERRIDES = {
    "engine": ["rollout.weight_sync=broadcast", "+rollout.engine_kwargs.batch_size=2"],
    "learner_rank": ["learner.num_ranks=2"],
}
METRICS = (
    "rollout/engine_restarts",
    "rollout/resampled_groups",
    "time/engine_recovery_s",
    "learner/engine_abs_log_ratio",
    "learner/skipped",
    "time/generate_s",
)


def actor_entry(label: str, log_text: str) -> dict[str, Any] | None:
    """Ray's actor-table entry of the live actor the job's log names `label` ("rollout engine 0
    (actor 1a2b3c4d)" in its "actors:" line); this process must be a driver of the cluster."""
    import ray

    found = re.search(re.escape(label) + r" \(actor ([0-9a-f]{8})\)", log_text)
    if found is None:
        return None
    for actor in ray._private.state.actors().values():  # the GCS's table: no dashboard needed
        if actor["ActorID"].startswith(found.group(1)) and actor["State"] == "ALIVE":
            return actor
    return None


def title(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


def step_metrics(store: Path, run_dir: Path) -> dict[str, list[float]]:
    """The RL steps' `METRICS` from the run's MLflow store, in step order."""
    from mlflow import MlflowClient

    run_id = json.loads((run_dir / "state.json").read_text())["mlflow_run_id"]
    client = MlflowClient(tracking_uri=f"sqlite:///{store}")
    out = {}
    for key in METRICS:
        history = sorted(client.get_metric_history(run_id, key), key=lambda m: m.step)
        out[key] = [round(m.value, 9) for m in history[-RL_STEPS:]]
    return out


def policy_gap(export: Path, rollouts: Path) -> dict[str, float]:
    """Max and mean |engine log-probability - the `export`ed policy's| (nats) over every response
    token of the rollouts in `rollouts` (a rollouts JSONL), the policy run in float32 on the CPU."""
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(export, dtype=torch.float32).eval()
    diffs: list[float] = []
    for line in rollouts.read_text().splitlines():
        gen = json.loads(line)["generation"]
        prompt, response, engine = gen["prompt_ids"], gen["response_ids"], gen["logprobs"]
        with torch.no_grad():
            logits = model(torch.tensor([prompt + response])).logits[0, len(prompt) - 1 : -1].float()
        mine = torch.log_softmax(logits, -1).gather(1, torch.tensor(response)[:, None])[:, 0]
        diffs += [abs(a - b) for a, b in zip(mine.tolist(), engine)]
    return {"max": max(diffs), "mean": sum(diffs) / len(diffs), "tokens": float(len(diffs))}


def job(cmd: list[str], env: dict[str, str], log_path: Path) -> subprocess.Popen:
    return subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=open(log_path, "w"), stderr=subprocess.STDOUT)


def run(scenario: str, out: Path, job_timeout_s: float, extra: list[str], workers: int = 0) -> dict[str, Any]:
    """One scenario (see the module docstring); returns its report. `workers` > 0: the head gets 2
    CPUs and that many worker nodes of 2 CPUs each join it (`add_node`), so Ray may place the
    job's actors on any of them; the report names the node of the actor that was hit."""
    import ray
    from ray.cluster_utils import Cluster

    out.mkdir(parents=True, exist_ok=True)
    run_dir, store = out / f"run_{scenario}", out / f"mlflow_{scenario}.db"
    log_path = out / f"job_{scenario}.log"
    label, busy_title = FAULTS[scenario]
    cluster = Cluster(
        initialize_head=True, head_node_args={"num_cpus": 2 if workers else 6, "include_dashboard": False}
    )
    for _ in range(workers):
        cluster.add_node(num_cpus=2)
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, log_to_driver=False)
    env = dict(os.environ, RAY_ADDRESS=cluster.address, PYTHONPATH=str(ROOT))
    cmd = [
        sys.executable,
        "jobs/train.py",
        "--config-name",
        "smoke",
        f"run_dir={run_dir}",
        TASKS,
        f"stage.contrastive_rl.steps={RL_STEPS}",
        "tracking=local",
        f"tracking.uri=sqlite:///{store}",
        *OVERRIDES[scenario],
        *extra,
    ]
    report: dict[str, Any] = {"scenario": scenario, "command": " ".join(cmd[1:])}
    t0 = time.monotonic()
    try:
        proc = job(cmd, env, log_path)
        entry, seen = None, 0
        polls = 1 if scenario == "engine" else 2
        while proc.poll() is None and time.monotonic() - t0 < job_timeout_s:
            if "fault_at_s" not in report:
                entry = entry or actor_entry(label, log_path.read_text(errors="replace"))
                pid = int(entry["Pid"]) if entry is not None else None
                stage2_done = (run_dir / "exports" / "self_train").exists()
                seen = seen + 1 if pid is not None and stage2_done and title(pid).startswith(busy_title) else 0
                if seen >= polls:
                    node = (entry.get("Address") or {}).get("NodeID")
                    report["nodes"] = 1 + workers
                    report["hit_on_head"] = node == cluster.head_node.node_id if node else None
                    os.kill(pid, signal.SIGKILL)
                    report["fault_at_s"] = round(time.monotonic() - t0, 1)
                    report["fault"] = f"SIGKILL to {label} (pid {pid}) in {busy_title}"
            time.sleep(0.05)
        if proc.poll() is None:
            proc.kill()
            report["timed_out"] = True
        proc.wait()
        report["exit_code"] = proc.returncode
        report["wall_s"] = round(time.monotonic() - t0, 1)
        text = log_path.read_text(errors="replace")
        report["messages"] = sorted(
            set(re.findall(r"[^\n]*(?:replaced|sampled again|stopped:|died during)[^\n]{0,200}", text))
        )[:8]
        report["exports"] = sorted(p.name for p in (run_dir / "exports").glob("*")) if run_dir.exists() else []
        rl = [run_dir / "rollouts" / f"rl_step{i}.jsonl" for i in range(RL_STEPS)]
        report["rl_rollouts"] = [len(p.read_text().splitlines()) if p.exists() else None for p in rl]
        if scenario == "engine" and (run_dir / "state.json").exists():
            report["metrics"] = step_metrics(store, run_dir)
            skipped = report["metrics"]["learner/skipped"]
            gaps = {"rl_step0": policy_gap(run_dir / "exports" / "self_train", rl[0])}
            if skipped and skipped[0] == 1.0 and rl[1].exists():
                gaps["rl_step1"] = policy_gap(run_dir / "exports" / "self_train", rl[1])
            # The control: the checkpoint a replacement engine starts from, on the same tokens.
            gaps["control_checkpoint_rl_step0"] = policy_gap(run_dir / "base_model", rl[0])
            report["engine_vs_policy_gap"] = gaps
        if scenario == "learner_rank" and proc.returncode != 0:
            t1 = time.monotonic()
            again = job([*cmd, "resume=true"], env, out / f"job_{scenario}_resume.log")
            again.wait(timeout=job_timeout_s)
            report["resume_exit_code"] = again.returncode
            report["resume_wall_s"] = round(time.monotonic() - t1, 1)
            report["resume_exports"] = sorted(p.name for p in (run_dir / "exports").glob("*"))
            report["resume_rl_rollouts"] = [len(p.read_text().splitlines()) if p.exists() else None for p in rl]
    finally:
        ray.shutdown()
        cluster.shutdown()
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenario", choices=sorted(FAULTS), action="append", required=True)
    parser.add_argument("--out", type=Path, required=True, help="folder for the run directories, logs and reports")
    parser.add_argument("--job-timeout-s", type=float, default=1800.0)
    parser.add_argument("--workers", type=int, default=0, help="worker nodes beside the head (2 CPUs each)")
    parser.add_argument("overrides", nargs="*", help="more Hydra overrides for the job")
    args = parser.parse_args(argv)
    ok = True
    for scenario in args.scenario:
        report = run(scenario, args.out, args.job_timeout_s, args.overrides, args.workers)
        print(json.dumps(report), flush=True)
        with open(args.out / "reports.jsonl", "a") as f:
            f.write(json.dumps(report) + "\n")
        expected = 0 if scenario == "engine" else 1
        ok &= report.get("exit_code") == expected and "fault_at_s" in report
        ok &= scenario == "engine" or report.get("resume_exit_code") == 0
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
