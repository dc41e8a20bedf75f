import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

# Centering is linear: y - mean_j(y) = x (W - mean_j W)^T + (b - mean_j b). The centred weights
# are formed once per call (out×in, small), so the GEMM's output is already centred and the
# reference's mean reduction and subtract passes over (B, out) disappear. The rest runs over row
# blocks in one parallel region: per block, a single-threaded BLAS GEMM writes the block's rows
# of the output and GELU (torch's kernel, in place) follows while they are still in cache.
_SOURCE = r"""
#include <ATen/Parallel.h>

torch::Tensor linear_gelu_blocked(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, int64_t block) {
    TORCH_CHECK(x.dim() == 2 && x.scalar_type() == torch::kFloat32 && x.device().is_cpu(),
                "(B, in) float32 CPU input expected");
    TORCH_CHECK(block > 0, "block must be positive");
    x = x.contiguous();
    const int64_t B = x.size(0);
    auto out = torch::empty({B, weight.size(0)}, x.options());
    auto wt = weight.t();
    const int64_t blocks = (B + block - 1) / block;
    at::parallel_for(0, blocks, 1, [&](int64_t begin, int64_t end) {
        for (int64_t b = begin; b < end; ++b) {
            const int64_t start = b * block, n = std::min(block, B - start);
            auto dst = out.narrow(0, start, n);
            // nested at:: ops run single-threaded inside the parallel region
            at::addmm_out(dst, bias, x.narrow(0, start, n), wt);
            at::gelu_(dst);
        }
    });
    return out;
}
"""

_ext = load_inline(
    name="cudal1_seed_l2_linear_gelu_blocked",
    cpp_sources=_SOURCE,
    functions=["linear_gelu_blocked"],
    extra_cflags=["-O3", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
)

# Rows per block: 64 rows × 2048 output features is 512 KiB.
_BLOCK = 64


class ModelNew(nn.Module):
    """Mean subtraction folded into the weights; GEMM + GELU over cache-sized row blocks."""

    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.gelu = nn.GELU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        w, b = self.linear.weight.detach(), self.linear.bias.detach()
        return _ext.linear_gelu_blocked(x, w - w.mean(dim=0, keepdim=True), b - b.mean(), _BLOCK)
