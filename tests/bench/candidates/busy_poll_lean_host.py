"""matmul then relu, honestly computed, in a host the candidate rebuilt for speed of answer: it
spins on its socket instead of sleeping in select (no scheduler wake-up when the judge says go),
runs each forward and answers with no bookkeeping (on the CPU, one call at a time as the judge
reveals each input set), and sends no times of its own. Counted at the
judge's clock less the round trip's typical fixed cost, measured on the unmodified host before
the candidate existed: whatever of that cost the rebuilt host no longer pays is under-claimed.
It prints its real forward times (REAL ms ...) so that a test can tell what it gained."""
import select
import sys
import time

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, a, b):
        return torch.matmul(a, b).relu()


def _take_over():
    f = sys._getframe(1)
    while f is not None and "handlers" not in f.f_locals:
        f = f.f_back
    handlers, host = f.f_locals["handlers"], f.f_locals["self"]
    sock = host.chan.sock

    def spin(deadline, spinning=False):
        while not select.select([sock], [], [], 0)[0]:
            pass

    if __SPIN__:
        host.chan._wait = spin

    def lean_revealed(msg):
        # CPU: the judge reveals each input set once it holds the last call's output.
        host._map_inputs(msg)
        outs, real = [], 0
        for j in range(msg["n"]):
            if j:
                host._await_reveal(j)
            t0 = time.perf_counter_ns()
            with torch.no_grad():
                outs.append(host.model(*host.sets[j]))
            real += time.perf_counter_ns() - t0
            host.chan.send("placed", j=j, leaves=[host._locate(outs[-1], host.out_specs[0])], values=[])
        host.previous = outs
        host.chan.send("done", k=msg["k"], leaves=[], values=[], mismatch=None, hack=None, error=None)
        host.chan.send("audited", hack=None)
        print(f"REAL ms {len(outs)} {real / 1e6:.4f}", flush=True)

    def lean(msg):
        if not host.cuda:
            return lean_revealed(msg)
        host._map_inputs(msg)
        t0 = time.perf_counter_ns()
        with torch.no_grad():
            outs = [host.model(*args) for args in host.sets]
        real = (time.perf_counter_ns() - t0) / 1e6
        host.previous = outs
        host.chan.send("done", k=msg["k"], leaves=[[{"addr": o.data_ptr(), "strides": list(o.stride())}] for o in outs],
                       values=[[] for _ in outs], mismatch=None, hack=None, error=None)
        host.chan.send("audited", hack=None)  # the memory checks, after the answer: nothing to report
        print(f"REAL ms {len(outs)} {real:.4f}", flush=True)

    handlers["call"] = lean
    print("BUSY POLL LEAN HOST", __SPIN__, flush=True)


_take_over()
