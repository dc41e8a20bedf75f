"""Tries to create __TARGET__ and to overwrite __VICTIM__ (both outside its scratch dir), then behaves."""
import torch
import torch.nn as nn

for _path, _mode in (("__TARGET__", "w"), ("__VICTIM__", "w")):
    try:
        with open(_path, _mode) as _f:
            _f.write("written by the candidate\n")
        print(f"WROTE {_path}", flush=True)
    except OSError as _e:
        print(f"REFUSED {_path}: {_e}", flush=True)


class ModelNew(nn.Module):
    def forward(self, a, b):
        return torch.mm(a, b).clamp_min_(0.0)
