import torch
import torch.nn as nn


def _max_pool_2x2(x: torch.Tensor) -> torch.Tensor:
    """2×2, stride-2 max pooling (floor mode) as two elementwise maxima of strided slices (row
    pairs, then column pairs): simple vectorized passes instead of the generic pooling kernel."""
    x = x[..., : x.shape[-2] // 2 * 2, : x.shape[-1] // 2 * 2]
    rows = torch.maximum(x[..., 0::2, :], x[..., 1::2, :])
    return torch.maximum(rows[..., 0::2], rows[..., 1::2])


class ModelNew(nn.Module):
    """The same network with each ReLU moved after its max pool (ReLU is monotone, so they
    commute) and applied in place, which removes two full passes over the largest activations
    and their buffers; the pooling itself is done with strided elementwise maxima, several times
    faster than the generic CPU pooling kernel. The modules are the reference's, built in the
    same order."""

    def __init__(self, in_channels: int, height: int, width: int, num_classes: int):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(in_channels, 32, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
        )
        self.classifier = nn.Sequential(
            nn.Flatten(),
            nn.Linear(64 * (height // 4) * (width // 4), 256),
            nn.ReLU(),
            nn.Linear(256, num_classes),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        conv1, conv2 = self.features[0], self.features[3]
        fc1, fc2 = self.classifier[1], self.classifier[3]
        h = _max_pool_2x2(conv1(x)).relu_()
        h = _max_pool_2x2(conv2(h)).relu_()
        h = torch.addmm(fc1.bias, h.flatten(1), fc1.weight.t()).relu_()
        return torch.addmm(fc2.bias, h, fc2.weight.t())
