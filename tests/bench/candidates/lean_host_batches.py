"""sin_chain in a host the candidate rebuilt (CUDA): it spins on its socket instead of sleeping
in select, runs every input set of a round trip at once (stacked: one chain for the round, the
host holds all the sets before the first call), synchronises, and answers with no bookkeeping and
no times of its own. In a one-call round trip it pays only its lean host's fixed cost, less than
the unmodified reference host's: what the one-call floor must not forgive beyond its noise.
Prints "BATCHED n" for each round trip of n > 1 sets."""
import select
import sys

import torch
import torch.nn as nn


def chain(y):
    for _ in range(16):
        y = torch.sin(y) * 0.5 + y
    return y


class ModelNew(nn.Module):
    def forward(self, x):
        return chain(x)


def _take_over():
    f = sys._getframe(1)
    while f is not None and "handlers" not in f.f_locals:
        f = f.f_back
    handlers, host = f.f_locals["handlers"], f.f_locals["self"]
    sock = host.chan.sock

    def spin(deadline, spinning=False):
        while not select.select([sock], [], [], 0)[0]:
            pass

    host.chan._wait = spin
    inner = handlers["call"]

    def lean(msg):
        if not host.cuda:
            return inner(msg)
        host._map_inputs(msg)
        with torch.no_grad():
            done = chain(torch.stack([args[0] for args in host.sets]))
            outs = [done[i].clone() for i in range(len(host.sets))]
        torch.cuda.synchronize()
        host.previous = outs
        leaves = [[host._locate(o, host.out_specs[0])] for o in outs]  # the judge's format (IPC handles)
        host.chan.send("done", k=msg["k"], leaves=leaves, values=[[] for _ in outs], mismatch=None, hack=None,
                       error=None)
        host.chan.send("audited", hack=None)
        if len(outs) > 1:
            print("BATCHED", len(outs), flush=True)

    handlers["call"] = lean


_take_over()
