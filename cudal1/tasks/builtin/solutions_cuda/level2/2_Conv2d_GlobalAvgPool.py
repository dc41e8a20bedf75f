"""Valid convolution then global average pooling, without the convolution.

mean_{i,j} conv(x)[n, o, i, j] = b[o] + Σ_{c,kh,kw} W[o, c, kh, kw] · S[n, c, kh, kw] / (Ho·Wo), where
S[n, c, kh, kw] is the sum of x[n, c] over the Ho×Wo window shifted by (kh, kw): the mean is linear, so
it commutes with the convolution.

Custom: all of it, in two CUDA kernels. Kernel 1: one block per (image, channel) plane reads the plane
once and accumulates the K×K window sums (K = 3 in registers; other K one rectangle at a time);
kernel 2: one warp per (image, output channel) dots the window sums with the filter. O(N·C·H·W) work
instead of the reference's O(N·O·C·K²·H·W) convolution. Parameters: the task's nn.Conv2d.
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_CPP = "torch::Tensor conv_global_avg(torch::Tensor x, torch::Tensor w, torch::Tensor b);"

_CUDA = r"""
#include <c10/cuda/CUDAStream.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAException.h>

// Sum over the block, result valid in thread 0. blockDim.x is a multiple of 32; sh holds 32 floats.
__device__ float block_sum0(float v, float* sh) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  __syncthreads();  // sh is free again
  if ((threadIdx.x & 31) == 0) sh[threadIdx.x >> 5] = v;
  __syncthreads();
  float s = 0.0f;
  if (threadIdx.x == 0)
    for (int i = 0; i < (int)(blockDim.x >> 5); ++i) s += sh[i];
  return s;
}

// K = 3: s[plane, kh*3 + kw] = sum of x[plane, r, q] over r in [kh, kh+ho), q in [kw, kw+wo).
// A warp walks whole rows (coalesced); per row it keeps the 3 column-window sums, then adds them to
// the row windows that contain the row.
__global__ void window_sums3(const float* __restrict__ x, float* __restrict__ s, int h, int wd, int ho, int wo) {
  __shared__ float sh[32];
  const float* xp = x + (long long)blockIdx.x * h * wd;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
  float acc[9];
  #pragma unroll
  for (int t = 0; t < 9; ++t) acc[t] = 0.0f;
  for (int r = warp; r < h; r += nwarps) {
    const float* row = xp + (long long)r * wd;
    float c0 = 0.0f, c1 = 0.0f, c2 = 0.0f;
    for (int q = lane; q < wd; q += 32) {
      const float v = row[q];
      c0 += (q < wo) ? v : 0.0f;
      c1 += (q >= 1 && q < 1 + wo) ? v : 0.0f;
      c2 += (q >= 2 && q < 2 + wo) ? v : 0.0f;
    }
    #pragma unroll
    for (int kh = 0; kh < 3; ++kh) {
      if (r >= kh && r < kh + ho) { acc[kh * 3] += c0; acc[kh * 3 + 1] += c1; acc[kh * 3 + 2] += c2; }
    }
  }
  #pragma unroll
  for (int t = 0; t < 9; ++t) {
    float tot = block_sum0(acc[t], sh);
    if (threadIdx.x == 0) s[(long long)blockIdx.x * 9 + t] = tot;
  }
}

// Any K: block (plane, kh*k + kw) sums one rectangle.
__global__ void window_sums_any(const float* __restrict__ x, float* __restrict__ s, int h, int wd, int ho, int wo,
                                int k) {
  __shared__ float sh[32];
  const int kh = blockIdx.y / k, kw = blockIdx.y % k;
  const float* xp = x + (long long)blockIdx.x * h * wd;
  const long long n = (long long)ho * wo;
  float acc = 0.0f;
  for (long long i = threadIdx.x; i < n; i += blockDim.x) {
    const int r = (int)(i / wo) + kh, q = (int)(i % wo) + kw;
    acc += xp[(long long)r * wd + q];
  }
  float tot = block_sum0(acc, sh);
  if (threadIdx.x == 0) s[(long long)blockIdx.x * k * k + blockIdx.y] = tot;
}

