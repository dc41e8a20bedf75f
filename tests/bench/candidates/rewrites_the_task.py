"""Returns zeros, and at import tries to make zeros right: it rewrites the task's file on disk
(__TASK_FILE__) so that its reference returns zeros too, and opens the files that hold the
checker's tolerances (__TOLERANCES__: the evaluator's own sources) for writing (it writes nothing
there: were the open allowed, the test would still leave them as they were). It says in its log
what it could do."""
import torch
import torch.nn as nn

_ZEROS_TASK = '''import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, a, b):
        return torch.zeros(a.shape[0], b.shape[1])

def get_inputs():
    return [torch.randn(64, 64), torch.randn(64, 64)]

def get_init_inputs():
    return []
'''

try:
    with open("__TASK_FILE__", "w") as _f:
        _f.write(_ZEROS_TASK)
    print("REWROTE THE TASK", flush=True)
except OSError as _e:
    print(f"REFUSED THE TASK: {type(_e).__name__}", flush=True)
for _path in __TOLERANCES__:
    try:
        with open(_path, "a") as _f:
            _f.write("")
        print(f"OPENED FOR WRITING {_path}", flush=True)
    except OSError as _e:
        print(f"REFUSED {_path}: {type(_e).__name__}", flush=True)


class ModelNew(nn.Module):
    def forward(self, a, b):
        return torch.zeros(a.shape[0], b.shape[1])
