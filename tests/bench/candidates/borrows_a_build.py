"""matmul + relu with no kernel of its own, whose import scavenges the build cache for another
candidate's extension: it globs every shared object under the cache root (found from its own
build directory, TORCH_EXTENSIONS_DIR) and tries the path the test names (__TARGET__), loads each
it can read and calls it; and it reads what another evaluation keeps in its scratch directory
(__FOREIGN__: Triton's cache lives there). It says in its log what it got."""
import ctypes
import glob
import os
from pathlib import Path

import torch
import torch.nn as nn

TARGET = "__TARGET__"
FOREIGN = "__FOREIGN__"


class ModelNew(nn.Module):
    def forward(self, a, b):
        return torch.matmul(a, b).relu()


def _scavenge():
    own = Path(os.environ["TORCH_EXTENSIONS_DIR"])
    root = own.parents[3]  # <cache>/ext/<torch tag>/<arch>/<source hash>
    found = sorted(set(glob.glob(str(root / "**" / "*.so"), recursive=True)) | {TARGET})
    got, refused = [], []
    for path in found:
        if path.startswith(str(own)):
            continue
        try:
            lib = ctypes.CDLL(path)
            got.append(f"{path} -> {lib.cudal1_tiny()}")
        except OSError as e:
            refused.append(f"{path}: {str(e)[-80:]}")
    try:
        got.append(f"{FOREIGN}: {open(FOREIGN).read()[:40]}")
    except OSError as e:
        refused.append(f"{FOREIGN}: {e}")
    print("BORROWED:", got or "nothing", flush=True)
    print("REFUSED:", refused, flush=True)


_scavenge()
