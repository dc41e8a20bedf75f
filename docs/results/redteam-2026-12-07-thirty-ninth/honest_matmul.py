import torch
import torch.nn as nn
class ModelNew(nn.Module):
    def forward(self, a, b):
        return torch.matmul(a, b).relu()
