import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

# The reference writes the whole (B, 2·out) GEMM result to memory, then reads it back twice
# (sigmoid, multiply) and allocates two more (B, out) buffers. Here the rows are split into
# blocks whose GEMM result stays in cache; in one parallel region each thread runs,
# per block, a single-threaded BLAS GEMM into a small scratch buffer and torch's GLU kernel from
# that buffer straight into the block's rows of the output. Only x and the output touch memory.
_SOURCE = r"""
#include <ATen/Parallel.h>

torch::Tensor linear_glu_blocked(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, int64_t block) {
    TORCH_CHECK(x.dim() == 2 && x.scalar_type() == torch::kFloat32 && x.device().is_cpu(),
                "(B, in) float32 CPU input expected");
    TORCH_CHECK(weight.size(0) % 2 == 0 && block > 0, "even number of output features expected");
    x = x.contiguous();
    const int64_t B = x.size(0), half = weight.size(0) / 2;
    auto out = torch::empty({B, half}, x.options());
    auto wt = weight.t();
    const int64_t blocks = (B + block - 1) / block;
    at::parallel_for(0, blocks, 1, [&](int64_t begin, int64_t end) {
        for (int64_t b = begin; b < end; ++b) {
            const int64_t start = b * block, n = std::min(block, B - start);
            // nested at:: ops run single-threaded inside the parallel region
            auto y = at::addmm(bias, x.narrow(0, start, n), wt);
            auto dst = out.narrow(0, start, n);
            at::glu_out(dst, y, -1);
        }
    });
    return out;
}
"""

_ext = load_inline(
    name="cudal1_seed_l2_linear_glu_blocked",
    cpp_sources=_SOURCE,
    functions=["linear_glu_blocked"],
    extra_cflags=["-O3", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
)

# Rows per block: 128 rows × 2·out floats (out = 2048) is 2 MiB of GEMM result (L2 + L3).
_BLOCK = 128


class ModelNew(nn.Module):
    """Linear + GLU over cache-sized row blocks, one parallel region (C++ driver around BLAS and
    torch's GLU kernel)."""

    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, 2 * out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.linear_glu_blocked(x, self.linear.weight.detach(), self.linear.bias.detach(), _BLOCK)
