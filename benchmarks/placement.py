"""Does a kernel's time depend on where its tensors lie in device memory?

The evaluator's repeatability runs showed the same candidate differing by up to 5% between
evaluations (fresh processes) while its rounds inside one evaluation agreed far better. One
explanation: inside a process the caching allocator hands the same few blocks back call after
call, so one evaluation sees one memory placement, and the next process another. This script
times one operation on K input/output placements inside one process (all K kept alive, so they
are distinct blocks): if the per-placement medians differ as much as whole evaluations did,
placement is the cause, and cycling placements inside an evaluation averages it out.

    python benchmarks/placement.py --op softmax --shape 4096 16384 --placements 8
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys

import torch

OPS = {
    "softmax": lambda x: torch.softmax(x, dim=-1),
    "relu": torch.relu,
    "sum": lambda x: x.sum(dim=-1),
}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--op", default="softmax", choices=sorted(OPS))
    ap.add_argument("--shape", type=int, nargs="+", default=[4096, 16384])
    ap.add_argument("--placements", type=int, default=8)
    ap.add_argument("--calls", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args(argv)
    op = OPS[args.op]
    torch.manual_seed(0)
    # Spacers between the inputs so the blocks land at different offsets, not one contiguous run.
    keep = []
    inputs = []
    for i in range(args.placements):
        keep.append(torch.empty(int(1 + i * 3.7e6), dtype=torch.uint8, device="cuda"))
        inputs.append(torch.rand(*args.shape, device="cuda"))
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    per_placement: dict[int, list[float]] = {i: [] for i in range(args.placements)}
    for _ in range(args.rounds):
        for i, x in enumerate(inputs):
            for _ in range(5):
                op(x)
            torch.cuda.synchronize()
            for _ in range(args.calls):
                start.record()
                op(x)
                stop.record()
                torch.cuda.synchronize()
                per_placement[i].append(start.elapsed_time(stop))
    medians = [statistics.median(v) for v in per_placement.values()]
    out = {
        "op": args.op,
        "shape": args.shape,
        "ptrs_mod_2MiB": [x.data_ptr() % (2 << 20) for x in inputs],
        "median_ms_per_placement": [round(m, 5) for m in medians],
        "spread_across_placements": round((max(medians) - min(medians)) / statistics.median(medians), 4),
    }
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
