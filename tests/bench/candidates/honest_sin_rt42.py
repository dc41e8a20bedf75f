"""sin(x), honest: the control of the exec red-team candidates
(docs/results/redteam-2026-12-07-forty-second/), a copy of the forty-first red team's honest_sin."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.sin(x)
