import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

# The GEMM stays with BLAS (addmm, bias included); the whole elementwise tail -- swish, scale,
# clamp -- is one vectorized C++ pass in place on the GEMM's own output, where the reference
# makes four passes and four (B, out) buffers.
_SOURCE = r"""
#include <ATen/Parallel.h>
#include <cstdint>

// exp(x), float32, vectorizable: x = k*ln2 + r with |r| <= ln2/2, exp(r) from a degree-6
// polynomial (Cephes expf coefficients, about 1 ulp), 2^k written into the exponent bits.
// x is clamped to [-87, 88], inside the normal float range; sigmoid only needs that range.
static inline float exp_clamped(float x) {
    x = x < -87.0f ? -87.0f : x;
    x = x > 88.0f ? 88.0f : x;
    const float kf = x * 1.44269504088896341f;
    const int32_t ki = (int32_t)(kf + (kf >= 0.0f ? 0.5f : -0.5f));  // round to nearest
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

// y <- clamp(y * sigmoid(y) * scale, -limit, limit), in place.
void swish_scale_clamp_(torch::Tensor y, double scale, double limit) {
    TORCH_CHECK(y.scalar_type() == torch::kFloat32 && y.device().is_cpu() && y.is_contiguous(),
                "contiguous float32 CPU tensor expected");
    float* p = y.data_ptr<float>();
    const float s = (float)scale, lim = (float)limit;
    at::parallel_for(0, y.numel(), 1 << 14, [&](int64_t begin, int64_t end) {
        #pragma omp simd
        for (int64_t i = begin; i < end; ++i) {
            const float v = p[i];
            const float sig = 1.0f / (1.0f + exp_clamped(-v));
            float out = v * sig * s;
            out = out < -lim ? -lim : out;
            out = out > lim ? lim : out;
            p[i] = out;
        }
    });
}
"""

# AVX2/FMA (any x86-64 CPU since 2013); -fno-trapping-math lets GCC vectorize loops with float
# selects and -fno-math-errno lets it inline sqrt: neither changes a result.
_ext = load_inline(
    name="cudal1_seed_l2_swish_scale_clamp",
    cpp_sources=_SOURCE,
    functions=["swish_scale_clamp_"],
    extra_cflags=["-O3", "-mavx2", "-mfma", "-fno-trapping-math", "-fno-math-errno", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
)


class ModelNew(nn.Module):
    """GEMM by BLAS, then swish, scale and clamp fused into one in-place C++ pass."""

    def __init__(self, in_features: int, out_features: int, scale: float, limit: float):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.scale = scale
        self.limit = limit

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.addmm(self.linear.bias.detach(), x, self.linear.weight.detach().t())
        _ext.swish_scale_clamp_(y, self.scale, self.limit)
        return y
