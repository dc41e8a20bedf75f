import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    """mean over positions of a valid convolution = weights · (mean of each shifted input window).

    For offset (i, j) of the kernel, the output positions see the input window
    x[:, :, i:i+Ho, j:j+Wo]; its mean for every offset is exactly an average pool with an
    Ho×Wo window and stride 1, giving (N, C_in, kh, kw). One small GEMM with the flattened
    weights then replaces the whole convolution.
    """

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        kh, kw = self.conv.kernel_size
        out_h, out_w = x.shape[2] - kh + 1, x.shape[3] - kw + 1
        window_means = F.avg_pool2d(x, (out_h, out_w), stride=1)
        weight = self.conv.weight.flatten(1)
        return torch.addmm(self.conv.bias, window_means.flatten(1), weight.t())
