"""Honest relu until one of its forwards runs under a TorchDispatchMode (the judge recording its
operators for the labels); every forward after that is off by one. A process changed for good by
the recording (torch.compile's dynamo skips a compiled frame once it met such a mode) must not
reach anything timed or checked."""
import torch
import torch.nn as nn
from torch.utils._python_dispatch import _get_current_dispatch_mode


class ModelNew(nn.Module):
    recorded = False

    def forward(self, x):
        if _get_current_dispatch_mode() is not None:
            ModelNew.recorded = True
        out = torch.relu(x)
        return out + 1 if ModelNew.recorded else out
