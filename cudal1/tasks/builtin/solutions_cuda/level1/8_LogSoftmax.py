"""Row-wise log-softmax as one CUDA kernel: one block per row, an online max/sum pass, then a write pass.

Custom: the whole operation. Pass 1 keeps a running (max, sum of exp) per thread and merges the
pairs across the block with warp shuffles; pass 2 writes (x - max) - log(sum), re-reading the row
(mostly from L2). The reference runs six kernels (max, subtract, exp, sum, log, subtract).
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_CPP = "torch::Tensor log_softmax_rows(torch::Tensor x);"

_CUDA = r"""
#include <c10/cuda/CUDAStream.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAException.h>

// Merge a running (max m, sum s of exp(x - m)) with another pair; -inf marks an empty pair.
__device__ __forceinline__ void merge(float& m, float& s, float m2, float s2) {
  if (m2 == -INFINITY) return;
  if (m == -INFINITY) { m = m2; s = s2; return; }
  float mx = fmaxf(m, m2);
  s = s * expf(m - mx) + s2 * expf(m2 - mx);
  m = mx;
}

__device__ __forceinline__ void push(float& m, float& s, float x) {
  if (x > m) { s = s * expf(m - x) + 1.0f; m = x; }
  else { s += expf(x - m); }
}

// Block-wide merge; every thread returns the row's (max, sum). blockDim.x is a multiple of 32.
__device__ void block_merge(float& m, float& s) {
  __shared__ float sm[32], ss[32];
  for (int o = 16; o > 0; o >>= 1) {
    float m2 = __shfl_xor_sync(0xffffffffu, m, o), s2 = __shfl_xor_sync(0xffffffffu, s, o);
    merge(m, s, m2, s2);
  }
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
  if (lane == 0) { sm[warp] = m; ss[warp] = s; }
  __syncthreads();
  m = lane < nwarps ? sm[lane] : -INFINITY;
  s = lane < nwarps ? ss[lane] : 0.0f;
  for (int o = 16; o > 0; o >>= 1) {
    float m2 = __shfl_xor_sync(0xffffffffu, m, o), s2 = __shfl_xor_sync(0xffffffffu, s, o);
    merge(m, s, m2, s2);
  }
}

template <bool VEC>
__global__ void log_softmax_rows_kernel(const float* __restrict__ x, float* __restrict__ y, long long d) {
  const float* xr = x + blockIdx.x * d;
  float* yr = y + blockIdx.x * d;
  float m = -INFINITY, s = 0.0f;
  if (VEC) {
    const float4* x4 = reinterpret_cast<const float4*>(xr);
    for (long long i = threadIdx.x; i < d / 4; i += blockDim.x) {
      float4 v = x4[i];
      push(m, s, v.x); push(m, s, v.y); push(m, s, v.z); push(m, s, v.w);
    }
  } else {
    for (long long i = threadIdx.x; i < d; i += blockDim.x) push(m, s, xr[i]);
  }
  block_merge(m, s);
  const float lse = logf(s);  // (x - m) - log(s), the reference's order of operations
  if (VEC) {
    const float4* x4 = reinterpret_cast<const float4*>(xr);
    float4* y4 = reinterpret_cast<float4*>(yr);
    for (long long i = threadIdx.x; i < d / 4; i += blockDim.x) {
      float4 v = x4[i];
      y4[i] = make_float4((v.x - m) - lse, (v.y - m) - lse, (v.z - m) - lse, (v.w - m) - lse);
    }
  } else {
    for (long long i = threadIdx.x; i < d; i += blockDim.x) yr[i] = (xr[i] - m) - lse;
  }
}

torch::Tensor log_softmax_rows(torch::Tensor x) {
  TORCH_CHECK(x.is_cuda() && x.is_contiguous(), "x must be a contiguous CUDA tensor");
  TORCH_CHECK(x.scalar_type() == torch::kFloat32 && x.dim() == 2, "float32 (B, D) only");
  const c10::cuda::CUDAGuard guard(x.device());
  auto y = torch::empty_like(x);
  long long rows = x.size(0), d = x.size(1);
  if (rows == 0 || d == 0) return y;
  TORCH_CHECK(rows <= 2147483647LL, "too many rows");
  bool vec = d % 4 == 0 && reinterpret_cast<uintptr_t>(x.data_ptr<float>()) % 16 == 0 &&
             reinterpret_cast<uintptr_t>(y.data_ptr<float>()) % 16 == 0;
  int threads = d >= 8192 ? 1024 : (d >= 1024 ? 256 : 64);
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  if (vec)
    log_softmax_rows_kernel<true><<<(unsigned)rows, threads, 0, stream>>>(x.data_ptr<float>(), y.data_ptr<float>(), d);
  else
    log_softmax_rows_kernel<false><<<(unsigned)rows, threads, 0, stream>>>(x.data_ptr<float>(), y.data_ptr<float>(), d);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return y;
}
"""

_ext = load_inline(
    name="cudal1_l1_8_log_softmax",
    cpp_sources=_CPP,
    cuda_sources=_CUDA,
    functions=["log_softmax_rows"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    """Log-softmax over dim 1. x: (B, D) float32 CUDA -> (B, D) float32."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.log_softmax_rows(x.contiguous())
