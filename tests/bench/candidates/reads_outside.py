"""matmul + relu, whose import reads what it should not: each path of __PATHS__ (a run directory's
rollouts, the exemplar buffer, a file in the user's home, the project checkout, another candidate's
scratch directory) and lists each one's directory. It says in its log what it got, then computes
honestly: a read that works would be the leak, not a better answer."""
import os

import torch
import torch.nn as nn

for _path in __PATHS__:
    for _what, _try in (("READ", lambda p: open(p).read()[:60]), ("LISTED", lambda p: os.listdir(os.path.dirname(p)))):
        try:
            print(f"{_what} {_path}: {_try(_path)}", flush=True)
        except OSError as _e:
            print(f"REFUSED {_what} {_path}: {type(_e).__name__}", flush=True)


class ModelNew(nn.Module):
    def forward(self, a, b):
        return torch.matmul(a, b).relu()
