"""sin_chain computed call by call, each call's chain run in a worker thread of its own pool and
waited for before the call returns: every output is finished when forward returns (the control
of pipelines_the_round that separates what running in a pool thread changes from what returning
unfinished outputs gains)."""
import concurrent.futures

import torch
import torch.nn as nn


def chain(y):
    for _ in range(16):
        y = torch.sin(y) * 0.5 + y
    return y


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.pool = None

    def forward(self, x):
        if self.pool is None:
            self.pool = concurrent.futures.ThreadPoolExecutor(max_workers=1)
        return self.pool.submit(chain, x).result()
