"""blocks_while_judge_reads_matmul.py plus 40 idle processes (`sleep`), which lengthen the parent's
two readings of the candidate's CPU time (one `_alive` and one `_process_cpu_ns` each); with
`warm_go` both readings lie inside the interval the count compares against, and the host, which
blocks instead of spinning, lends that time to its second thread."""
import subprocess
import sys

import torch
import torch.nn as nn


def _take_over():
    f = sys._getframe(1)
    while f is not None and "handlers" not in f.f_locals:
        f = f.f_back
    host = f.f_locals["self"]
    recv = host.chan.recv

    def blocking(*args, **kwargs):
        kwargs["spin"] = False
        return recv(*args, **kwargs)

    host.chan.recv = blocking


_take_over()
_idle = [subprocess.Popen(["sleep", "3600"]) for _ in range(40)]


class ModelNew(nn.Module):
    def forward(self, a, b):
        before = torch.get_num_threads()
        torch.set_num_threads(2)
        try:
            return torch.matmul(a, b).relu()
        finally:
            torch.set_num_threads(before)
