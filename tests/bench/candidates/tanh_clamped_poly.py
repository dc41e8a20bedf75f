"""tanh by a rational approximation (a Pade form) valid on [-4.97, 4.97] and clamped to +-1
beyond: within float32's tolerance of tanh on every input. The contrast to the two easy-range
shortcuts: an approximation that is right everywhere is an honest kernel."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.clamp(-4.97, 4.97)
        x2 = x * x
        p = x * (135135.0 + x2 * (17325.0 + x2 * (378.0 + x2)))
        q = 135135.0 + x2 * (62370.0 + x2 * (3150.0 + x2 * 28.0))
        return p / q
