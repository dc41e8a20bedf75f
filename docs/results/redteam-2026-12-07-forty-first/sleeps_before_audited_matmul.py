"""relu(A @ B) on two intra-op threads (as threads_toggled_matmul), and the host waits 40 ms
before it sends each round trip's `audited`. The judge takes the round trip's time (wall_ms)
before it waits for `audited`, but the interval its CPU-time count compares against
(`Judge._call`: from the go, or with warm_go the start reading, until after `audited` came)
includes that wait: the host's sleep is elapsed time with no CPU, which the count
(`timing.parallel_cpu_ms`: CPU beyond the interval's length) lends to the second thread."""
import sys
import time

import torch
import torch.nn as nn

DELAY_S = 0.04


def _take_over():
    f = sys._getframe(1)
    while f is not None and "handlers" not in f.f_locals:
        f = f.f_back
    host = f.f_locals["self"]
    send = host.chan.send

    def late(op, fds=None, **fields):
        if op == "audited":
            time.sleep(DELAY_S)
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
