"""Honest relu(a @ b) that, at import, writes down the cores its process and a program it starts
may run on (into its build directory, which the test reads), and whether it runs in a prebuild
(whose child has torch.compile switched off) or an evaluation."""
import json
import os
import subprocess

import torch
import torch.nn as nn


def _allowed(status):
    return next(line.split(":", 1)[1].strip() for line in status.splitlines() if line.startswith("Cpus_allowed_list"))


_child = subprocess.run(["cat", "/proc/self/status"], capture_output=True, text=True, timeout=30).stdout
with open(os.path.join(os.environ["TORCH_EXTENSIONS_DIR"], f"cores-{os.getpid()}.json"), "w") as _f:
    json.dump({"prebuild": os.environ.get("TORCH_COMPILE_DISABLE") == "1", "self": sorted(os.sched_getaffinity(0)),
               "child": _allowed(_child)}, _f)


class ModelNew(nn.Module):
    def forward(self, a, b):
        return torch.relu(a @ b)
