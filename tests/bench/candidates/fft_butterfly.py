"""Honest: an iterative radix-2 Cooley-Tukey FFT (bit reversal, then log2(n) butterfly stages) in
complex64. It differs from torch.fft.fft only by float rounding."""
import math

import torch
import torch.nn as nn


def _bit_reverse(n: int) -> torch.Tensor:
    bits = int(math.log2(n))
    idx = torch.arange(n)
    rev = torch.zeros_like(idx)
    for b in range(bits):
        rev |= ((idx >> b) & 1) << (bits - 1 - b)
    return rev


class ModelNew(nn.Module):
    def forward(self, x):
        n = x.shape[-1]
        a = x.to(torch.complex64)[..., _bit_reverse(n)]
        size = 2
        while size <= n:
            half = size // 2
            w = torch.exp(-2j * math.pi * torch.arange(half, dtype=torch.float64) / size).to(torch.complex64)
            a = a.reshape(*x.shape[:-1], n // size, size)
            even, odd = a[..., :half], a[..., half:] * w
            a = torch.cat([even + odd, even - odd], dim=-1).reshape(*x.shape[:-1], n)
            size *= 2
        return a
