"""Depthwise K×K convolution (stride 1, zero padding K//2) with bias as a shared-memory tiled CUDA kernel.

Custom: the whole convolution. A block computes a 32×32 output tile of one (image, channel) plane:
it stages the (32+K-1)² input patch (zeros outside the image) in shared memory once, keeps the
channel's K×K filter in registers, and each thread writes four outputs of one column. Each input
value is read from DRAM about once. Filters larger than 7×7 fall back to a direct kernel.
The layer's parameters are the task's nn.Conv2d (same construction, so the same initialization).
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_CPP = "torch::Tensor depthwise_conv2d(torch::Tensor x, torch::Tensor w, torch::Tensor b);"

_CUDA = r"""
#include <c10/cuda/CUDAStream.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAException.h>

constexpr int TW = 32, TH = 32, BY = 8;  // output tile; blockDim = (TW, BY), TH / BY rows per thread
constexpr int MAXK = 7;

// KS > 0: compile-time filter size; out is (planes, ho, wo), planes = N*C, plane p uses channel p % c.
template <int KS>
__global__ void dw_tiled(const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ b,
                         float* __restrict__ out, int c, int h, int wd, int ho, int wo, int pad, int tiles_w,
                         int tiles_per_plane) {
  __shared__ float patch[TH + MAXK - 1][TW + MAXK - 1];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const long long plane = blockIdx.x / tiles_per_plane;
  const int tile = blockIdx.x % tiles_per_plane;
  const int oh0 = (tile / tiles_w) * TH, ow0 = (tile % tiles_w) * TW;
  const int ch = (int)(plane % c);
  const float* xp = x + plane * h * wd;
  constexpr int PH = TH + KS - 1, PW = TW + KS - 1;
  for (int r = ty; r < PH; r += BY) {
    int ih = oh0 - pad + r;
    for (int q = tx; q < PW; q += TW) {
      int iw = ow0 - pad + q;
      patch[r][q] = (ih >= 0 && ih < h && iw >= 0 && iw < wd) ? xp[(long long)ih * wd + iw] : 0.0f;
    }
  }
  float f[KS * KS];
  #pragma unroll
  for (int i = 0; i < KS * KS; ++i) f[i] = w[ch * KS * KS + i];
  const float bias = b[ch];
  __syncthreads();
  const int ow = ow0 + tx;
  #pragma unroll
  for (int j = 0; j < TH / BY; ++j) {
    const int r = ty + j * BY, oh = oh0 + r;
    float acc = bias;
    #pragma unroll
    for (int kh = 0; kh < KS; ++kh)
      #pragma unroll
      for (int kw = 0; kw < KS; ++kw) acc += patch[r + kh][tx + kw] * f[kh * KS + kw];
    if (oh < ho && ow < wo) out[plane * ho * wo + (long long)oh * wo + ow] = acc;
  }
}

// Any filter size: one thread per output, reads straight from global memory.
__global__ void dw_direct(const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ b,
                          float* __restrict__ out, long long total, int c, int h, int wd, int ho, int wo, int k,
                          int pad) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total;
       i += (long long)gridDim.x * blockDim.x) {
    int ow = (int)(i % wo);
    int oh = (int)((i / wo) % ho);
    long long plane = i / ((long long)wo * ho);
    int ch = (int)(plane % c);
    const float* xp = x + plane * h * wd;
    float acc = b[ch];
    for (int kh = 0; kh < k; ++kh) {
      int ih = oh - pad + kh;
      if (ih < 0 || ih >= h) continue;
      for (int kw = 0; kw < k; ++kw) {
        int iw = ow - pad + kw;
        if (iw >= 0 && iw < wd) acc += xp[(long long)ih * wd + iw] * w[((long long)ch * k + kh) * k + kw];
      }
    }
    out[i] = acc;
  }
}

torch::Tensor depthwise_conv2d(torch::Tensor x, torch::Tensor w, torch::Tensor b) {
  TORCH_CHECK(x.is_cuda() && w.is_cuda() && b.is_cuda(), "CUDA tensors only");
  TORCH_CHECK(x.is_contiguous() && w.is_contiguous() && b.is_contiguous(), "contiguous tensors only");
  TORCH_CHECK(x.scalar_type() == torch::kFloat32 && w.scalar_type() == torch::kFloat32 &&
              b.scalar_type() == torch::kFloat32, "float32 only");
  TORCH_CHECK(x.dim() == 4 && w.dim() == 4 && w.size(1) == 1 && w.size(2) == w.size(3), "x (N,C,H,W), w (C,1,K,K)");
  const int n = (int)x.size(0), c = (int)x.size(1), h = (int)x.size(2), wd = (int)x.size(3);
  const int k = (int)w.size(2), pad = k / 2;
  TORCH_CHECK(w.size(0) == c && b.numel() == c, "one filter and one bias per channel");
  const int ho = h + 2 * pad - k + 1, wo = wd + 2 * pad - k + 1;
  TORCH_CHECK(ho >= 0 && wo >= 0, "input smaller than the filter");
  const c10::cuda::CUDAGuard guard(x.device());
  auto out = torch::empty({n, c, ho, wo}, x.options());
  long long total = out.numel();
  if (total == 0) return out;
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  const int tiles_w = (wo + TW - 1) / TW, tiles_h = (ho + TH - 1) / TH;
  const long long blocks = (long long)n * c * tiles_w * tiles_h;
  if (k == 3 && blocks < (1LL << 31)) {
    dw_tiled<3><<<(unsigned)blocks, dim3(TW, BY), 0, stream>>>(
        x.data_ptr<float>(), w.data_ptr<float>(), b.data_ptr<float>(), out.data_ptr<float>(), c, h, wd, ho, wo, pad,
        tiles_w, tiles_w * tiles_h);
  } else if (k == 5 && blocks < (1LL << 31)) {
    dw_tiled<5><<<(unsigned)blocks, dim3(TW, BY), 0, stream>>>(
        x.data_ptr<float>(), w.data_ptr<float>(), b.data_ptr<float>(), out.data_ptr<float>(), c, h, wd, ho, wo, pad,
        tiles_w, tiles_w * tiles_h);
  } else {
    int grid = (int)std::min<long long>((total + 255) / 256, 65536);
    dw_direct<<<grid, 256, 0, stream>>>(x.data_ptr<float>(), w.data_ptr<float>(), b.data_ptr<float>(),
                                        out.data_ptr<float>(), total, c, h, wd, ho, wo, k, pad);
  }
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}
"""

_ext = load_inline(
    name="cudal1_l1_15_depthwise_conv2d",
    cpp_sources=_CPP,
    cuda_sources=_CUDA,
    functions=["depthwise_conv2d"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    """Depthwise conv with bias. x: (N, C, H, W) float32 CUDA -> (N, C, H', W'), H' = H for odd K."""

    def __init__(self, channels: int, kernel_size: int = 3):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, kernel_size, padding=kernel_size // 2, groups=channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.depthwise_conv2d(x.contiguous(), self.conv.weight.contiguous(), self.conv.bias.contiguous())
