"""Builds on a CPU node of their own, timing on another: the same results as on one node?

Two layouts of one benchmark pool (one timing actor, one build actor), each evaluating the same
candidates (builtin CPU seed solutions with C++ extensions) in a fresh build cache:

- `one_node`: both actors on the head node, one cache directory (the build is not copied);
- `split`: the build actor on a second node with the custom resource `builder`
  (`PoolSpec.build_resources`), whose processes see a tmpfs of their own at the cache path (a
  mount namespace of its own): a CPU node with its own disk. Each build travels to the timing
  actor packed and hashed (`cudal1.actors.artifacts`).

One JSON line per candidate and layout: status, speedup, `build_seconds` (the build actor's
compile time plus whatever the evaluation built itself), `phases_s["prebuild"]` (the build
actor's wall time), the evaluation's wall time (a compile inside it would add tens of seconds),
and which node built and which timed; then per layout the step breakdown's build and timing
actor-seconds (`cudal1.pipeline.metrics.step_breakdown`).

    python benchmarks/split_builds.py --out /tmp/split

Needs `unshare -m` (root, or CAP_SYS_ADMIN). Runs on one machine: both nodes share its cores, and
speedups of one run on a busy 2-core machine vary by a few tens of percent between runs anyway.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TASKS = ("level1/6", "level1/16", "level1/17")


def start_builder(address: str, cache: Path) -> subprocess.Popen:
    """A Ray node with one CPU and the resource "builder", its processes seeing a tmpfs at `cache`."""
    # This interpreter by its path: torch's build files name torch's headers by it.
    start = (
        f"mount -t tmpfs tmpfs {shlex.quote(str(cache))} && exec {shlex.quote(sys.executable)} -m ray.scripts.scripts "
        f"start --address={shlex.quote(address)} --num-cpus=1 --resources='{{\"builder\": 1}}' --block "
        "--disable-usage-stats"
    )
    return subprocess.Popen(
        ["unshare", "-m", "sh", "-c", start],
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--tasks", nargs="+", default=list(TASKS))
    args = parser.parse_args()
    # This checkout's code, in this process and in every Ray worker (an installed copy may differ).
    sys.path.insert(0, str(ROOT))
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)

    import ray

    from cudal1.actors.bench_pool import BenchmarkPool
    from cudal1.actors.cluster import alive_nodes
    from cudal1.actors.pool_spec import PoolSpec
    from cudal1.pipeline.metrics import step_breakdown
    from cudal1.records import Candidate
    from cudal1.tasks import seed_solutions

    seeds = seed_solutions("cpu")
    candidates = [Candidate(t, seeds[t].read_text()) for t in args.tasks]
    ray.init(
        address="local",
        num_cpus=3,
        resources={"timing": 1},
        object_store_memory=256 * 2**20,
        include_dashboard=False,
        log_to_driver=False,
    )
    address = ray.get_runtime_context().gcs_address
    for layout in ("one_node", "split"):
        cache = args.out / layout / "cache"
        cache.mkdir(parents=True, exist_ok=True)
        node = None
        if layout == "split":
            node = start_builder(address, cache)
            deadline = time.monotonic() + 120
            while not any("builder" in n["resources"] for n in alive_nodes()):
                if time.monotonic() > deadline or node.poll() is not None:
                    raise SystemExit(f"the builder node did not join (exit code {node.poll()})")
                time.sleep(0.2)
        spec = PoolSpec(
            name=layout,
            num_actors=1,
            resources={"timing": 1},
            build_actors=1,
            build_cpus=1,
            build_resources={"builder": 1} if layout == "split" else {},
            settings={"cache_dir": str(cache)},
            start_timeout_s=300,
        )
        pool = BenchmarkPool(spec)
        try:
            built_on = ray.get(
                pool.builders[0].__ray_call__.remote(lambda self: ray.get_runtime_context().get_node_id())
            )
            started = time.perf_counter()
            results = pool.evaluate_many(candidates, progress=False)
            wall = time.perf_counter() - started
        finally:
            pool.shutdown()
            if node is not None:
                os.killpg(node.pid, signal.SIGTERM)
                node.wait(timeout=60)
        for r in results:
            row = {
                "layout": layout,
                "task": r.task_id,
                "status": r.status.value,
                "speedup": r.speedup,
                "build_seconds": r.build_seconds,
                "prebuild_s": r.phases_s.get("prebuild"),
                "timing_s": r.phases_s.get("timing"),
                "eval_seconds": r.eval_seconds,
                "built_on": built_on[:8],
                "timed_on": pool.workers[0]["node_id"][:8],
            }
            print(json.dumps(row), flush=True)
        breakdown = step_breakdown({"evaluate": wall}, results, pool_actors=1)
        print(json.dumps({"layout": layout, "evaluate_wall_s": round(wall, 1), **breakdown}), flush=True)
    ray.shutdown()


if __name__ == "__main__":
    main()
