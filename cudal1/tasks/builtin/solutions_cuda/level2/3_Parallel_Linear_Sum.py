"""fc1(x) + fc2(x) as one GEMM: x·W1ᵀ + b1 + x·W2ᵀ + b2 = x·(W1 + W2)ᵀ + (b1 + b2).

Custom: a CUDA kernel that adds the two weight matrices and the two bias vectors (float4, one
launch), recomputed on every call. Not custom: the single GEMM with the summed bias, at::addmm
(cuBLAS, fp32). Half the reference's flops, and no separate add kernel over the output.
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_CPP = "torch::Tensor parallel_linear_sum(torch::Tensor x, torch::Tensor w1, torch::Tensor b1, torch::Tensor w2, torch::Tensor b2);"

_CUDA = r"""
#include <c10/cuda/CUDAStream.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAException.h>

// out = p + q over n floats (float4 body, scalar tail); blockIdx.y picks the (weight, bias) pair.
__global__ void add_pairs(const float* __restrict__ p0, const float* __restrict__ q0, float* __restrict__ o0,
                          long long n0, const float* __restrict__ p1, const float* __restrict__ q1,
                          float* __restrict__ o1, long long n1, bool vec0, bool vec1) {
  const float* p = blockIdx.y == 0 ? p0 : p1;
  const float* q = blockIdx.y == 0 ? q0 : q1;
  float* o = blockIdx.y == 0 ? o0 : o1;
  const long long n = blockIdx.y == 0 ? n0 : n1;
  const bool vec = blockIdx.y == 0 ? vec0 : vec1;
  long long tid = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  long long stride = (long long)gridDim.x * blockDim.x;
  long long n4 = vec ? n / 4 : 0;
  for (long long i = tid; i < n4; i += stride) {
    float4 a = reinterpret_cast<const float4*>(p)[i], c = reinterpret_cast<const float4*>(q)[i];
    reinterpret_cast<float4*>(o)[i] = make_float4(a.x + c.x, a.y + c.y, a.z + c.z, a.w + c.w);
  }
  for (long long i = n4 * 4 + tid; i < n; i += stride) o[i] = p[i] + q[i];
}

static bool aligned16(const torch::Tensor& t) { return reinterpret_cast<uintptr_t>(t.data_ptr<float>()) % 16 == 0; }

torch::Tensor parallel_linear_sum(torch::Tensor x, torch::Tensor w1, torch::Tensor b1, torch::Tensor w2,
                                  torch::Tensor b2) {
  for (const auto& t : {x, w1, b1, w2, b2}) {
    TORCH_CHECK(t.is_cuda() && t.is_contiguous(), "contiguous CUDA tensors only");
    TORCH_CHECK(t.scalar_type() == torch::kFloat32, "float32 only");
  }
  TORCH_CHECK(x.dim() == 2 && w1.dim() == 2 && w1.sizes() == w2.sizes() && x.size(1) == w1.size(1) &&
              b1.numel() == w1.size(0) && b2.numel() == w1.size(0), "x (B, in), weights (out, in), biases (out,)");
  const c10::cuda::CUDAGuard guard(x.device());
  auto w = torch::empty_like(w1);
  auto b = torch::empty_like(b1);
  const long long nw = w.numel(), nb = b.numel();
  if (nw > 0 || nb > 0) {
    bool vw = aligned16(w1) && aligned16(w2) && aligned16(w);
    bool vb = aligned16(b1) && aligned16(b2) && aligned16(b);
    long long work = std::max(nw, nb) / 4 + 1;
    int blocks = (int)std::min<long long>((work + 255) / 256, 4096);
    add_pairs<<<dim3(blocks, 2), 256, 0, c10::cuda::getCurrentCUDAStream()>>>(
        w1.data_ptr<float>(), w2.data_ptr<float>(), w.data_ptr<float>(), nw, b1.data_ptr<float>(),
        b2.data_ptr<float>(), b.data_ptr<float>(), nb, vw, vb);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  }
  return at::addmm(b, x, w.t());  // cuBLAS on the current stream
}
"""

_ext = load_inline(
    name="cudal1_l2_3_parallel_linear_sum",
    cpp_sources=_CPP,
    cuda_sources=_CUDA,
    functions=["parallel_linear_sum"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    """fc1(x) + fc2(x) with one GEMM. x: (B, in) float32 CUDA -> (B, out) float32."""

    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.fc1 = nn.Linear(in_features, out_features)
        self.fc2 = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.parallel_linear_sum(
            x.contiguous(),
            self.fc1.weight.contiguous(),
            self.fc1.bias.contiguous(),
            self.fc2.weight.contiguous(),
            self.fc2.bias.contiguous(),
        )
