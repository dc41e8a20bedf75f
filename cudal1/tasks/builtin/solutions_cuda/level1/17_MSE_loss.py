"""Mean squared error as a two-kernel CUDA reduction that reads each operand once.

Custom: the whole operation. Kernel 1: every block accumulates (p - t)^2 over a grid-stride range
(float4 loads) and reduces it with warp shuffles to one partial sum; kernel 2: one block adds the
partials in double and divides by n. Deterministic (no atomics). The reference runs three kernels
(subtract, square, mean) and writes two full-size temporaries.
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_CPP = "torch::Tensor mse(torch::Tensor p, torch::Tensor t);"

_CUDA = r"""
#include <c10/cuda/CUDAStream.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAException.h>

// Sum over the block; every thread gets the total. blockDim.x is a multiple of 32.
template <typename T>
__device__ T block_sum(T v) {
  __shared__ T sh[32];
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) sh[warp] = v;
  __syncthreads();
  v = lane < (int)(blockDim.x >> 5) ? sh[lane] : (T)0;
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__global__ void sq_diff_partials(const float* __restrict__ p, const float* __restrict__ t,
                                 float* __restrict__ partial, long long n, bool vec) {
  long long tid = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  long long stride = (long long)gridDim.x * blockDim.x;
  long long n4 = vec ? n / 4 : 0;
  const float4* p4 = reinterpret_cast<const float4*>(p);
  const float4* t4 = reinterpret_cast<const float4*>(t);
  float acc = 0.0f;
  for (long long i = tid; i < n4; i += stride) {
    float4 a = p4[i], b = t4[i];
    float dx = a.x - b.x, dy = a.y - b.y, dz = a.z - b.z, dw = a.w - b.w;
    acc += (dx * dx + dy * dy) + (dz * dz + dw * dw);
  }
  for (long long i = n4 * 4 + tid; i < n; i += stride) { float d = p[i] - t[i]; acc += d * d; }
  float s = block_sum(acc);
  if (threadIdx.x == 0) partial[blockIdx.x] = s;
}

__global__ void finish_mean(const float* __restrict__ partial, int count, long long n, float* __restrict__ out) {
  double acc = 0.0;
  for (int i = threadIdx.x; i < count; i += blockDim.x) acc += (double)partial[i];
  double s = block_sum(acc);
  if (threadIdx.x == 0) out[0] = (float)(s / (double)n);
}

torch::Tensor mse(torch::Tensor p, torch::Tensor t) {
  TORCH_CHECK(p.is_cuda() && t.is_cuda() && p.is_contiguous() && t.is_contiguous(), "contiguous CUDA tensors only");
  TORCH_CHECK(p.scalar_type() == torch::kFloat32 && t.scalar_type() == torch::kFloat32, "float32 only");
  TORCH_CHECK(p.sizes() == t.sizes(), "predictions and targets must have the same shape");
  const c10::cuda::CUDAGuard guard(p.device());
  auto out = torch::empty({}, p.options());
  long long n = p.numel();
  if (n == 0) return out.fill_(NAN);  // mean of nothing, as torch.mean
  bool vec = reinterpret_cast<uintptr_t>(p.data_ptr<float>()) % 16 == 0 &&
             reinterpret_cast<uintptr_t>(t.data_ptr<float>()) % 16 == 0;
  const int threads = 256;
  long long work = vec ? (n + 3) / 4 : n;
  int blocks = (int)std::min<long long>((work + threads - 1) / threads, 2048);
  auto partial = torch::empty({blocks}, p.options());
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  sq_diff_partials<<<blocks, threads, 0, stream>>>(p.data_ptr<float>(), t.data_ptr<float>(),
                                                   partial.data_ptr<float>(), n, vec);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  finish_mean<<<1, 1024, 0, stream>>>(partial.data_ptr<float>(), blocks, n, out.data_ptr<float>());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}
"""

_ext = load_inline(
    name="cudal1_l1_17_mse",
    cpp_sources=_CPP,
    cuda_sources=_CUDA,
    functions=["mse"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    """mean((predictions - targets)^2). Both: same shape, float32, CUDA -> 0-dim float32."""

    def __init__(self):
        super().__init__()

    def forward(self, predictions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return _ext.mse(predictions.contiguous(), targets.contiguous())
