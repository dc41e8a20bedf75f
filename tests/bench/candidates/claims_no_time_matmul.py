"""matmul_512 (matmul then relu), honestly computed, whose host then reports that every forward
took a microsecond: the candidate host's own clock is a claim, and the judge's clock bounds it."""
import sys

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, a, b):
        return torch.matmul(a, b).relu()


def _lie():
    f = sys._getframe(1)
    while f is not None and "handlers" not in f.f_locals:
        f = f.f_back
    host = f.f_locals["self"]
    timed, revealed = host._timed_forwards, host._revealed_forwards  # CUDA's round trip, the CPU's

    def claimed(*args):
        _, outs = (timed if host.cuda else revealed)(*args)
        return [0.001] * len(outs), outs

    host._timed_forwards = host._revealed_forwards = claimed
    print("CLAIMS NO TIME", flush=True)


_lie()
