"""relu(A @ B) on two intra-op threads (switched back before forward returns), in a host that
waits 40 ms before it sends each round trip's `audited`. Counted until after that answer, the
CPU-time interval held the sleep, elapsed time with no CPU, which the count (CPU beyond the
interval's length, `timing.parallel_cpu_ms`) lent to the second thread: paid 1.54-2.00x,
charged nothing, against an honest 1.0x (2-core machine, 2026-12-07)."""
import sys
import time

import torch
import torch.nn as nn


def _take_over():
    f = sys._getframe(1)
    while f is not None and "handlers" not in f.f_locals:
        f = f.f_back
    host = f.f_locals["self"]
    send = host.chan.send

    def late(op, fds=None, **fields):
        if op == "audited":
            time.sleep(0.04)
        return send(op, fds=fds, **fields)

    host.chan.send = late


_take_over()


class ModelNew(nn.Module):
    def forward(self, a, b):
        before = torch.get_num_threads()
        torch.set_num_threads(2)
        try:
            return torch.matmul(a, b).relu()
        finally:
            torch.set_num_threads(before)
