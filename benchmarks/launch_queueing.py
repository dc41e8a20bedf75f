"""How much of a sub-millisecond CUDA seed's per-call time is the CPU's launch, timed three ways in
one plain process (no judge, no hosts): the yardstick for the judge's sub-ms repeatability.

    python benchmarks/launch_queueing.py level1/1 [ROUNDS] [K]     # one builtin CUDA seed, JSON on stdout

For the seed's candidate (`ModelNew`, built with its inline extension) and the task's reference,
each round is K fresh input sets (`inputs.make_input_sets`) after a 256 MiB L2 flush, with CUDA
events around each forward, timed three ways, the order rotating from round to round:

- `pipelined`: the forwards back to back and one synchronize at the end, as the judge's hosts
  run a round trip (`cudal1.bench.host._timed_forwards`): a call's events also hold whatever time
  the device waited for the CPU to launch it;
- `queued`: the same behind a `torch.cuda._sleep` of 1.5x the CPU's launch time of a round plus
  50 us, so that every launch is queued before the device reaches the first event (NVBench's
  blocking-kernel idea): the events hold device time only;
- `synced`: a synchronize before and after each call (KernelBench's `cuda_event` timing).

Per program and way: the median per-call ms over the rounds (each round's mean over its K calls),
its 10th and 90th percentiles, `block_spread` ((max - min) / median of the medians of 5
interleaved blocks of rounds: how far apart five short evaluations would land) and the CPU's
launch ms per call. The `queued` way is a measurement here only: in the judge the sleep would be
the candidate host's to skip (see docs/benchmarks.md, 2026-12-05, twenty-sixth session).
"""

from __future__ import annotations

import json
import statistics
import sys
import time

import torch

from cudal1.bench.inputs import make_init_inputs, make_input_sets
from cudal1.tasks import find_task, load_tasks, seed_solutions
from cudal1.tasks.task import load_source_module

WAYS = ("pipelined", "queued", "synced")


def main(argv: list[str]) -> int:
    if not argv or not torch.cuda.is_available():
        print(__doc__ if not argv else "needs a CUDA device", file=sys.stderr)
        return 2
    tid = argv[0]
    rounds = int(argv[1]) if len(argv) > 1 else 40
    k = int(argv[2]) if len(argv) > 2 else 8
    task = find_task(load_tasks("builtin"), tid)
    module = task.load_module("cuda")
    t0 = time.time()
    cand_mod = load_source_module(seed_solutions("cuda")[tid].read_text(), "seed_" + tid.replace("/", "_"))
    build_s = time.time() - t0
    init = make_init_inputs(module)
    torch.manual_seed(0)
    ref = module.Model(*init).cuda()
    torch.manual_seed(0)
    cand = cand_mod.ModelNew(*init).cuda()
    flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    events = [torch.cuda.Event(enable_timing=True) for _ in range(2 * k)]
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    start.record()
    torch.cuda._sleep(10_000_000)
    end.record()
    torch.cuda.synchronize()
    cycles_per_ms = 10_000_000 / start.elapsed_time(end)

    def run(
        model: torch.nn.Module, xs: list[list[object]], way: str, sleep_ms: float = 0.0
    ) -> tuple[list[float], float]:
        flush.zero_()
        torch.cuda.synchronize()
        t = time.perf_counter_ns()
        if way == "queued":
            torch.cuda._sleep(int(sleep_ms * cycles_per_ms))
        for j, x in enumerate(xs):
            if way == "synced":
                torch.cuda.synchronize()
            events[2 * j].record()
            model(*x)
            events[2 * j + 1].record()
            if way == "synced":
                torch.cuda.synchronize()
        launch_ms = (time.perf_counter_ns() - t) / 1e6
        torch.cuda.synchronize()
        return [events[2 * j].elapsed_time(events[2 * j + 1]) for j in range(len(xs))], launch_ms

    report: dict[str, object] = {
        "task": tid,
        "device": torch.cuda.get_device_name(),
        "K": k,
        "rounds": rounds,
        "build_s": round(build_s, 1),
        "cycles_per_ms": round(cycles_per_ms),
    }
    with torch.no_grad():
        for name, model in (("candidate", cand), ("reference", ref)):
            for w in range(3):
                run(model, make_input_sets(module, 10_000 + w, "cuda", k), "pipelined")
            launches = [run(model, make_input_sets(module, 20_000 + w, "cuda", k), "pipelined")[1] for w in range(5)]
            sleep_ms = 1.5 * statistics.median(launches) + 0.05
            means: dict[str, list[float]] = {w: [] for w in WAYS}
            launch: dict[str, list[float]] = {w: [] for w in WAYS}
            for r in range(rounds):
                xs = make_input_sets(module, 30_000 + r, "cuda", k)
                for way in WAYS[r % 3 :] + WAYS[: r % 3]:
                    times, launch_ms = run(model, xs, way, sleep_ms)
                    means[way].append(sum(times) / k)
                    launch[way].append(launch_ms / k)
                xs = None
            for way in WAYS:
                ordered = sorted(means[way])
                blocks = [statistics.median(means[way][i::5]) for i in range(5)]
                report[f"{name} {way}"] = {
                    "median_ms": round(statistics.median(ordered), 5),
                    "p10": round(ordered[len(ordered) // 10], 5),
                    "p90": round(ordered[9 * len(ordered) // 10], 5),
                    "block_spread": round((max(blocks) - min(blocks)) / statistics.median(blocks), 4),
                    "launch_ms_per_call": round(statistics.median(launch[way]), 5),
                }
            report[f"{name} sleep_ms"] = round(sleep_ms, 4)
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
