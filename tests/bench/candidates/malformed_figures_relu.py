"""relu, honestly computed, whose host then sends figures no float can hold or of the wrong
shape with every answer: a number for the per-call list, a 400-digit integer among its parts.
Anything the host sends is data: a message the protocol does not allow is the candidate's fault
(a hack), never a failure of the judge."""
import sys

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.relu(x)


def _garble():
    f = sys._getframe(1)
    while f is not None and "handlers" not in f.f_locals:
        f = f.f_back
    chan = f.f_locals["self"].chan
    send = chan.send

    def garbled(op, *args, **fields):
        if op == "done":
            fields["inner_ms"] = 1
            fields["parts_ms"] = {"forwards": 10**400, "describe": "fast"}
        return send(op, *args, **fields)

    chan.send = garbled
    print("GARBLED FIGURES", flush=True)


_garble()
