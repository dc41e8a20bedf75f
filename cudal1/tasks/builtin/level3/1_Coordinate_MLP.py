import torch
import torch.nn as nn


class Model(nn.Module):
    """A coordinate MLP (as in implicit neural fields): many points, narrow layers.

    (P, in) -> Linear+ReLU stack of `hidden_layers` layers of width `hidden` -> (P, out).
    """

    def __init__(self, in_features: int, hidden: int, hidden_layers: int, out_features: int):
        super().__init__()
        layers = []
        width = in_features
        for _ in range(hidden_layers):
            layers += [nn.Linear(width, hidden), nn.ReLU()]
            width = hidden
        layers.append(nn.Linear(width, out_features))
        self.net = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


POINTS = 1048576
IN_FEATURES = 32
HIDDEN = 128
HIDDEN_LAYERS = 4
OUT_FEATURES = 4

# cuda: GEMMs 2*1M*(32*128 + 3*128*128 + 128*4) = 113 GFLOP fp32 (~2.3 ms at ~50 TFLOP/s);
# each 1M×128 activation is written, ReLU'd and read back: ~12 × 0.54 GB at ~3 TB/s (~2 ms)
# -> ~4.5 ms.
SIZE_PROFILES = {
    "cpu": {"POINTS": 32768},
    "cuda": {"POINTS": 1048576},
}


def get_inputs():
    x = torch.randn(POINTS, IN_FEATURES)
    return [x]


def get_init_inputs():
    return [IN_FEATURES, HIDDEN, HIDDEN_LAYERS, OUT_FEATURES]
