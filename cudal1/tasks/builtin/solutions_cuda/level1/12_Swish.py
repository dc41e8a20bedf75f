"""Swish (SiLU), x * sigmoid(x), as one fused CUDA kernel.

Custom: the whole activation in one CUDA kernel (sigmoid and product per element), float4 loads and
stores with a scalar tail; the reference runs two separate elementwise kernels, each a full pass
over memory.
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_CPP = "torch::Tensor swish(torch::Tensor x);"

_CUDA = r"""
#include <c10/cuda/CUDAStream.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAException.h>

__device__ __forceinline__ float act(float x) {
  // x / (1 + e^-x): for very negative x, e^-x overflows to inf and the result is -0, as in the reference
  return x / (1.0f + expf(-x));
}

// Grid-stride over float4 chunks, then the (< 4 element) tail, or everything scalar when unaligned.
__global__ void act_kernel(const float* __restrict__ x, float* __restrict__ y, long long n, bool vec) {
  long long tid = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  long long stride = (long long)gridDim.x * blockDim.x;
  long long n4 = vec ? n / 4 : 0;
  const float4* x4 = reinterpret_cast<const float4*>(x);
  float4* y4 = reinterpret_cast<float4*>(y);
  for (long long i = tid; i < n4; i += stride) {
    float4 v = x4[i];
    v.x = act(v.x);
    v.y = act(v.y);
    v.z = act(v.z);
    v.w = act(v.w);
    y4[i] = v;
  }
  for (long long i = n4 * 4 + tid; i < n; i += stride) y[i] = act(x[i]);
}

torch::Tensor swish(torch::Tensor x) {
  TORCH_CHECK(x.is_cuda() && x.is_contiguous(), "x must be a contiguous CUDA tensor");
  TORCH_CHECK(x.scalar_type() == torch::kFloat32, "float32 only");
  const c10::cuda::CUDAGuard guard(x.device());
  auto y = torch::empty_like(x);
  long long n = x.numel();
  if (n == 0) return y;
  bool vec = reinterpret_cast<uintptr_t>(x.data_ptr<float>()) % 16 == 0 &&
             reinterpret_cast<uintptr_t>(y.data_ptr<float>()) % 16 == 0;
  const int threads = 256;
  long long work = vec ? (n + 3) / 4 : n;
  int blocks = (int)std::min<long long>((work + threads - 1) / threads, 16384);
  act_kernel<<<blocks, threads, 0, c10::cuda::getCurrentCUDAStream()>>>(
      x.data_ptr<float>(), y.data_ptr<float>(), n, vec);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return y;
}
"""

_ext = load_inline(
    name="cudal1_l1_12_swish",
    cpp_sources=_CPP,
    cuda_sources=_CUDA,
    functions=["swish"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    """x * sigmoid(x) in one kernel. x: any shape, float32, CUDA -> same shape, float32."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.swish(x.contiguous())
