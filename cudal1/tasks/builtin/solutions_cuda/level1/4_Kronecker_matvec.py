"""kron(A, B) @ x without the Kronecker product: y = vec(A · X · Bᵀ) with X = x viewed as (N, N).

Custom: both small matrix products run in one hand-written shared-memory tiled GEMM kernel
(strided operands, so Bᵀ needs no copy). The reference materializes the N²×N² Kronecker matrix
(2.6 GB at N = 160) and reads it back for the matvec; this does 4·N³ flops on N² data.
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_CPP = "torch::Tensor kron_matvec(torch::Tensor a, torch::Tensor b, torch::Tensor x);"

_CUDA = r"""
#include <c10/cuda/CUDAStream.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAException.h>

constexpr int T = 16;

// C[i, j] = sum_k A(i, k) * B(k, j) with A(i, k) = a[i*as0 + k*as1], B(k, j) = b[k*bs0 + j*bs1];
// C is (m, n) row-major. Block (T, T) computes one T×T tile of C.
__global__ void gemm_strided(const float* __restrict__ a, long long as0, long long as1,
                             const float* __restrict__ b, long long bs0, long long bs1,
                             float* __restrict__ c, int m, int n, int k) {
  __shared__ float ta[T][T + 1];
  __shared__ float tb[T][T + 1];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int i = blockIdx.y * T + ty, j = blockIdx.x * T + tx;
  float acc = 0.0f;
  for (int k0 = 0; k0 < k; k0 += T) {
    int ka = k0 + tx, kb = k0 + ty;
    ta[ty][tx] = (i < m && ka < k) ? a[i * as0 + ka * as1] : 0.0f;
    tb[ty][tx] = (kb < k && j < n) ? b[kb * bs0 + j * bs1] : 0.0f;
    __syncthreads();
    #pragma unroll
    for (int kk = 0; kk < T; ++kk) acc += ta[ty][kk] * tb[kk][tx];
    __syncthreads();
  }
  if (i < m && j < n) c[(long long)i * n + j] = acc;
}

torch::Tensor kron_matvec(torch::Tensor a, torch::Tensor b, torch::Tensor x) {
  TORCH_CHECK(a.is_cuda() && b.is_cuda() && x.is_cuda(), "CUDA tensors only");
  TORCH_CHECK(a.is_contiguous() && b.is_contiguous() && x.is_contiguous(), "contiguous tensors only");
  TORCH_CHECK(a.scalar_type() == torch::kFloat32 && b.scalar_type() == torch::kFloat32 &&
              x.scalar_type() == torch::kFloat32, "float32 only");
  TORCH_CHECK(a.dim() == 2 && b.dim() == 2 && x.dim() == 1, "A, B must be 2-D and x 1-D");
  // general shapes: A (p, q), B (r, s), x (q*s,) -> y (p*r,)
  long long p = a.size(0), q = a.size(1), r = b.size(0), s = b.size(1);
  TORCH_CHECK(x.size(0) == q * s, "x must have A.size(1) * B.size(1) entries");
  TORCH_CHECK(p < (1LL << 31) && q < (1LL << 31) && r < (1LL << 31) && s < (1LL << 31), "dims must fit in int");
  const c10::cuda::CUDAGuard guard(a.device());
  auto y = torch::empty({p * r}, a.options());
  if (p * r == 0) return y;
  auto t = torch::empty({q, r}, a.options());  // t = X · Bᵀ, X = x as (q, s)
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  dim3 block(T, T);
  dim3 grid1((unsigned)((r + T - 1) / T), (unsigned)((q + T - 1) / T));
  gemm_strided<<<grid1, block, 0, stream>>>(x.data_ptr<float>(), s, 1, b.data_ptr<float>(), 1, s,
                                            t.data_ptr<float>(), (int)q, (int)r, (int)s);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  dim3 grid2((unsigned)((r + T - 1) / T), (unsigned)((p + T - 1) / T));
  gemm_strided<<<grid2, block, 0, stream>>>(a.data_ptr<float>(), q, 1, t.data_ptr<float>(), r, 1,
                                            y.data_ptr<float>(), (int)p, (int)r, (int)q);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return y;
}
"""

_ext = load_inline(
    name="cudal1_l1_4_kron_matvec",
    cpp_sources=_CPP,
    cuda_sources=_CUDA,
    functions=["kron_matvec"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    """y = kron(A, B) @ x. A: (N, N), B: (N, N), x: (N*N,), float32 CUDA -> (N*N,) float32."""

    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        return _ext.kron_matvec(A.contiguous(), B.contiguous(), x.contiguous())
