"""Linear layer then a sum over its outputs, without the GEMM: sum_j (x·W_j + b_j) = x·(Σ_j W_j) + Σ_j b_j.

Custom: all of it, in four small CUDA kernels: split column sums of W (coalesced over the input
features, partials per slice of rows), the slice reduction, the bias sum, and a warp-per-row GEMV of
x with the summed weights. O(B·in + out·in) work instead of the reference's O(B·in·out) GEMM. The
summed weights are recomputed on every call (nothing is cached).
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_CPP = "torch::Tensor linear_row_sum(torch::Tensor x, torch::Tensor w, torch::Tensor b);"

_CUDA = r"""
#include <c10/cuda/CUDAStream.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAException.h>

// partial[s, k] = sum of w[j, k] over rows j of slice s (rows_per_slice rows each). w is (out, in).
__global__ void col_sum_partials(const float* __restrict__ w, float* __restrict__ partial, int out_f, int in_f,
                                 int rows_per_slice) {
  int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k >= in_f) return;
  int j0 = blockIdx.y * rows_per_slice, j1 = min(out_f, j0 + rows_per_slice);
  float acc = 0.0f;
  for (int j = j0; j < j1; ++j) acc += w[(long long)j * in_f + k];
  partial[(long long)blockIdx.y * in_f + k] = acc;
}

__global__ void sum_slices(const float* __restrict__ partial, float* __restrict__ wsum, int in_f, int slices) {
  int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k >= in_f) return;
  float acc = 0.0f;
  for (int s = 0; s < slices; ++s) acc += partial[(long long)s * in_f + k];
  wsum[k] = acc;
}

// One block: bsum[0] = sum of b. blockDim.x is a multiple of 32.
__global__ void vector_sum(const float* __restrict__ b, int n, float* __restrict__ out) {
  __shared__ float sh[32];
  float v = 0.0f;
  for (int i = threadIdx.x; i < n; i += blockDim.x) v += b[i];
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  if ((threadIdx.x & 31) == 0) sh[threadIdx.x >> 5] = v;
  __syncthreads();
  if (threadIdx.x == 0) {
    float s = 0.0f;
    for (int i = 0; i < (int)(blockDim.x >> 5); ++i) s += sh[i];
    out[0] = s;
  }
}

// y[r] = x[r, :] · wsum + bsum; one warp per row, float4 loads when the row length allows.
__global__ void row_dot(const float* __restrict__ x, const float* __restrict__ wsum, const float* __restrict__ bsum,
                        float* __restrict__ y, long long rows, int in_f, bool vec) {
  const int lane = threadIdx.x & 31;
  const long long warps = (long long)gridDim.x * (blockDim.x >> 5);
  for (long long r = blockIdx.x * (long long)(blockDim.x >> 5) + (threadIdx.x >> 5); r < rows; r += warps) {
    const float* xr = x + r * in_f;
    float acc = 0.0f;
    if (vec) {
      const float4* x4 = reinterpret_cast<const float4*>(xr);
      const float4* w4 = reinterpret_cast<const float4*>(wsum);
      for (int i = lane; i < in_f / 4; i += 32) {
        float4 a = x4[i], c = w4[i];
        acc += (a.x * c.x + a.y * c.y) + (a.z * c.z + a.w * c.w);
      }
    } else {
      for (int i = lane; i < in_f; i += 32) acc += xr[i] * wsum[i];
    }
    for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
    if (lane == 0) y[r] = acc + bsum[0];
  }
}

torch::Tensor linear_row_sum(torch::Tensor x, torch::Tensor w, torch::Tensor b) {
  TORCH_CHECK(x.is_cuda() && w.is_cuda() && b.is_cuda(), "CUDA tensors only");
  TORCH_CHECK(x.is_contiguous() && w.is_contiguous() && b.is_contiguous(), "contiguous tensors only");
  TORCH_CHECK(x.scalar_type() == torch::kFloat32 && w.scalar_type() == torch::kFloat32 &&
              b.scalar_type() == torch::kFloat32, "float32 only");
  TORCH_CHECK(x.dim() == 2 && w.dim() == 2 && x.size(1) == w.size(1) && b.numel() == w.size(0),
              "x (B, in), weight (out, in), bias (out,)");
  TORCH_CHECK(w.size(0) < (1LL << 31) && w.size(1) < (1LL << 31), "dims must fit in int");
  const c10::cuda::CUDAGuard guard(x.device());
  const long long rows = x.size(0);
  const int in_f = (int)x.size(1), out_f = (int)w.size(0);
  auto y = torch::empty({rows, 1}, x.options());
  if (rows == 0) return y;
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  auto wsum = torch::zeros({std::max(in_f, 1)}, x.options());
  auto bsum = torch::empty({1}, x.options());
  if (in_f > 0 && out_f > 0) {
    const int col_blocks = (in_f + 255) / 256;
    const int slices = std::max(1, std::min(out_f, 1024 / col_blocks));  // ~1024 blocks in all
    const int rows_per_slice = (out_f + slices - 1) / slices;
    auto partial = torch::empty({slices, in_f}, x.options());
    col_sum_partials<<<dim3(col_blocks, slices), 256, 0, stream>>>(w.data_ptr<float>(), partial.data_ptr<float>(),
                                                                   out_f, in_f, rows_per_slice);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    sum_slices<<<col_blocks, 256, 0, stream>>>(partial.data_ptr<float>(), wsum.data_ptr<float>(), in_f, slices);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  }
  vector_sum<<<1, 1024, 0, stream>>>(b.data_ptr<float>(), out_f, bsum.data_ptr<float>());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  bool vec = in_f % 4 == 0 && reinterpret_cast<uintptr_t>(x.data_ptr<float>()) % 16 == 0;
  int blocks = (int)std::min<long long>((rows + 7) / 8, 65536);
  row_dot<<<blocks, 256, 0, stream>>>(x.data_ptr<float>(), wsum.data_ptr<float>(), bsum.data_ptr<float>(),
                                      y.data_ptr<float>(), rows, in_f, vec);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return y;
}
"""

_ext = load_inline(
    name="cudal1_l2_1_gemm_sum",
    cpp_sources=_CPP,
    cuda_sources=_CUDA,
    functions=["linear_row_sum"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    """linear(x).sum(dim=1, keepdim=True). x: (B, in) float32 CUDA -> (B, 1) float32."""

    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.linear_row_sum(x.contiguous(), self.linear.weight.contiguous(), self.linear.bias.contiguous())
