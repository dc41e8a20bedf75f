"""matmul then relu on two intra-op threads, the thread count put back before forward returns,
so no check sees it changed."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, a, b):
        before = torch.get_num_threads()
        torch.set_num_threads(2)
        try:
            return torch.matmul(a, b).relu()
        finally:
            torch.set_num_threads(before)
