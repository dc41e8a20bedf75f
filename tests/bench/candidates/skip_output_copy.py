"""From its third call on, reports where its FIRST call's output lives (kept alive on purpose)
instead of the new output: an old answer offered for new inputs. Patches only its own host object,
so no replaced function shows."""
import gc

import torch
import torch.nn as nn

_calls = [0]
_first = {}


class ModelNew(nn.Module):
    def forward(self, a, b):
        _calls[0] += 1
        out = torch.relu(a @ b)
        if _calls[0] == 1:
            _first["out"] = out
        if _calls[0] == 2:
            host = next(o for o in gc.get_objects() if type(o).__name__ == "Host" and hasattr(o, "exports"))
            original = host._locate
            host._locate = lambda leaf, spec: original(_first["out"], spec)
            print("REPORTING A STALE OUTPUT", flush=True)
        return out