// out[n, o] = b[o] + inv_area * sum_m w[o, m] * s[n, m], m over C*K*K. One warp per output.
__global__ void pool_dot(const float* __restrict__ s, const float* __restrict__ w, const float* __restrict__ b,
                         float* __restrict__ out, long long outputs, int oc, int m, float inv_area) {
  const int lane = threadIdx.x & 31;
  const long long warps = (long long)gridDim.x * (blockDim.x >> 5);
  for (long long t = blockIdx.x * (long long)(blockDim.x >> 5) + (threadIdx.x >> 5); t < outputs; t += warps) {
    const long long n = t / oc;
    const int o = (int)(t % oc);
    const float* sr = s + n * m;
    const float* wr = w + (long long)o * m;
    float acc = 0.0f;
    for (int i = lane; i < m; i += 32) acc += wr[i] * sr[i];
    for (int d = 16; d > 0; d >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, d);
    if (lane == 0) out[t] = b[o] + acc * inv_area;
  }
}

torch::Tensor conv_global_avg(torch::Tensor x, torch::Tensor w, torch::Tensor b) {
  TORCH_CHECK(x.is_cuda() && w.is_cuda() && b.is_cuda(), "CUDA tensors only");
  TORCH_CHECK(x.is_contiguous() && w.is_contiguous() && b.is_contiguous(), "contiguous tensors only");
  TORCH_CHECK(x.scalar_type() == torch::kFloat32 && w.scalar_type() == torch::kFloat32 &&
              b.scalar_type() == torch::kFloat32, "float32 only");
  TORCH_CHECK(x.dim() == 4 && w.dim() == 4 && w.size(1) == x.size(1) && w.size(2) == w.size(3),
              "x (N, C, H, W), weight (O, C, K, K)");
  const int n = (int)x.size(0), c = (int)x.size(1), h = (int)x.size(2), wd = (int)x.size(3);
  const int oc = (int)w.size(0), k = (int)w.size(2);
  TORCH_CHECK(b.numel() == oc, "one bias per output channel");
  const int ho = h - k + 1, wo = wd - k + 1;
  TORCH_CHECK(ho > 0 && wo > 0, "input smaller than the filter");
  const c10::cuda::CUDAGuard guard(x.device());
  auto out = torch::empty({n, oc}, x.options());
  const long long planes = (long long)n * c;
  if (out.numel() == 0) return out;
  TORCH_CHECK(planes < (1LL << 31), "too many planes");
  const int m = c * k * k;
  auto s = torch::empty({std::max<long long>(planes * k * k, 1)}, x.options());
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  if (planes > 0) {
    if (k == 3) {
      window_sums3<<<(unsigned)planes, 256, 0, stream>>>(x.data_ptr<float>(), s.data_ptr<float>(), h, wd, ho, wo);
    } else {
      TORCH_CHECK(k * k <= 65535, "filter too large");
      window_sums_any<<<dim3((unsigned)planes, k * k), 256, 0, stream>>>(x.data_ptr<float>(), s.data_ptr<float>(),
                                                                          h, wd, ho, wo, k);
    }
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  }
  const long long outputs = (long long)n * oc;
  int blocks = (int)std::min<long long>((outputs + 7) / 8, 65536);
  pool_dot<<<blocks, 256, 0, stream>>>(s.data_ptr<float>(), w.data_ptr<float>(), b.data_ptr<float>(),
                                       out.data_ptr<float>(), outputs, oc, m, 1.0f / ((float)ho * (float)wo));
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}
"""

_ext = load_inline(
    name="cudal1_l2_2_conv_global_avg",
    cpp_sources=_CPP,
    cuda_sources=_CUDA,
    functions=["conv_global_avg"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    """conv(x).mean(dim=(2, 3)) for a valid K×K convolution. x: (N, C, H, W) float32 CUDA -> (N, O)."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.conv_global_avg(x.contiguous(), self.conv.weight.contiguous(), self.conv.bias.contiguous())
