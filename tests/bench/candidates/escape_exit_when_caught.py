"""A result-cache cheat whose process exits as soon as the judge, having seen a wrong timed answer,
asks it anything more: a dead candidate must not turn a caught hack into a mere crash."""
import os
import sys

import torch
import torch.nn as nn

_f = sys._getframe()
while _f is not None and "handlers" not in _f.f_locals:
    _f = _f.f_back
_handlers = _f.f_locals["handlers"]
_original = _handlers["check"]
_calls = [0]


def _exit(msg):
    if _calls[0] > 8:
        os._exit(0)
    return _original(msg)


_handlers["check"] = _exit


class ModelNew(nn.Module):
    last = None

    def forward(self, a, b):
        _calls[0] += 1
        if _calls[0] <= 8 or self.last is None:
            type(self).last = torch.relu(a @ b)
        return self.last.clone()
