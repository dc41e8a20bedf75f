"""Leaves a process that keeps forking and letting its parent exit, so it is never at a pid
anyone listed; it prints its user id, and keeps going for 60 s unless killed."""
import os
import time

import torch
import torch.nn as nn

print(f"HOPPER_UID={os.getuid()}", flush=True)
if os.fork() == 0:
    os.setsid()
    _end = time.monotonic() + 60
    while time.monotonic() < _end:
        if os.fork() != 0:
            os._exit(0)
        time.sleep(0.01)
    os._exit(0)


class ModelNew(nn.Module):
    def forward(self, a, b):
        return torch.mm(a, b).clamp_min_(0.0)
