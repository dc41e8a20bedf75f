"""RMSNorm over the last dimension as one CUDA kernel: one block per row.

Custom: the whole operation. Pass 1 sums x^2 over the row with a warp-shuffle block reduction;
pass 2 writes x * rsqrt(mean + eps) * weight, re-reading the 8 KB row from L1/L2, so DRAM traffic is
one read and one write. The reference runs five kernels (pow, mean, add+rsqrt, two multiplies).
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_CPP = "torch::Tensor rms_norm_rows(torch::Tensor x, torch::Tensor w, double eps);"

_CUDA = r"""
#include <c10/cuda/CUDAStream.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAException.h>

// Sum over the block; every thread gets the total. blockDim.x is a multiple of 32.
__device__ float block_sum(float v) {
  __shared__ float sh[32];
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) sh[warp] = v;
  __syncthreads();
  v = lane < (int)(blockDim.x >> 5) ? sh[lane] : 0.0f;
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

template <bool VEC>
__global__ void rms_norm_kernel(const float* __restrict__ x, const float* __restrict__ w,
                                float* __restrict__ y, long long d, float eps) {
  const float* xr = x + blockIdx.x * d;
  float* yr = y + blockIdx.x * d;
  const float4* x4 = reinterpret_cast<const float4*>(xr);
  long long nv = VEC ? d / 4 : 0;

  float q = 0.0f;
  for (long long i = threadIdx.x; i < nv; i += blockDim.x) {
    float4 v = x4[i];
    q += (v.x * v.x + v.y * v.y) + (v.z * v.z + v.w * v.w);
  }
  for (long long i = nv * 4 + threadIdx.x; i < d; i += blockDim.x) q += xr[i] * xr[i];
  const float r = 1.0f / sqrtf(block_sum(q) / (float)d + eps);

  const float4* w4 = reinterpret_cast<const float4*>(w);
  float4* y4 = reinterpret_cast<float4*>(yr);
  for (long long i = threadIdx.x; i < nv; i += blockDim.x) {
    float4 v = x4[i], g = w4[i];
    y4[i] = make_float4(v.x * r * g.x, v.y * r * g.y, v.z * r * g.z, v.w * r * g.w);
  }
  for (long long i = nv * 4 + threadIdx.x; i < d; i += blockDim.x) yr[i] = xr[i] * r * w[i];
}

torch::Tensor rms_norm_rows(torch::Tensor x, torch::Tensor w, double eps) {
  TORCH_CHECK(x.is_cuda() && w.is_cuda(), "CUDA tensors only");
  TORCH_CHECK(x.is_contiguous() && w.is_contiguous(), "contiguous tensors only");
  TORCH_CHECK(x.scalar_type() == torch::kFloat32 && w.scalar_type() == torch::kFloat32, "float32 only");
  long long d = x.size(-1);
  TORCH_CHECK(w.numel() == d, "weight must have the last dim's size");
  const c10::cuda::CUDAGuard guard(x.device());
  auto y = torch::empty_like(x);
  long long rows = d == 0 ? 0 : x.numel() / d;
  if (rows == 0) return y;
  TORCH_CHECK(rows <= 2147483647LL, "too many rows");
  bool vec = d % 4 == 0;
  for (const auto& t : {x, w, y}) vec = vec && reinterpret_cast<uintptr_t>(t.data_ptr<float>()) % 16 == 0;
  int threads = d >= 2048 ? 256 : (d >= 256 ? 128 : 32);
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  if (vec)
    rms_norm_kernel<true><<<(unsigned)rows, threads, 0, stream>>>(
        x.data_ptr<float>(), w.data_ptr<float>(), y.data_ptr<float>(), d, (float)eps);
  else
    rms_norm_kernel<false><<<(unsigned)rows, threads, 0, stream>>>(
        x.data_ptr<float>(), w.data_ptr<float>(), y.data_ptr<float>(), d, (float)eps);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return y;
}
"""

_ext = load_inline(
    name="cudal1_l1_10_rms_norm",
    cpp_sources=_CPP,
    cuda_sources=_CUDA,
    functions=["rms_norm_rows"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    """RMSNorm over the last dim with a learned scale. x: (..., D) float32 CUDA -> same shape."""

    def __init__(self, dim: int, eps: float = 1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.rms_norm_rows(x.contiguous(), self.weight.contiguous(), float(self.eps))
