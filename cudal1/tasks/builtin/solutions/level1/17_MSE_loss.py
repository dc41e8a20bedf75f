import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

# mean((p - t)^2) in a single read of both operands: no difference or square tensors. Each
# thread sums its chunk in float lanes, chunks are combined in double.
_SOURCE = r"""
#include <ATen/Parallel.h>
#include <vector>

torch::Tensor mse_mean(torch::Tensor p, torch::Tensor t) {
    TORCH_CHECK(p.sizes() == t.sizes(), "shapes must match");
    TORCH_CHECK(p.scalar_type() == torch::kFloat32 && t.scalar_type() == torch::kFloat32 &&
                p.device().is_cpu() && t.device().is_cpu(), "float32 CPU tensors expected");
    p = p.contiguous();
    t = t.contiguous();
    const int64_t n = p.numel();
    const float* pp = p.data_ptr<float>();
    const float* pt = t.data_ptr<float>();
    constexpr int64_t BLOCK = 1 << 14;
    const int64_t blocks = (n + BLOCK - 1) / BLOCK;
    std::vector<double> partial(blocks, 0.0);
    at::parallel_for(0, blocks, 1, [&](int64_t begin, int64_t end) {
        for (int64_t b = begin; b < end; ++b) {
            const int64_t lo = b * BLOCK, hi = std::min(n, lo + BLOCK);
            float s = 0.f;
            #pragma omp simd reduction(+:s)
            for (int64_t i = lo; i < hi; ++i) {
                const float d = pp[i] - pt[i];
                s += d * d;
            }
            partial[b] = s;
        }
    });
    double total = 0.0;
    for (double v : partial) total += v;
    return torch::tensor((float)(total / (double)n), p.options());
}
"""

# AVX2/FMA (any x86-64 CPU since 2013); -fno-trapping-math lets GCC vectorize loops with float
# selects and -fno-math-errno lets it inline sqrt: neither changes a result.
_ext = load_inline(
    name="cudal1_seed_l1_mse_mean",
    cpp_sources=_SOURCE,
    functions=["mse_mean"],
    extra_cflags=["-O3", "-mavx2", "-mfma", "-fno-trapping-math", "-fno-math-errno", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
)


class ModelNew(nn.Module):
    """Mean squared error as one fused C++ reduction (OpenMP over blocks)."""

    def __init__(self):
        super().__init__()

    def forward(self, predictions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return _ext.mse_mean(predictions, targets)
