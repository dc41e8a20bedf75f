"""What the parent's questions about a host's output pages cost (`cudal1.bench.backing`, `cudal1.bench.pagemap`).

    python benchmarks/backing_cost.py [--questions 2000]

Starts a PyTorch process holding eight 4 MiB tensors and asks `Backing.aliased` about one
and about all eight ranges, by the PROCMAP_QUERY ioctl and by the text of /proc/<pid>/maps,
printing microseconds a question and the number of mappings of that process; then
`pagemap.page_problems` about the same ranges. The parent asks the first twice per read (before
and after) and the second once (after), for the candidate's and the reference's host alike.
Last, what the parent's read of the same ranges costs (`HostMemory.read`, the questions
included), and its overwrite of them (`HostMemory.overwrite`, once the judge is done with a
round trip's outputs): dense, and as a view of every other float32 (short runs: read, set,
written back whole).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

from cudal1.bench import pagemap
from cudal1.bench.backing import Backing
from cudal1.bench.readers import HostMemory

_CHILD = (
    "import sys, torch; t = [torch.randn(1 << 20) for _ in range(8)]; "
    "print(*[x.data_ptr() for x in t], flush=True); sys.stdin.read()"
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=2000)
    args = parser.parse_args()
    child = subprocess.Popen([sys.executable, "-c", _CHILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        addrs = [int(v) for v in child.stdout.readline().split()]
        with open(f"/proc/{child.pid}/maps") as f:
            mappings = len(f.read().splitlines())
        for use_query in (True, False):
            backing = Backing(child.pid, use_query=use_query)
            for n in (1, 8):
                ranges = [[a, 4 << 20, 0] for a in addrs[:n]]
                assert backing.aliased(ranges) == []
                t0 = time.perf_counter()
                for _ in range(args.questions):
                    backing.aliased(ranges)
                us = (time.perf_counter() - t0) / args.questions * 1e6
                way = "PROCMAP_QUERY" if use_query else "maps text"
                print(f"{way}: {n} range(s): {us:.1f} us a question ({mappings} mappings)")

        for n in (1, 8):
            ranges = [[a, 4 << 20, 0] for a in addrs[:n]]
            assert pagemap.page_problems(child.pid, ranges) == {}
            t0 = time.perf_counter()
            for _ in range(args.questions // 10):
                pagemap.page_problems(child.pid, ranges)
            us = (time.perf_counter() - t0) / (args.questions // 10) * 1e6
            print(f"pagemap: {n} range(s) of 4 MiB: {us:.1f} us a question")

        memory = HostMemory(child.pid)
        fd = os.memfd_create("backing-cost")
        os.ftruncate(fd, 32 << 20)
        memory.share(fd)
        every_other = {"shape": [1 << 19], "strides": [2], "itemsize": 4}
        cases = [
            ("read", 1, lambda: memory.read([[addrs[0], 4 << 20, 0]])),
            ("read", 8, lambda: memory.read([[a, 4 << 20, i << 22] for i, a in enumerate(addrs)])),
            ("overwrite", 1, lambda: memory.overwrite([[addrs[0], 4 << 20, 0]], 0xF8)),
            ("overwrite", 8, lambda: memory.overwrite([[a, 4 << 20, 0] for a in addrs], 0xF8)),
            (
                "overwrite of every other float32",
                1,
                lambda: memory.overwrite([[addrs[0], (4 << 20) - 4, 0, every_other]], 0xF8),
            ),
        ]
        for what, n, ask in cases:
            assert ask()[0] is None
            t0 = time.perf_counter()
            for _ in range(args.questions // 20):
                ask()
            ms = (time.perf_counter() - t0) / (args.questions // 20) * 1e3
            print(f"{what}: {n} range(s) of 4 MiB: {ms:.2f} ms")
    finally:
        child.kill()
        child.wait()


if __name__ == "__main__":
    main()
