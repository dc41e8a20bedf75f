"""Sends SIGUSR1 to the test process (pid __PID__) and SIGKILL to its own parent, then behaves."""
import os
import signal

import torch
import torch.nn as nn

for _pid, _sig in ((__PID__, signal.SIGUSR1), (os.getppid(), signal.SIGKILL)):
    try:
        os.kill(_pid, _sig)
        print(f"SIGNALLED {_pid}", flush=True)
    except OSError as _e:
        print(f"REFUSED {_pid}: {_e}", flush=True)


class ModelNew(nn.Module):
    def forward(self, a, b):
        return torch.mm(a, b).clamp_min_(0.0)
