import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

# Direct depthwise convolution, one (n, c) plane per task: each output row is computed in one
# vectorized sweep with the k×k taps held in registers, reading k input rows that stay in L1, so
# the input is read from memory once and the output written once.
_SOURCE = r"""
#include <ATen/Parallel.h>
#include <vector>

// One output row of one plane. rows[ki] is input row h + ki - P, or a row of zeros where that
// falls outside the image (zero padding). Interior columns take all K×K taps from registers in
// one vectorized sweep; the P columns at each edge check their column bounds.
template <int K>
static void conv_row(const float* const* rows, const float* __restrict w, float b,
                     float* __restrict out, int64_t W) {
    constexpr int P = K / 2;
    auto edge = [&](int64_t j) {
        float acc = b;
        for (int ki = 0; ki < K; ++ki)
            for (int kj = 0; kj < K; ++kj) {
                const int64_t jj = j + kj - P;
                if (jj >= 0 && jj < W) acc += w[ki * K + kj] * rows[ki][jj];
            }
        out[j] = acc;
    };
    const int64_t lo = std::min<int64_t>(P, W), hi = std::max<int64_t>(W - P, lo);
    for (int64_t j = 0; j < lo; ++j) edge(j);
    float wk[K * K];
    for (int i = 0; i < K * K; ++i) wk[i] = w[i];
    #pragma omp simd
    for (int64_t j = lo; j < hi; ++j) {
        float acc = b;
        for (int ki = 0; ki < K; ++ki)
            for (int kj = 0; kj < K; ++kj) acc += wk[ki * K + kj] * rows[ki][j + kj - P];
        out[j] = acc;
    }
    for (int64_t j = hi; j < W; ++j) edge(j);
}

torch::Tensor depthwise_conv2d(torch::Tensor x, torch::Tensor weight, torch::Tensor bias) {
    TORCH_CHECK(x.dim() == 4 && x.scalar_type() == torch::kFloat32 && x.device().is_cpu(),
                "float32 CPU NCHW input expected");
    x = x.contiguous();
    weight = weight.contiguous();
    const int64_t N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
    const int64_t K = weight.size(2), P = K / 2;
    TORCH_CHECK(weight.size(0) == C && weight.size(3) == K && (K == 3 || K == 5),
                "3×3 or 5×5 depthwise kernel expected");
    auto out = torch::empty_like(x);
    const float* px = x.data_ptr<float>();
    const float* pw = weight.data_ptr<float>();
    const float* pb = bias.defined() ? bias.contiguous().data_ptr<float>() : nullptr;
    float* po = out.data_ptr<float>();
    at::parallel_for(0, N * C, 1, [&](int64_t begin, int64_t end) {
        const std::vector<float> zeros(W, 0.f);
        const float* rows[5];
        for (int64_t plane = begin; plane < end; ++plane) {
            const int64_t c = plane % C;
            const float* in = px + plane * H * W;
            const float* w = pw + c * K * K;
            const float b = pb ? pb[c] : 0.f;
            for (int64_t h = 0; h < H; ++h) {
                for (int64_t ki = 0; ki < K; ++ki) {
                    const int64_t hi = h + ki - P;
                    rows[ki] = (hi >= 0 && hi < H) ? in + hi * W : zeros.data();
                }
                float* orow = po + plane * H * W + h * W;
                if (K == 3) conv_row<3>(rows, w, b, orow, W);
                else conv_row<5>(rows, w, b, orow, W);
            }
        }
    });
    return out;
}
"""

# AVX2/FMA (any x86-64 CPU since 2013); -fno-trapping-math lets GCC vectorize loops with float
# selects and -fno-math-errno lets it inline sqrt: neither changes a result.
_ext = load_inline(
    name="cudal1_seed_l1_depthwise_conv2d",
    cpp_sources=_SOURCE,
    functions=["depthwise_conv2d"],
    extra_cflags=["-O3", "-mavx2", "-mfma", "-fno-trapping-math", "-fno-math-errno", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
)


class ModelNew(nn.Module):
    """Depthwise k×k convolution (stride 1, same padding) as a direct C++ loop nest.

    Holds the same nn.Conv2d as the reference so that equal seeds give equal weights.
    """

    def __init__(self, channels: int, kernel_size: int = 3):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, kernel_size, padding=kernel_size // 2, groups=channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.depthwise_conv2d(x, self.conv.weight.detach(), self.conv.bias.detach())
