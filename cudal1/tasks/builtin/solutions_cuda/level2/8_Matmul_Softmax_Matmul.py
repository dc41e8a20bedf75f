"""softmax(Q Kᵀ / sqrt(d)) V: cuBLAS batched GEMMs around one fused CUDA scale+softmax kernel.

Custom: the scale and the softmax in one kernel: one block per score row keeps a running
(max, sum of exp) of the scaled scores in a single pass, merges the pairs with warp shuffles, and
writes the probabilities over the score buffer in place (a buffer this function allocated, never an
input). Not custom: the two batched GEMMs, at::matmul (cuBLAS, fp32). The reference writes the
scores, divides them (read + write), then runs its softmax into a new buffer.
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_CPP = "torch::Tensor attention(torch::Tensor q, torch::Tensor k, torch::Tensor v);"

_CUDA = r"""
#include <c10/cuda/CUDAStream.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAException.h>
#include <cmath>

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

// Each row of p (length n) becomes softmax(row * scale), in place.
template <bool VEC>
__global__ void scaled_softmax_rows(float* __restrict__ p, long long n, float scale) {
  float* pr = p + blockIdx.x * n;
  float4* p4 = reinterpret_cast<float4*>(pr);
  const long long nv = VEC ? n / 4 : 0;
  float m = -INFINITY, s = 0.0f;
  for (long long i = threadIdx.x; i < nv; i += blockDim.x) {
    float4 v = p4[i];
    push(m, s, v.x * scale); push(m, s, v.y * scale); push(m, s, v.z * scale); push(m, s, v.w * scale);
  }
  for (long long i = nv * 4 + threadIdx.x; i < n; i += blockDim.x) push(m, s, pr[i] * scale);
  block_merge(m, s);
  for (long long i = threadIdx.x; i < nv; i += blockDim.x) {
    float4 v = p4[i];
    p4[i] = make_float4(expf(v.x * scale - m) / s, expf(v.y * scale - m) / s,
                        expf(v.z * scale - m) / s, expf(v.w * scale - m) / s);
  }
  for (long long i = nv * 4 + threadIdx.x; i < n; i += blockDim.x) pr[i] = expf(pr[i] * scale - m) / s;
}

torch::Tensor attention(torch::Tensor q, torch::Tensor k, torch::Tensor v) {
  TORCH_CHECK(q.is_cuda() && k.is_cuda() && v.is_cuda(), "CUDA tensors only");
  TORCH_CHECK(q.is_contiguous() && k.is_contiguous() && v.is_contiguous(), "contiguous tensors only");
  TORCH_CHECK(q.scalar_type() == torch::kFloat32 && k.scalar_type() == torch::kFloat32 &&
              v.scalar_type() == torch::kFloat32, "float32 only");
  TORCH_CHECK(q.dim() >= 2 && k.dim() == q.dim() && v.dim() == q.dim(), "q, k, v must have the same rank");
  const c10::cuda::CUDAGuard guard(q.device());
  auto scores = at::matmul(q, k.transpose(-2, -1)).contiguous();  // cuBLAS; a fresh buffer owned here
  const long long n = scores.size(-1);
  const long long rows = n == 0 ? 0 : scores.numel() / n;
  if (rows > 0) {
    TORCH_CHECK(rows <= 2147483647LL, "too many rows");
    // the reference divides by sqrt(d) as a Python float; PyTorch multiplies by the float reciprocal
    const float scale = 1.0f / (float)std::sqrt((double)q.size(-1));
    bool vec = n % 4 == 0 && reinterpret_cast<uintptr_t>(scores.data_ptr<float>()) % 16 == 0;
    int threads = n >= 8192 ? 1024 : (n >= 1024 ? 256 : 64);
    cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
    if (vec)
      scaled_softmax_rows<true><<<(unsigned)rows, threads, 0, stream>>>(scores.data_ptr<float>(), n, scale);
    else
      scaled_softmax_rows<false><<<(unsigned)rows, threads, 0, stream>>>(scores.data_ptr<float>(), n, scale);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  }
  return at::matmul(scores, v);  // cuBLAS
}
"""

_ext = load_inline(
    name="cudal1_l2_8_attention",
    cpp_sources=_CPP,
    cuda_sources=_CUDA,
    functions=["attention"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    """Attention over (B, H, S, d) float32 CUDA tensors -> (B, H, S, d) float32."""

    def __init__(self):
        super().__init__()

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return _ext.attention(q.contiguous(), k.contiguous(), v.contiguous())
