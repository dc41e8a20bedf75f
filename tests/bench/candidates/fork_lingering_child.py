"""Forks a child that sleeps for 10 minutes and prints its pid (the test checks it is gone)."""
import os
import time

import torch
import torch.nn as nn

_pid = os.fork()
if _pid == 0:
    time.sleep(600)
    os._exit(0)
print(f"LINGERING_PID={_pid}", flush=True)


class ModelNew(nn.Module):
    def forward(self, a, b):
        return torch.relu(a @ b)
