"""3×3 convolution, ReLU, 2×2 max pooling: cuDNN convolution plus one fused CUDA epilogue.

Custom: everything after the convolution in one kernel: each thread reads one 2×2 window of the
bias-free convolution output, adds the channel's bias, applies ReLU and writes the window's maximum.
The full-size activation is read once and never rewritten. Not custom: the convolution itself,
F.conv2d without bias (cuDNN, the same call the reference makes before it adds the bias in place).
The reference then runs the bias add (read + write), ReLU (read + write) and pooling (read).
"""

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.cpp_extension import load_inline

_CPP = "torch::Tensor bias_relu_maxpool2(torch::Tensor y, torch::Tensor b);"

_CUDA = r"""
#include <c10/cuda/CUDAStream.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAException.h>

__device__ __forceinline__ float relu_b(float v, float b) { return fmaxf(v + b, 0.0f); }

// y: (planes, h, w) conv output without bias; out: (planes, h/2, w/2). Plane p has channel p % c.
__global__ void bias_relu_pool(const float* __restrict__ y, const float* __restrict__ b, float* __restrict__ out,
                               long long total, int c, int h, int w, int ho, int wo, bool vec) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total;
       i += (long long)gridDim.x * blockDim.x) {
    const int j = (int)(i % wo);
    const int r = (int)((i / wo) % ho);
    const long long plane = i / ((long long)wo * ho);
    const float bias = b[plane % c];
    const float* top = y + (plane * h + 2 * r) * (long long)w + 2 * j;
    const float* bot = top + w;
    float a0, a1, a2, a3;
    if (vec) {  // w even: both pairs are 8-byte aligned
      float2 t = *reinterpret_cast<const float2*>(top), u = *reinterpret_cast<const float2*>(bot);
      a0 = t.x; a1 = t.y; a2 = u.x; a3 = u.y;
    } else {
      a0 = top[0]; a1 = top[1]; a2 = bot[0]; a3 = bot[1];
    }
    out[i] = fmaxf(fmaxf(relu_b(a0, bias), relu_b(a1, bias)), fmaxf(relu_b(a2, bias), relu_b(a3, bias)));
  }
}

torch::Tensor bias_relu_maxpool2(torch::Tensor y, torch::Tensor b) {
  TORCH_CHECK(y.is_cuda() && b.is_cuda() && y.is_contiguous() && b.is_contiguous(), "contiguous CUDA tensors only");
  TORCH_CHECK(y.scalar_type() == torch::kFloat32 && b.scalar_type() == torch::kFloat32, "float32 only");
  TORCH_CHECK(y.dim() == 4 && b.numel() == y.size(1), "y (N, C, H, W), bias (C,)");
  const c10::cuda::CUDAGuard guard(y.device());
  const int n = (int)y.size(0), c = (int)y.size(1), h = (int)y.size(2), w = (int)y.size(3);
  const int ho = h / 2, wo = w / 2;  // MaxPool2d(2): floor
  auto out = torch::empty({n, c, ho, wo}, y.options());
  const long long total = out.numel();
  if (total == 0) return out;
  bool vec = w % 2 == 0 && reinterpret_cast<uintptr_t>(y.data_ptr<float>()) % 8 == 0;
  int blocks = (int)std::min<long long>((total + 255) / 256, 65536);
  bias_relu_pool<<<blocks, 256, 0, c10::cuda::getCurrentCUDAStream()>>>(
      y.data_ptr<float>(), b.data_ptr<float>(), out.data_ptr<float>(), total, c, h, w, ho, wo, vec);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}
"""

_ext = load_inline(
    name="cudal1_l2_5_conv_relu_maxpool",
    cpp_sources=_CPP,
    cuda_sources=_CUDA,
    functions=["bias_relu_maxpool2"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    """maxpool2(relu(conv3x3(x))). x: (N, C_in, H, W) float32 CUDA -> (N, C_out, H/2, W/2)."""

    def __init__(self, in_channels: int, out_channels: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, 3, padding=1)
        self.relu = nn.ReLU()
        self.pool = nn.MaxPool2d(2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.conv2d(x.contiguous(), self.conv.weight, None, padding=1)
        return _ext.bias_relu_maxpool2(y.contiguous(), self.conv.bias.contiguous())
