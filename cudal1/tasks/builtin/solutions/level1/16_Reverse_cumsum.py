import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

# A suffix scan straight from the end of each row: no flipped copies. The running sum is kept
# in double, as torch's CPU cumsum does for float32, so the result matches it bit for bit.
_SOURCE = r"""
#include <ATen/Parallel.h>
#include <vector>

torch::Tensor reverse_cumsum(torch::Tensor x, int64_t dim) {
    TORCH_CHECK(x.scalar_type() == torch::kFloat32 && x.device().is_cpu(), "float32 CPU tensor expected");
    x = x.contiguous();
    dim = dim < 0 ? dim + x.dim() : dim;
    const int64_t L = x.size(dim);
    int64_t outer = 1, inner = 1;
    for (int64_t i = 0; i < dim; ++i) outer *= x.size(i);
    for (int64_t i = dim + 1; i < x.dim(); ++i) inner *= x.size(i);
    auto out = torch::empty_like(x);
    const float* px = x.data_ptr<float>();
    float* po = out.data_ptr<float>();
    at::parallel_for(0, outer, 1, [&](int64_t begin, int64_t end) {
        std::vector<double> acc(inner);
        for (int64_t o = begin; o < end; ++o) {
            const float* src = px + o * L * inner;
            float* dst = po + o * L * inner;
            if (inner == 1) {
                double s = 0.0;
                for (int64_t i = L - 1; i >= 0; --i) { s += src[i]; dst[i] = (float)s; }
            } else {
                std::fill(acc.begin(), acc.end(), 0.0);
                for (int64_t i = L - 1; i >= 0; --i)
                    for (int64_t j = 0; j < inner; ++j) {
                        acc[j] += src[i * inner + j];
                        dst[i * inner + j] = (float)acc[j];
                    }
            }
        }
    });
    return out;
}
"""

# AVX2/FMA (any x86-64 CPU since 2013); -fno-trapping-math lets GCC vectorize loops with float
# selects and -fno-math-errno lets it inline sqrt: neither changes a result.
_ext = load_inline(
    name="cudal1_seed_l1_reverse_cumsum",
    cpp_sources=_SOURCE,
    functions=["reverse_cumsum"],
    extra_cflags=["-O3", "-mavx2", "-mfma", "-fno-trapping-math", "-fno-math-errno", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
)


class ModelNew(nn.Module):
    """Reverse cumulative sum in one C++ pass (OpenMP over rows), without the two flips."""

    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.reverse_cumsum(x, self.dim)
