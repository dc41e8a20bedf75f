"""matmul then relu, honestly, in a process that counts the SIGCONTs it receives (a process
stopped with SIGSTOP gets one when it is continued) and prints the count at every forward.
Each delivery writes a byte to the signal wakeup pipe, so two SIGCONTs that arrive before the
Python-level handler runs (it runs once for both) are still counted twice."""
import os
import signal

import torch
import torch.nn as nn

_read, _write = os.pipe()
os.set_blocking(_read, False)
os.set_blocking(_write, False)
signal.signal(signal.SIGCONT, lambda signum, frame: None)
signal.set_wakeup_fd(_write, warn_on_full_buffer=False)
_continued = [0]


def _count():
    try:
        while True:
            got = os.read(_read, 4096)
            if not got:
                break
            _continued[0] += got.count(signal.SIGCONT)
    except BlockingIOError:
        pass
    return _continued[0]


class ModelNew(nn.Module):
    def forward(self, a, b):
        print("CONTINUED", _count(), flush=True)
        return torch.matmul(a, b).relu()
