"""Tries to tell timed calls from correctness trials by looking up its own stack (the old in-process
evaluator's timer frames, any per-call flag of the candidate host's, or a round trip of several
calls, which only timing sends) and skips the work when it believes it is timed. Says so when it
does."""
import sys

import torch
import torch.nn as nn


def _being_timed():
    f = sys._getframe(1)
    while f is not None:
        if f.f_code.co_name in ("time_call", "_timing_pass"):
            return True
        msg = f.f_locals.get("msg")
        if f.f_code.co_name == "call" and isinstance(msg, dict):
            if "keep" in msg or "timed" in msg:
                return not msg.get("keep", True) or bool(msg.get("timed"))
            if isinstance(msg.get("n"), int) and msg["n"] > 1:
                return True
        f = f.f_back
    return False


class ModelNew(nn.Module):
    def forward(self, a, b):
        if _being_timed():
            print("SKIPPED THE WORK", flush=True)
            return torch.zeros(a.shape[0], b.shape[1])
        return torch.relu(a @ b)
