"""Kill part of a three-node cluster while the smoke training job runs, and see what the run does.

A head node and two worker nodes on this machine (`ray.cluster_utils.Cluster`: three raylets,
one GCS), each worker with one unit of the custom resource `bench_node`, so the primary pool's
two benchmark actors (`bench.pools.cpu.num_actors=2`, one `bench_node` each) land one per worker
node. The smoke job (`jobs/train.py --config-name smoke`, every stage) is started as the driver
of that cluster (RAY_ADDRESS), as `ray job submit` would start it. Once a benchmark actor is in an
evaluation (its process title reads `ray::BenchWorker.evaluate`; with `--during rl`, only once the
run's state says the contrastive RL stage runs), one fault:

- `actor`: SIGKILL to that actor's process (Ray restarts it on its node; the pool reruns the
  call, `PoolSpec.max_task_retries`);
- `node`: that worker node removed at once (raylet and every worker process on it killed; the
  actor cannot come back on the other worker, whose one `bench_node` unit is taken).

Then it waits for the job to end and reports: the job's exit code and wall time, when the fault
came, the pool's warnings after it (and the first seconds until the pool reported a result
again), and from the run's records how many results carry a harness label (`actor_died`,
`harness_error`, `timeout`), i.e. were masked rather than paid. One JSON line per scenario; the
run directory and the job's log stay under --out.

    python benchmarks/cluster_faults.py --scenario actor --out /tmp/faults
    python benchmarks/cluster_faults.py --scenario node --out /tmp/faults

The smoke run's RL responses are cut at 48 tokens and never reach the pool, so its faults land in
stage 1's seed validation. For a fault inside an RL step, run the embedded default (whose SFT
teaches each task's programs, so RL responses are evaluated) and wait for that stage:

    python benchmarks/cluster_faults.py --config config --during rl --scenario actor --out /tmp/faults

Runs on one machine only (the nodes share its cores: a 2-core machine runs the smoke job several
times slower than alone). Not a test: a run takes minutes and its timing depends on the load.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
HARNESS = ("actor_died", "harness_error", "timeout")


def busy_bench_actors(raylet_pids: dict[int, Any]) -> list[tuple[int, Any]]:
    """(pid, node) of every benchmark actor process, under one of the given raylets, that is in an
    evaluation now (Ray sets an actor's process title to `ray::<Class>.<method>` while it runs)."""
    import psutil

    busy = []
    for raylet_pid, node in raylet_pids.items():
        try:
            children = psutil.Process(raylet_pid).children(recursive=False)
        except psutil.NoSuchProcess:
            continue
        for child in children:
            try:
                title = " ".join(child.cmdline())
            except psutil.Error:
                continue
            if title.startswith("ray::BenchWorker.evaluate"):
                busy.append((child.pid, node))
    return busy


def harness_counts(run_dir: Path) -> dict[str, int]:
    """The run's rollouts (`cudal1.review.load_run`) in all and by harness label: results masked
    out of training rather than paid."""
    from cudal1.review import load_run

    rollouts = load_run(run_dir).rollouts
    counts = {"rollouts": len(rollouts)}
    for label in HARNESS:
        counts[label] = int(sum(label in (labels or []) for labels in rollouts["labels"]))
    return counts


def stage_of(run_dir: Path) -> str | None:
    """The stage the run's state file says runs now (None before it is written)."""
    try:
        return json.loads((run_dir / "state.json").read_text()).get("stage")
    except (OSError, json.JSONDecodeError):
        return None


def run(
    scenario: str, out: Path, job_timeout_s: float, extra: list[str], config: str = "smoke", during: str = "any"
) -> dict[str, Any]:
    """One scenario (see the module docstring) of the job `jobs/train.py --config-name config`;
    `during` "rl" arms the fault only once the contrastive RL stage runs. Returns its report."""
    from ray.cluster_utils import Cluster

    out.mkdir(parents=True, exist_ok=True)
    run_dir = out / f"run_{scenario}"
    log_path = out / f"job_{scenario}.log"
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 4, "include_dashboard": False})
    workers = [cluster.add_node(num_cpus=2, resources={"bench_node": 1}) for _ in range(2)]
    cluster.wait_for_nodes()
    raylets = {w.all_processes["raylet"][0].process.pid: w for w in workers}
    env = dict(os.environ, RAY_ADDRESS=cluster.address, PYTHONPATH=str(ROOT))
    cmd = [
        sys.executable,
        "jobs/train.py",
        "--config-name",
        config,
        f"run_dir={run_dir}",
        "bench.pools.cpu.num_actors=2",
        "+bench.pools.cpu.resources.bench_node=1",
        *extra,
    ]
    report: dict[str, Any] = {"scenario": scenario, "command": " ".join(cmd[1:])}
    t0 = time.monotonic()
    with open(log_path, "w") as log:
        job = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
        fault_at = None
        try:
            while job.poll() is None and time.monotonic() - t0 < job_timeout_s:
                if fault_at is None and (during == "any" or stage_of(run_dir) == "contrastive_rl"):
                    busy = busy_bench_actors(raylets)
                    if busy:
                        time.sleep(1.0)  # inside the evaluation
                        pid, node = busy[0]
                        if scenario == "actor":
                            os.kill(pid, 9)
                        else:
                            cluster.remove_node(node, allow_graceful=False)
                        fault_at = time.monotonic() - t0
                        report["fault_at_s"] = round(fault_at, 1)
                        report["fault"] = f"{scenario}: pid {pid}"
                        report["fault_stage"] = stage_of(run_dir)
                time.sleep(0.2)
            if job.poll() is None:
                job.kill()
                report["timed_out"] = True
            job.wait()
        finally:
            cluster.shutdown()
    report["exit_code"] = job.returncode
    report["wall_s"] = round(time.monotonic() - t0, 1)
    text = log_path.read_text(errors="replace")
    report["pool_warnings"] = sorted(set(re.findall(r"pool cpu: [^\n]{0,160}", text)))[:8]
    report["last_line"] = text.strip().splitlines()[-1][:300] if text.strip() else ""
    report["records"] = harness_counts(run_dir) if run_dir.exists() else None
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenario", choices=["actor", "node"], action="append", required=True)
    parser.add_argument("--out", type=Path, required=True, help="folder for the run directories, logs and reports")
    parser.add_argument("--job-timeout-s", type=float, default=1800.0)
    parser.add_argument("--config", default="smoke", help="the job's config name (conf/<name>.yaml)")
    parser.add_argument(
        "--during", choices=["any", "rl"], default="any", help="rl: fault only once the contrastive RL stage runs"
    )
    parser.add_argument("overrides", nargs="*", help="more Hydra overrides for the job")
    args = parser.parse_args(argv)
    ok = True
    for scenario in args.scenario:
        report = run(scenario, args.out, args.job_timeout_s, args.overrides, args.config, args.during)
        print(json.dumps(report), flush=True)
        with open(args.out / "reports.jsonl", "a") as f:
            f.write(json.dumps(report) + "\n")
        ok &= report["exit_code"] == 0 and "fault_at_s" in report
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
