"""Keeps every call's input tensor and, from a thread, watches whether the memory behind any of
them changes after its call (the red team's "follower": on a slot the judge reuses, the next
call's inputs appear there before the judge starts its clock, and a thread can start on them).
Prints what it saw; computes relu honestly."""
import threading
import time

import torch
import torch.nn as nn

_seen = []  # (input tensor, a copy of its values at the call)
_changed = []


def _watch():
    while True:
        for x, values in list(_seen):
            if not torch.equal(x, values):
                _changed.append(1)
        time.sleep(0.001)


threading.Thread(target=_watch, daemon=True).start()


class ModelNew(nn.Module):
    def forward(self, x):
        _seen.append((x, x.clone()))
        print(f"WATCHED {len(_seen)} INPUTS, CHANGED AFTER THEIR CALL: {bool(_changed)}", flush=True)
        return torch.relu(x)
