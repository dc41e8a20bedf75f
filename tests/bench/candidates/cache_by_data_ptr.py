"""Result cache keyed by the first input's data pointer (the allocator hands freed blocks out again).

Prints each hit with the evaluator function it was called from (looked up only to report it), so
the test can tell a stale answer the evaluator checked (a correctness trial, a timed call) from
one on an unchecked call (warm-up, label probe).
"""
import sys

import torch
import torch.nn as nn

_cache = {}
_PHASES = ("check_correctness", "time_call", "collect_labels", "_timing_pass")


def _phase():
    f = sys._getframe(1)
    while f is not None and f.f_code.co_name not in _PHASES:
        f = f.f_back
    return f.f_code.co_name if f is not None else "?"


class ModelNew(nn.Module):
    def forward(self, a, b):
        key = a.data_ptr()
        if key in _cache:
            print(f"cache hit in {_phase()}", flush=True)
            return _cache[key].clone()
        _cache[key] = torch.relu(a @ b)
        return _cache[key].clone()
