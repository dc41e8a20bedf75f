import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

# One row (D floats, a few KiB) at a time: a sum-of-squares pass and a scaling pass over the
# same row while it sits in L1, so x is read from memory once and the output written once. The
# reference makes x², the mean, and two full-size products, each a separate pass and buffer.
_SOURCE = r"""
#include <ATen/Parallel.h>
#include <cmath>

torch::Tensor rms_norm(torch::Tensor x, torch::Tensor weight, double eps) {
    TORCH_CHECK(x.scalar_type() == torch::kFloat32 && x.device().is_cpu(), "float32 CPU tensor expected");
    const int64_t D = x.size(-1);
    TORCH_CHECK(weight.numel() == D, "weight must have size x.size(-1)");
    x = x.contiguous();
    weight = weight.contiguous();
    auto out = torch::empty_like(x);
    const int64_t rows = D ? x.numel() / D : 0;
    const float* px = x.data_ptr<float>();
    const float* pw = weight.data_ptr<float>();
    float* po = out.data_ptr<float>();
    at::parallel_for(0, rows, 16, [&](int64_t begin, int64_t end) {
        for (int64_t r = begin; r < end; ++r) {
            const float* row = px + r * D;
            float* dst = po + r * D;
            float ss = 0.f;
            #pragma omp simd reduction(+:ss)
            for (int64_t j = 0; j < D; ++j) ss += row[j] * row[j];
            const float inv = 1.0f / std::sqrt(ss / (float)D + (float)eps);
            #pragma omp simd
            for (int64_t j = 0; j < D; ++j) dst[j] = (row[j] * inv) * pw[j];
        }
    });
    return out;
}
"""

# AVX2/FMA (any x86-64 CPU since 2013); -fno-trapping-math lets GCC vectorize loops with float
# selects and -fno-math-errno lets it inline sqrt: neither changes a result.
_ext = load_inline(
    name="cudal1_seed_l1_rms_norm",
    cpp_sources=_SOURCE,
    functions=["rms_norm"],
    extra_cflags=["-O3", "-mavx2", "-mfma", "-fno-trapping-math", "-fno-math-errno", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
)


class ModelNew(nn.Module):
    """RMS norm over the last dim in one fused C++ pass per row (OpenMP over rows)."""

    def __init__(self, dim: int, eps: float = 1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.rms_norm(x, self.weight.detach(), self.eps)
