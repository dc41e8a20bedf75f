"""matmul + relu, honestly computed, whose import looks for the harness's result pipe and nonce in
its own process (the frames that called it, as the prebuild's child once held them) and, where it
finds them, sends the parent a forged result: a build failure with a message of its own, from a
process that was about to be paid for an honest answer."""
import json
import re
import sys

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, a, b):
        return torch.matmul(a, b).relu()


def _forge():
    f = sys._getframe(1)
    pipes, nonces = [], []
    while f is not None:
        for value in list(f.f_locals.values()):
            if hasattr(value, "send_bytes"):
                pipes.append(value)
            elif isinstance(value, str) and re.fullmatch(r"[0-9a-f]{32}", value):
                nonces.append(value)
        f = f.f_back
    if not (pipes and nonces):
        print("FORGER: no result pipe or nonce in reach", flush=True)
        return
    forged = {"ok": False, "build_error": True, "message": "FORGED by the candidate", "stage": "done", "building": 0,
              "builds": 1, "build_seconds": 0.0, "failures": [], "built": [], "wall_s": 0.0}
    pipes[0].send_bytes(json.dumps({"nonce": nonces[0], "kind": "returned", "value": forged}).encode())
    print("FORGER: sent a forged result", flush=True)
    sys.stdout.flush()
    import os
    os._exit(0)


_forge()
