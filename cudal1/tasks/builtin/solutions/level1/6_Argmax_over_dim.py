import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

# x is viewed as (outer, D, inner) around the reduced dim. The reference's reduction walks D with
# stride `inner` for every output separately; here one sweep over D updates a whole row of
# `inner` running (max, index) pairs at once, reading x once, contiguously.
_SOURCE = r"""
#include <ATen/Parallel.h>
#include <cmath>
#include <vector>

torch::Tensor argmax_dim(torch::Tensor x, int64_t dim) {
    TORCH_CHECK(x.scalar_type() == torch::kFloat32 && x.device().is_cpu(), "float32 CPU tensor expected");
    TORCH_CHECK(x.dim() > 0 && x.size(dim) > 0, "argmax of an empty dimension");
    x = x.contiguous();
    dim = dim < 0 ? dim + x.dim() : dim;
    const int64_t D = x.size(dim);
    int64_t outer = 1, inner = 1;
    for (int64_t i = 0; i < dim; ++i) outer *= x.size(i);
    for (int64_t i = dim + 1; i < x.dim(); ++i) inner *= x.size(i);
    std::vector<int64_t> out_shape;
    for (int64_t i = 0; i < x.dim(); ++i) if (i != dim) out_shape.push_back(x.size(i));
    auto out = torch::empty(out_shape, x.options().dtype(torch::kInt64));
    const float* px = x.data_ptr<float>();
    int64_t* po = out.data_ptr<int64_t>();
    constexpr int64_t CHUNK = 512;  // running maxima and indices stay in L1
    const int64_t chunks = (inner + CHUNK - 1) / CHUNK;
    at::parallel_for(0, outer * chunks, 1, [&](int64_t begin, int64_t end) {
        float best[CHUNK];
        int32_t idx[CHUNK];
        for (int64_t task = begin; task < end; ++task) {
            const int64_t o = task / chunks, j0 = (task % chunks) * CHUNK;
            const int64_t n = std::min(CHUNK, inner - j0);
            const float* base = px + o * D * inner + j0;
            for (int64_t j = 0; j < n; ++j) { best[j] = base[j]; idx[j] = 0; }
            for (int64_t d = 1; d < D; ++d) {
                const float* row = base + d * inner;
                for (int64_t j = 0; j < n; ++j) {
                    // NaN counts as the maximum and the first occurrence wins, as in torch.argmax.
                    const bool take = row[j] > best[j] || (std::isnan(row[j]) && !std::isnan(best[j]));
                    best[j] = take ? row[j] : best[j];
                    idx[j] = take ? (int32_t)d : idx[j];
                }
            }
            int64_t* dst = po + o * inner + j0;
            for (int64_t j = 0; j < n; ++j) dst[j] = idx[j];
        }
    });
    return out;
}
"""

# AVX2/FMA (any x86-64 CPU since 2013); -fno-trapping-math lets GCC vectorize loops with float
# selects and -fno-math-errno lets it inline sqrt: neither changes a result.
_ext = load_inline(
    name="cudal1_seed_l1_argmax_dim",
    cpp_sources=_SOURCE,
    functions=["argmax_dim"],
    extra_cflags=["-O3", "-mavx2", "-mfma", "-fno-trapping-math", "-fno-math-errno", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
)


class ModelNew(nn.Module):
    """argmax over one dimension in a single contiguous sweep (C++, OpenMP over rows)."""

    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.argmax_dim(x, self.dim)
