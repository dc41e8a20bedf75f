"""diag(A @ Bᵀ) without the product: d[i] = A[i, :] · B[i, :], one row-wise dot product per block.

Custom: the whole operation. One block per row streams both rows with float4 loads, accumulates
the products and reduces them with warp shuffles. O(N·K) reads instead of the reference's O(N²·K)
GEMM whose N² - N off-diagonal entries are thrown away.
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_CPP = "torch::Tensor rowwise_dot(torch::Tensor a, torch::Tensor b);"

_CUDA = r"""
#include <c10/cuda/CUDAStream.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAException.h>

// d[row] = sum_k a[row, k] * b[row, k]. blockDim.x is a multiple of 32.
template <bool VEC>
__global__ void rowwise_dot_kernel(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ d,
                                   long long k) {
  __shared__ float sh[32];
  const float* ar = a + blockIdx.x * k;
  const float* br = b + blockIdx.x * k;
  const long long nv = VEC ? k / 4 : 0;
  const float4* a4 = reinterpret_cast<const float4*>(ar);
  const float4* b4 = reinterpret_cast<const float4*>(br);
  float acc = 0.0f;
  for (long long i = threadIdx.x; i < nv; i += blockDim.x) {
    float4 x = a4[i], y = b4[i];
    acc += (x.x * y.x + x.y * y.y) + (x.z * y.z + x.w * y.w);
  }
  for (long long i = nv * 4 + threadIdx.x; i < k; i += blockDim.x) acc += ar[i] * br[i];
  for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
  if ((threadIdx.x & 31) == 0) sh[threadIdx.x >> 5] = acc;
  __syncthreads();
  if (threadIdx.x == 0) {
    float s = 0.0f;
    for (int w = 0; w < (int)(blockDim.x >> 5); ++w) s += sh[w];
    d[blockIdx.x] = s;
  }
}

torch::Tensor rowwise_dot(torch::Tensor a, torch::Tensor b) {
  TORCH_CHECK(a.is_cuda() && b.is_cuda() && a.is_contiguous() && b.is_contiguous(), "contiguous CUDA tensors only");
  TORCH_CHECK(a.scalar_type() == torch::kFloat32 && b.scalar_type() == torch::kFloat32, "float32 only");
  TORCH_CHECK(a.dim() == 2 && a.sizes() == b.sizes(), "A and B must both be (N, K)");
  const c10::cuda::CUDAGuard guard(a.device());
  const long long n = a.size(0), k = a.size(1);
  auto d = torch::empty({n}, a.options());
  if (n == 0) return d;
  if (k == 0) return d.zero_();
  TORCH_CHECK(n <= 2147483647LL, "too many rows");
  bool vec = k % 4 == 0 && reinterpret_cast<uintptr_t>(a.data_ptr<float>()) % 16 == 0 &&
             reinterpret_cast<uintptr_t>(b.data_ptr<float>()) % 16 == 0;
  int threads = k >= 2048 ? 256 : (k >= 256 ? 128 : 32);
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  if (vec)
    rowwise_dot_kernel<true><<<(unsigned)n, threads, 0, stream>>>(a.data_ptr<float>(), b.data_ptr<float>(),
                                                                   d.data_ptr<float>(), k);
  else
    rowwise_dot_kernel<false><<<(unsigned)n, threads, 0, stream>>>(a.data_ptr<float>(), b.data_ptr<float>(),
                                                                    d.data_ptr<float>(), k);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return d;
}
"""

_ext = load_inline(
    name="cudal1_l1_3_diag_of_matmul_t",
    cpp_sources=_CPP,
    cuda_sources=_CUDA,
    functions=["rowwise_dot"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    """d = diag(A @ B.T). A, B: (N, K) float32 CUDA -> (N,) float32."""

    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return _ext.rowwise_dot(A.contiguous(), B.contiguous())
