"""Control: two intra-op threads as blocks_while_judge_reads, the host's wait left as it is."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        before = torch.get_num_threads()
        torch.set_num_threads(2)
        try:
            return x * 2 + 1
        finally:
            torch.set_num_threads(before)
