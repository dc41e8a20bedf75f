"""SIGKILLs its own process in forward."""
import os
import signal

import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, a, b):
        os.kill(os.getpid(), signal.SIGKILL)
