"""Raises __KIND__ __WHERE__ (at import, in ModelNew(), in forward, or in forward only while a
dispatch mode records it): none of them may become the harness's failure.

Kinds: system_exit (SystemExit), keyboard_interrupt (KeyboardInterrupt), generator_exit
(GeneratorExit), base_exception (a BaseException subclass of its own), unprintable (an exception
whose str() and repr() raise), surrogate (a RuntimeError whose message holds a lone surrogate,
text no UTF-8 encoder accepts), unicode (a RuntimeError with ordinary non-ASCII text: the
control)."""
import torch
import torch.nn as nn
from torch.utils._python_dispatch import _get_current_dispatch_mode

KIND = "__KIND__"
WHERE = "__WHERE__"


class Boom(BaseException):
    pass


class Unprintable(RuntimeError):
    def __str__(self):
        raise ValueError("no text for you")

    def __repr__(self):
        raise ValueError("no text for you")


def boom():
    if KIND == "system_exit":
        raise SystemExit(0)
    if KIND == "keyboard_interrupt":
        raise KeyboardInterrupt
    if KIND == "generator_exit":
        raise GeneratorExit
    if KIND == "base_exception":
        raise Boom("a BaseException of its own")
    if KIND == "unprintable":
        raise Unprintable()
    if KIND == "surrogate":
        raise RuntimeError("broken text \ud800 here")
    if KIND == "unicode":
        raise RuntimeError("résumé ✓")
    raise AssertionError(KIND)


if WHERE == "import":
    boom()


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        if WHERE == "init":
            boom()

    def forward(self, a, b):
        if WHERE == "forward" or (WHERE == "recorded" and _get_current_dispatch_mode() is not None):
            boom()
        return torch.matmul(a, b).relu()
