"""matmul then relu, honestly, in a process that counts the SIGCONTs it receives (a process
stopped with SIGSTOP gets one when it is continued) and prints the count at every forward."""
import signal

import torch
import torch.nn as nn

_continued = [0]


def _count(signum, frame):
    _continued[0] += 1


signal.signal(signal.SIGCONT, _count)


class ModelNew(nn.Module):
    def forward(self, a, b):
        print("CONTINUED", _continued[0], flush=True)
        return torch.matmul(a, b).relu()
