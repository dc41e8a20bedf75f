"""matmul then relu, honestly computed in the unmodified host, which does all its checks and
bookkeeping, but reports every forward's time as __FACTOR__ of what its own clock measured. With a
factor near 1 its figures stay inside the judge's bound (above the judge's clock less the high
fixed cost), so it keeps the tolerance the judge gives figures it can believe
(`timing.candidate_rounds_ms`): what it gains is what that tolerance forgives
(`scripts/gpu_lean_host.py --variants underclaim`)."""
import sys

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, a, b):
        return torch.matmul(a, b).relu()


def _take_over():
    f = sys._getframe(1)
    while f is not None and "handlers" not in f.f_locals:
        f = f.f_back
    host = f.f_locals["self"]
    timed, revealed = host._timed_forwards, host._revealed_forwards

    def scaled(times):
        return [t * __FACTOR__ for t in times]

    host._timed_forwards = lambda sets, place: (lambda r: (scaled(r[0]), r[1]))(timed(sets, place))
    host._revealed_forwards = lambda n, reply, placing: (lambda r: (scaled(r[0]), r[1]))(
        revealed(n, reply, placing)
    )
    print("UNDERCLAIMING HOST __FACTOR__", flush=True)


_take_over()
