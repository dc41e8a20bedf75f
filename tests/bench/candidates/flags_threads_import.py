"""torch.set_num_threads(2) at import: more threads than the hosts run; would change the reference on
the CPU if it leaked."""
import torch
import torch.nn as nn

torch.set_num_threads(2)


class ModelNew(nn.Module):
    def forward(self, a, b):
        return torch.mm(a, b).clamp_min_(0.0)
