import torch
import torch.nn as nn


class Model(nn.Module):
    """An LSTM cell unrolled over a sequence from zero state: (T, B, in) -> all hidden states
    (T, B, hidden)."""

    def __init__(self, input_size: int, hidden_size: int):
        super().__init__()
        self.hidden_size = hidden_size
        self.cell = nn.LSTMCell(input_size, hidden_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x.new_zeros(x.shape[1], self.hidden_size)
        c = x.new_zeros(x.shape[1], self.hidden_size)
        outputs = []
        for t in range(x.shape[0]):
            h, c = self.cell(x[t], (h, c))
            outputs.append(h)
        return torch.stack(outputs)


SEQ_LEN = 256
BATCH = 256
INPUT_SIZE = 512
HIDDEN_SIZE = 512

# cuda: per step two GEMMs 2*256*512*2048 = 0.54 GFLOP each (~0.02 ms of math at fp32) plus
# ~10 small elementwise kernels; 256 steps of ~15 launches at ~3-5 µs each -> ~12 ms, launch-bound.
SIZE_PROFILES = {
    "cpu": {"SEQ_LEN": 64, "BATCH": 32, "INPUT_SIZE": 256, "HIDDEN_SIZE": 256},
    "cuda": {"SEQ_LEN": 256, "BATCH": 256, "INPUT_SIZE": 512, "HIDDEN_SIZE": 512},
}


def get_inputs():
    x = torch.randn(SEQ_LEN, BATCH, INPUT_SIZE)
    return [x]


def get_init_inputs():
    return [INPUT_SIZE, HIDDEN_SIZE]
