"""Linear layer, subtract the row mean, GELU: cuBLAS GEMM plus one fused CUDA row epilogue.

Custom: everything after the GEMM, in one kernel: one block per row adds the bias, reduces the row
mean with warp shuffles, and writes GELU(y + b - mean) (exact erf form, as nn.GELU()) over the GEMM
output in place (a buffer this function allocated, never an input). Not custom: the GEMM itself,
x @ Wᵀ through at::mm (cuBLAS, fp32). The reference runs the GEMM then three more kernels over the
full output (mean, subtract, GELU).
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_CPP = "torch::Tensor linear_center_gelu(torch::Tensor x, torch::Tensor w, torch::Tensor b);"

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

__device__ __forceinline__ float gelu(float v) { return 0.5f * v * (1.0f + erff(v * 0.7071067811865476f)); }

// y (rows, n) holds x @ W^T; rewrite each row as gelu(y + b - mean(y + b)).
template <bool VEC>
__global__ void center_gelu_rows(float* __restrict__ y, const float* __restrict__ b, long long n) {
  float* yr = y + blockIdx.x * n;
  float4* y4 = reinterpret_cast<float4*>(yr);
  const float4* b4 = reinterpret_cast<const float4*>(b);
  const long long nv = VEC ? n / 4 : 0;
  float s = 0.0f;
  for (long long i = threadIdx.x; i < nv; i += blockDim.x) {
    float4 v = y4[i], c = b4[i];
    s += ((v.x + c.x) + (v.y + c.y)) + ((v.z + c.z) + (v.w + c.w));
  }
  for (long long i = nv * 4 + threadIdx.x; i < n; i += blockDim.x) s += yr[i] + b[i];
  const float mean = block_sum(s) / (float)n;
  for (long long i = threadIdx.x; i < nv; i += blockDim.x) {
    float4 v = y4[i], c = b4[i];
    y4[i] = make_float4(gelu((v.x + c.x) - mean), gelu((v.y + c.y) - mean),
                        gelu((v.z + c.z) - mean), gelu((v.w + c.w) - mean));
  }
  for (long long i = nv * 4 + threadIdx.x; i < n; i += blockDim.x) yr[i] = gelu((yr[i] + b[i]) - mean);
}

torch::Tensor linear_center_gelu(torch::Tensor x, torch::Tensor w, torch::Tensor b) {
  TORCH_CHECK(x.is_cuda() && w.is_cuda() && b.is_cuda(), "CUDA tensors only");
  TORCH_CHECK(x.is_contiguous() && w.is_contiguous() && b.is_contiguous(), "contiguous tensors only");
  TORCH_CHECK(x.scalar_type() == torch::kFloat32 && w.scalar_type() == torch::kFloat32 &&
              b.scalar_type() == torch::kFloat32, "float32 only");
  TORCH_CHECK(x.dim() == 2 && w.dim() == 2 && x.size(1) == w.size(1) && b.numel() == w.size(0),
              "x (B, in), weight (out, in), bias (out,)");
  const c10::cuda::CUDAGuard guard(x.device());
  auto y = at::mm(x, w.t());  // cuBLAS on the current stream; a fresh buffer owned here
  const long long rows = y.size(0), n = y.size(1);
  if (rows == 0 || n == 0) return y;
  TORCH_CHECK(rows <= 2147483647LL, "too many rows");
  bool vec = n % 4 == 0 && reinterpret_cast<uintptr_t>(y.data_ptr<float>()) % 16 == 0 &&
             reinterpret_cast<uintptr_t>(b.data_ptr<float>()) % 16 == 0;
  int threads = n >= 2048 ? 256 : (n >= 256 ? 128 : 32);
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  if (vec)
    center_gelu_rows<true><<<(unsigned)rows, threads, 0, stream>>>(y.data_ptr<float>(), b.data_ptr<float>(), n);
  else
    center_gelu_rows<false><<<(unsigned)rows, threads, 0, stream>>>(y.data_ptr<float>(), b.data_ptr<float>(), n);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return y;
}
"""

_ext = load_inline(
    name="cudal1_l2_10_gemm_center_gelu",
    cpp_sources=_CPP,
    cuda_sources=_CUDA,
    functions=["linear_center_gelu"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    """GELU(linear(x) - row mean). x: (B, in) float32 CUDA -> (B, out) float32."""

    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.gelu = nn.GELU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.linear_center_gelu(x.contiguous(), self.linear.weight.contiguous(), self.linear.bias.contiguous())
