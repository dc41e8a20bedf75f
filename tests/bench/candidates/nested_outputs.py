"""The nested_outputs task's answer, honest or wrong in one way (VARIANT, replaced by the test):
"honest"; "corners" returns y right only in the 36 elements that printing it shows; "wrong_key",
"missing_value", "plain_tuple", "wrong_float", "wrong_str" differ from the reference's answer in
one key, one element, one container type or one plain value."""
import collections

import torch
import torch.nn as nn

VARIANT = "__VARIANT__"
Parts = collections.namedtuple("Parts", ["lo", "hi"])
EDGE = [0, 1, 2, 61, 62, 63]  # the rows and columns torch prints of a 64x64 tensor


class ModelNew(nn.Module):
    def forward(self, a, b):
        y = (a @ b).relu()
        stats = [y.mean().item(), 64, "relu", None, True]
        if VARIANT == "corners":  # every plain value right, y right only where it is printed
            edge = torch.tensor(EDGE)
            y = torch.zeros(64, 64)
            y[edge.unsqueeze(1), edge] = (a[edge] @ b[:, edge]).relu()
        parts = Parts(torch.minimum(a, b), torch.maximum(a, b))
        if VARIANT == "wrong_float":
            stats[0] += 0.5
        if VARIANT == "wrong_str":
            stats[2] = "gelu"
        if VARIANT == "missing_value":
            stats.pop()
        out = {"y": y, "parts": tuple(parts) if VARIANT == "plain_tuple" else parts, "stats": tuple(stats)}
        if VARIANT == "wrong_key":
            out["Y"] = out.pop("y")
        return out
