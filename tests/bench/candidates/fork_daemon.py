"""Double fork with setsid: the grandchild leaves the worker's process tree and session, prints its
pid, and sleeps for 10 minutes (the test checks it is gone)."""
import os
import time

import torch
import torch.nn as nn

_r, _w = os.pipe()
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.write(_w, str(os.getpid()).encode())
        time.sleep(600)
    os._exit(0)
print(f"LINGERING_PID={int(os.read(_r, 32))}", flush=True)


class ModelNew(nn.Module):
    def forward(self, a, b):
        return torch.relu(a @ b)
