import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

# max_j softmax(l / T)_j = exp(0) / sum_j exp((l_j - max l) / T) = 1 / that sum: no probability
# tensor is needed. The temperature is applied by the GEMM itself (addmm's alpha and beta); one
# C++ pass per row then takes the max and the sum of exps while the row sits in L1.
_SOURCE = r"""
#include <ATen/Parallel.h>
#include <cstdint>
#include <limits>

// exp(x) for x <= 0, vectorizable: x = k*ln2 + r with |r| <= ln2/2, exp(r) from a degree-6
// polynomial (Cephes expf coefficients, about 1 ulp), 2^k written into the exponent bits. Below
// -87 it returns exp(-87), negligible next to the row's largest term exp(0) = 1.
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

// (B, C) logits -> (B,) largest softmax probability per row.
torch::Tensor max_softmax_prob(torch::Tensor logits) {
    TORCH_CHECK(logits.dim() == 2 && logits.scalar_type() == torch::kFloat32 && logits.device().is_cpu(),
                "(B, C) float32 CPU logits expected");
    logits = logits.contiguous();
    const int64_t B = logits.size(0), C = logits.size(1);
    auto out = torch::empty({B}, logits.options());
    const float* px = logits.data_ptr<float>();
    float* po = out.data_ptr<float>();
    at::parallel_for(0, B, 1, [&](int64_t begin, int64_t end) {
        for (int64_t b = begin; b < end; ++b) {
            const float* row = px + b * C;
            float m = -std::numeric_limits<float>::infinity();
            #pragma omp simd reduction(max:m)
            for (int64_t j = 0; j < C; ++j) m = row[j] > m ? row[j] : m;
            float s = 0.f;
            #pragma omp simd reduction(+:s)
            for (int64_t j = 0; j < C; ++j) s += exp_nonpos(row[j] - m);
            po[b] = 1.0f / s;
        }
    });
    return out;
}
"""

# AVX2/FMA (any x86-64 CPU since 2013); -fno-trapping-math lets GCC vectorize loops with float
# selects and -fno-math-errno lets it inline sqrt: neither changes a result.
_ext = load_inline(
    name="cudal1_seed_l2_max_softmax_prob",
    cpp_sources=_SOURCE,
    functions=["max_softmax_prob"],
    extra_cflags=["-O3", "-mavx2", "-mfma", "-fno-trapping-math", "-fno-math-errno", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
)


class ModelNew(nn.Module):
    """Temperature folded into the GEMM, then 1 / sum(exp(l - max l)) per row in one C++ pass."""

    def __init__(self, in_features: int, num_classes: int, temperature: float):
        super().__init__()
        self.linear = nn.Linear(in_features, num_classes)
        self.temperature = temperature

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        inv_t = 1.0 / self.temperature
        w, b = self.linear.weight.detach(), self.linear.bias.detach()
        logits = torch.addmm(b, x, w.t(), beta=inv_t, alpha=inv_t)
        return _ext.max_softmax_prob(logits)
