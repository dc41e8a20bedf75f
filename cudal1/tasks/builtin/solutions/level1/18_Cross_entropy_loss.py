import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

# Per row: loss = logsumexp(logits) - logits[target]. The reference materialises the full (B, C)
# log-softmax to read one entry per row; here each row is reduced in cache (a max pass and an
# exp-sum pass over the same 4·C bytes, both vectorized) and only B losses are kept.
_SOURCE = r"""
#include <ATen/Parallel.h>
#include <cmath>
#include <cstdint>
#include <limits>

// exp(x) for x <= 0 in a form the compiler vectorizes: x = k*ln2 + r with |r| <= ln2/2,
// exp(r) from a degree-6 polynomial (Cephes expf coefficients, about 1 ulp), 2^k put into the
// exponent bits. Inputs below -87 (where expf underflows to subnormals) return exp(-87), which
// is negligible next to the row's largest term exp(0) = 1.
static inline float exp_nonpos(float x) {
    x = x < -87.0f ? -87.0f : x;
    // x <= 0, so truncating (x*log2(e) - 1/2) toward zero rounds x*log2(e) to nearest
    const int32_t ki = (int32_t)(x * 1.44269504088896341f - 0.5f);
    const float k = (float)ki;
    float r = x - k * 0.693359375f;
    r = r + k * 2.12194440e-4f;
    const float r2 = r * r;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    const float e = p * r2 + r + 1.0f;
    const int32_t bits = (ki + 127) << 23;
    return e * __builtin_bit_cast(float, bits);
}

torch::Tensor cross_entropy_mean(torch::Tensor logits, torch::Tensor targets) {
    TORCH_CHECK(logits.dim() == 2 && logits.scalar_type() == torch::kFloat32 && logits.device().is_cpu(),
                "(B, C) float32 CPU logits expected");
    TORCH_CHECK(targets.dim() == 1 && targets.scalar_type() == torch::kInt64 &&
                targets.size(0) == logits.size(0),
                "(B,) int64 targets expected");
    logits = logits.contiguous();
    targets = targets.contiguous();
    const int64_t B = logits.size(0), C = logits.size(1);
    const float* px = logits.data_ptr<float>();
    const int64_t* pt = targets.data_ptr<int64_t>();
    for (int64_t i = 0; i < B; ++i) TORCH_CHECK(pt[i] >= 0 && pt[i] < C, "target out of range");
    auto losses = torch::empty({B}, logits.options().dtype(torch::kFloat64));
    double* pl = losses.data_ptr<double>();
    at::parallel_for(0, B, 1, [&](int64_t begin, int64_t end) {
        for (int64_t b = begin; b < end; ++b) {
            const float* row = px + b * C;
            float m = -std::numeric_limits<float>::infinity();
            #pragma omp simd reduction(max:m)
            for (int64_t j = 0; j < C; ++j) m = row[j] > m ? row[j] : m;
            float s = 0.f;
            #pragma omp simd reduction(+:s)
            for (int64_t j = 0; j < C; ++j) s += exp_nonpos(row[j] - m);
            pl[b] = (double)m + std::log((double)s) - (double)row[pt[b]];
        }
    });
    return losses.mean().to(torch::kFloat32);
}
"""

# AVX2/FMA (any x86-64 CPU since 2013); -fno-trapping-math lets GCC vectorize loops with float
# selects and -fno-math-errno lets it inline sqrt: neither changes a result.
_ext = load_inline(
    name="cudal1_seed_l1_cross_entropy",
    cpp_sources=_SOURCE,
    functions=["cross_entropy_mean"],
    extra_cflags=["-O3", "-mavx2", "-mfma", "-fno-trapping-math", "-fno-math-errno", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
)


class ModelNew(nn.Module):
    """Mean cross-entropy without materialising the (B, C) log-softmax (C++, OpenMP over rows)."""

    def __init__(self):
        super().__init__()

    def forward(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return _ext.cross_entropy_mean(logits, targets)
