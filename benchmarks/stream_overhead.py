"""Overhead of the streaming path with nothing to evaluate (the smoke config's case): a generator
group of one transformers engine and a CPU pool of one actor on a local Ray cluster. Times the
group's `generate` against `generate_stream` collected (alternating which goes first), and
opening and closing a pool stream that gets no candidates.

    PYTHONPATH=. .venv/bin/python benchmarks/stream_overhead.py 20
"""

import statistics
import sys
import time

from cudal1.actors.cluster import init_ray, shutdown_ray
from cudal1.actors.generator_group import GeneratorGroup
from cudal1.actors.bench_pool import BenchmarkPool, PoolSpec
from cudal1.policy.small import init_small

if __name__ == "__main__":
    d = init_small("/tmp/cudal1-stream-overhead-model", seed=0, overwrite=True)
    init_ray(address="local", num_cpus=3, object_store_mb=256, include_dashboard=False, log_to_driver=False)
    try:
        group = GeneratorGroup.start(
            str(d), "hf", num_engines=1, num_cpus=1, max_model_len=4096, dtype="float32", seed=0
        )
        group.ready(timeout_s=600)
        pool = BenchmarkPool(PoolSpec(name="cpu", num_actors=1, num_cpus=1, start_timeout_s=300))
        prompts = [[5, 17, 99 + i] * 300 for i in range(2)]  # ~900-token prompts, like the smoke's
        kw = dict(n=2, max_tokens=48, temperature=1.0, top_p=1.0)
        t = {"generate": [], "generate_stream": [], "pool.stream (empty)": []}
        for rep in range(int(sys.argv[1]) if len(sys.argv) > 1 else 10):
            calls = [
                ("generate", lambda: group.generate(prompts, **kw)),
                ("generate_stream", lambda: list(group.generate_stream(prompts, **kw))),
            ]
            for name, call in calls if rep % 2 == 0 else calls[::-1]:  # alternate which goes first
                a = time.perf_counter()
                call()
                t[name].append(time.perf_counter() - a)
            a = time.perf_counter()
            with pool.stream(progress=False) as s:
                s.results()
            t["pool.stream (empty)"].append(time.perf_counter() - a)
        for k, v in t.items():
            print(
                f"{k}: median {statistics.median(v) * 1000:.0f} ms, mean {statistics.fmean(v) * 1000:.0f} ms, "
                f"min {min(v) * 1000:.0f}, max {max(v) * 1000:.0f} (n={len(v)})"
            )
        pool.shutdown()
        group.kill()
    finally:
        shutdown_ray()
