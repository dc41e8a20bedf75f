import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

# The temperature is applied by the GEMM itself (addmm's alpha and beta scale the product and
# the bias), and the softmax runs in place on the GEMM's own output, one row at a time while the
# row sits in L1 (max, exp-and-sum, normalize): no divided-logits buffer and no softmax output
# buffer, where the reference allocates and fills both.
_SOURCE = r"""
#include <ATen/Parallel.h>
#include <cstdint>
#include <limits>

// exp(x) for x <= 0, vectorizable: x = k*ln2 + r with |r| <= ln2/2, exp(r) from a degree-6
// polynomial (Cephes expf coefficients, about 1 ulp), 2^k written into the exponent bits. Below
// -87 it returns exp(-87) ~ 1.6e-38 instead of a subnormal or zero: invisible next to the
// row's largest term exp(0) = 1 after normalization (at most 1e-38 absolute).
static inline float exp_nonpos(float x) {
    x = x < -87.0f ? -87.0f : x;
    // x <= 0, so truncating (x*log2(e) - 1/2) toward zero rounds x*log2(e) to nearest
    const int32_t ki = (int32_t)(x * 1.44269504088896341f - 0.5f);
    const float k = (float)ki;
    float r = x - k * 0.693359375f;
    r = r + k * 2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    const float e = p * r * r + r + 1.0f;
    return e * __builtin_bit_cast(float, (ki + 127) << 23);
}

// Row-wise softmax of a contiguous (B, C) float32 tensor, in place.
void softmax_rows_(torch::Tensor y) {
    TORCH_CHECK(y.dim() == 2 && y.scalar_type() == torch::kFloat32 && y.device().is_cpu() &&
                y.is_contiguous(),
                "contiguous (B, C) float32 CPU tensor expected");
    const int64_t B = y.size(0), C = y.size(1);
    float* py = y.data_ptr<float>();
    at::parallel_for(0, B, 1, [&](int64_t begin, int64_t end) {
        for (int64_t b = begin; b < end; ++b) {
            float* row = py + b * C;
            float m = -std::numeric_limits<float>::infinity();
            #pragma omp simd reduction(max:m)
            for (int64_t j = 0; j < C; ++j) m = row[j] > m ? row[j] : m;
            float s = 0.f;
            #pragma omp simd reduction(+:s)
            for (int64_t j = 0; j < C; ++j) {
                const float e = exp_nonpos(row[j] - m);
                row[j] = e;
                s += e;
            }
            const float inv = 1.0f / s;
            #pragma omp simd
            for (int64_t j = 0; j < C; ++j) row[j] *= inv;
        }
    });
}
"""

# AVX2/FMA (any x86-64 CPU since 2013); -fno-trapping-math lets GCC vectorize loops with float
# selects and -fno-math-errno lets it inline sqrt: neither changes a result.
_ext = load_inline(
    name="cudal1_seed_l2_softmax_rows",
    cpp_sources=_SOURCE,
    functions=["softmax_rows_"],
    extra_cflags=["-O3", "-mavx2", "-mfma", "-fno-trapping-math", "-fno-math-errno", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
)


class ModelNew(nn.Module):
    """Temperature folded into the GEMM, then an in-place fused softmax (C++, OpenMP over rows)."""

    def __init__(self, in_features: int, num_classes: int, temperature: float):
        super().__init__()
        self.linear = nn.Linear(in_features, num_classes)
        self.temperature = temperature

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        inv_t = 1.0 / self.temperature
        w, b = self.linear.weight.detach(), self.linear.bias.detach()
        logits = torch.addmm(b, x, w.t(), beta=inv_t, alpha=inv_t)
        _ext.softmax_rows_(logits)
        return logits
