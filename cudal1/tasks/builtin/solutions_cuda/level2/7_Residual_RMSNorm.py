"""Residual add + RMSNorm as one CUDA kernel: one block per row.

Custom: the whole chain. Pass 1 forms h = x + residual and sums h^2 with a warp-shuffle block
reduction; pass 2 re-forms h (the row's 16 KB of inputs are still in L1/L2) and writes
h / sqrt(mean + eps) * weight. DRAM traffic: two reads and one write; h never goes to memory.
The reference runs about six kernels and writes h and three other temporaries.
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_CPP = "torch::Tensor residual_rms_norm(torch::Tensor x, torch::Tensor r, torch::Tensor w, double eps);"

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
__global__ void residual_rms_kernel(const float* __restrict__ x, const float* __restrict__ r,
                                    const float* __restrict__ w, float* __restrict__ y, long long d, float eps) {
  const long long off = blockIdx.x * d;
  const float* xr = x + off;
  const float* rr = r + off;
  float* yr = y + off;
  const float4* x4 = reinterpret_cast<const float4*>(xr);
  const float4* r4 = reinterpret_cast<const float4*>(rr);
  long long nv = VEC ? d / 4 : 0;

  float q = 0.0f;
  for (long long i = threadIdx.x; i < nv; i += blockDim.x) {
    float4 a = x4[i], b = r4[i];
    float h0 = a.x + b.x, h1 = a.y + b.y, h2 = a.z + b.z, h3 = a.w + b.w;
    q += (h0 * h0 + h1 * h1) + (h2 * h2 + h3 * h3);
  }
  for (long long i = nv * 4 + threadIdx.x; i < d; i += blockDim.x) { float h = xr[i] + rr[i]; q += h * h; }
  const float rms = sqrtf(block_sum(q) / (float)d + eps);

  const float4* w4 = reinterpret_cast<const float4*>(w);
  float4* y4 = reinterpret_cast<float4*>(yr);
  for (long long i = threadIdx.x; i < nv; i += blockDim.x) {
    float4 a = x4[i], b = r4[i], g = w4[i];
    y4[i] = make_float4((a.x + b.x) / rms * g.x, (a.y + b.y) / rms * g.y,
                        (a.z + b.z) / rms * g.z, (a.w + b.w) / rms * g.w);
  }
  for (long long i = nv * 4 + threadIdx.x; i < d; i += blockDim.x) yr[i] = (xr[i] + rr[i]) / rms * w[i];
}

torch::Tensor residual_rms_norm(torch::Tensor x, torch::Tensor r, torch::Tensor w, double eps) {
  TORCH_CHECK(x.is_cuda() && r.is_cuda() && w.is_cuda(), "CUDA tensors only");
  TORCH_CHECK(x.is_contiguous() && r.is_contiguous() && w.is_contiguous(), "contiguous tensors only");
  TORCH_CHECK(x.scalar_type() == torch::kFloat32 && r.scalar_type() == torch::kFloat32 &&
              w.scalar_type() == torch::kFloat32, "float32 only");
  TORCH_CHECK(x.sizes() == r.sizes(), "x and residual must have the same shape");
  long long d = x.size(-1);
  TORCH_CHECK(w.numel() == d, "weight must have the last dim's size");
  const c10::cuda::CUDAGuard guard(x.device());
  auto y = torch::empty_like(x);
  long long rows = d == 0 ? 0 : x.numel() / d;
  if (rows == 0) return y;
  TORCH_CHECK(rows <= 2147483647LL, "too many rows");
  bool vec = d % 4 == 0;
  for (const auto& t : {x, r, w, y}) vec = vec && reinterpret_cast<uintptr_t>(t.data_ptr<float>()) % 16 == 0;
  int threads = d >= 2048 ? 256 : (d >= 256 ? 128 : 32);
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  if (vec)
    residual_rms_kernel<true><<<(unsigned)rows, threads, 0, stream>>>(
        x.data_ptr<float>(), r.data_ptr<float>(), w.data_ptr<float>(), y.data_ptr<float>(), d, (float)eps);
  else
    residual_rms_kernel<false><<<(unsigned)rows, threads, 0, stream>>>(
        x.data_ptr<float>(), r.data_ptr<float>(), w.data_ptr<float>(), y.data_ptr<float>(), d, (float)eps);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return y;
}
"""

_ext = load_inline(
    name="cudal1_l2_7_residual_rms_norm",
    cpp_sources=_CPP,
    cuda_sources=_CUDA,
    functions=["residual_rms_norm"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    """(x + residual) RMS-normalized over the last dim, times weight. x, residual: (..., D) float32 CUDA."""

    def __init__(self, dim: int, eps: float = 1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        return _ext.residual_rms_norm(x.contiguous(), residual.contiguous(), self.weight.contiguous(), float(self.eps))
