"""LayerNorm over the last dimension as one CUDA kernel: one block per row.

Custom: the whole operation. Three passes over the row inside one block: the mean, the biased
variance from (x - mean)^2 (two-pass, as the reference computes it, not E[x^2] - mean^2), then
(x - mean) * inv_std * weight + bias; the re-reads of the 8 KB row hit L1/L2, so DRAM traffic is one
read and one write. The reference runs about eight kernels.
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_CPP = "torch::Tensor layer_norm_rows(torch::Tensor x, torch::Tensor w, torch::Tensor b, double eps);"

_CUDA = r"""
#include <c10/cuda/CUDAStream.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAException.h>

// Sum over the block; every thread gets the total. blockDim.x is a multiple of 32; `sh` holds 32 floats.
__device__ float block_sum(float v, float* sh) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads();  // the previous call's readers are done with sh
  if (lane == 0) sh[warp] = v;
  __syncthreads();
  v = lane < (int)(blockDim.x >> 5) ? sh[lane] : 0.0f;
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

template <bool VEC>
__global__ void layer_norm_kernel(const float* __restrict__ x, const float* __restrict__ w,
                                  const float* __restrict__ b, float* __restrict__ y, long long d, float eps) {
  __shared__ float sh[32];
  const float* xr = x + blockIdx.x * d;
  float* yr = y + blockIdx.x * d;
  const float4* x4 = reinterpret_cast<const float4*>(xr);
  long long nv = VEC ? d / 4 : 0;

  float s = 0.0f;
  for (long long i = threadIdx.x; i < nv; i += blockDim.x) { float4 v = x4[i]; s += (v.x + v.y) + (v.z + v.w); }
  for (long long i = nv * 4 + threadIdx.x; i < d; i += blockDim.x) s += xr[i];
  const float mean = block_sum(s, sh) / (float)d;

  float q = 0.0f;
  for (long long i = threadIdx.x; i < nv; i += blockDim.x) {
    float4 v = x4[i];
    float a = v.x - mean, c = v.y - mean, e = v.z - mean, f = v.w - mean;
    q += (a * a + c * c) + (e * e + f * f);
  }
  for (long long i = nv * 4 + threadIdx.x; i < d; i += blockDim.x) { float a = xr[i] - mean; q += a * a; }
  const float var = block_sum(q, sh) / (float)d;
  const float inv = 1.0f / sqrtf(var + eps);

  const float4* w4 = reinterpret_cast<const float4*>(w);
  const float4* b4 = reinterpret_cast<const float4*>(b);
  float4* y4 = reinterpret_cast<float4*>(yr);
  for (long long i = threadIdx.x; i < nv; i += blockDim.x) {
    float4 v = x4[i], g = w4[i], h = b4[i];
    y4[i] = make_float4((v.x - mean) * inv * g.x + h.x, (v.y - mean) * inv * g.y + h.y,
                        (v.z - mean) * inv * g.z + h.z, (v.w - mean) * inv * g.w + h.w);
  }
  for (long long i = nv * 4 + threadIdx.x; i < d; i += blockDim.x) yr[i] = (xr[i] - mean) * inv * w[i] + b[i];
}

torch::Tensor layer_norm_rows(torch::Tensor x, torch::Tensor w, torch::Tensor b, double eps) {
  TORCH_CHECK(x.is_cuda() && w.is_cuda() && b.is_cuda(), "CUDA tensors only");
  TORCH_CHECK(x.is_contiguous() && w.is_contiguous() && b.is_contiguous(), "contiguous tensors only");
  TORCH_CHECK(x.scalar_type() == torch::kFloat32 && w.scalar_type() == torch::kFloat32 &&
              b.scalar_type() == torch::kFloat32, "float32 only");
  long long d = x.size(-1);
  TORCH_CHECK(w.numel() == d && b.numel() == d, "weight and bias must have the last dim's size");
  const c10::cuda::CUDAGuard guard(x.device());
  auto y = torch::empty_like(x);
  long long rows = d == 0 ? 0 : x.numel() / d;
  if (rows == 0) return y;
  TORCH_CHECK(rows <= 2147483647LL, "too many rows");
  bool vec = d % 4 == 0;
  for (const auto& t : {x, w, b, y}) vec = vec && reinterpret_cast<uintptr_t>(t.data_ptr<float>()) % 16 == 0;
  int threads = d >= 2048 ? 256 : (d >= 256 ? 128 : 32);
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  if (vec)
    layer_norm_kernel<true><<<(unsigned)rows, threads, 0, stream>>>(
        x.data_ptr<float>(), w.data_ptr<float>(), b.data_ptr<float>(), y.data_ptr<float>(), d, (float)eps);
  else
    layer_norm_kernel<false><<<(unsigned)rows, threads, 0, stream>>>(
        x.data_ptr<float>(), w.data_ptr<float>(), b.data_ptr<float>(), y.data_ptr<float>(), d, (float)eps);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return y;
}
"""

_ext = load_inline(
    name="cudal1_l1_9_layer_norm",
    cpp_sources=_CPP,
    cuda_sources=_CUDA,
    functions=["layer_norm_rows"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    """LayerNorm over the last dim with weight and bias. x: (..., D) float32 CUDA -> same shape."""

    def __init__(self, dim: int, eps: float = 1e-5):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.bias = nn.Parameter(torch.zeros(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.layer_norm_rows(x.contiguous(), self.weight.contiguous(), self.bias.contiguous(), float(self.eps))
