"""relu(a @ b) as a C++ function built with load_inline: plain C++ with no torch headers (it
compiles in about a second), called through ctypes on the tensors' memory."""

import ctypes

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_SRC = r"""
#include <cstdint>
extern "C" void cudal1_matmul_relu(const float* A, const float* B, float* C, int64_t n, int64_t k, int64_t m) {
  for (int64_t i = 0; i < n * m; ++i) C[i] = 0.f;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t p = 0; p < k; ++p) {
      const float x = A[i * k + p];
      for (int64_t j = 0; j < m; ++j) C[i * m + j] += x * B[p * m + j];
    }
  for (int64_t i = 0; i < n * m; ++i) C[i] = C[i] > 0.f ? C[i] : 0.f;
}
"""
_lib = ctypes.CDLL(
    load_inline(
        name="cudal1_test_matmul_relu_c",
        cpp_sources=_SRC,
        is_python_module=False,
        no_implicit_headers=True,
        extra_cflags=["-O2"],
        verbose=False,
    )
)
_lib.cudal1_matmul_relu.argtypes = [ctypes.c_void_p] * 3 + [ctypes.c_int64] * 3


class ModelNew(nn.Module):
    def forward(self, a, b):
        a, b = a.contiguous().float(), b.contiguous().float()
        out = torch.empty(a.shape[0], b.shape[1])
        _lib.cudal1_matmul_relu(a.data_ptr(), b.data_ptr(), out.data_ptr(), a.shape[0], a.shape[1], b.shape[1])
        return out
