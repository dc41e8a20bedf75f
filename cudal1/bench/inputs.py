"""Fresh inputs for every trial and every timed call.

Inputs always come from the task's own `get_inputs()` (never the candidate's), seeded, and made
directly on the target device: `torch.device(device)` as a context makes the task's
`torch.randn(...)` calls allocate there, so fresh inputs cost a kernel launch, not a host copy.
"""

from __future__ import annotations

import types
from typing import Any

import torch


def make_inputs(task_module: types.ModuleType, seed: int, device: str) -> list[Any]:
    """Call `task_module.get_inputs()` under `torch.manual_seed(seed)` on `device`: the task's
    nominal distribution (`spread` moves it for the shifted and wide correctness trials). Tensors
    the task made elsewhere are moved to `device`. Returns a new list each call. Raises whatever
    get_inputs raises.
    """
    torch.manual_seed(seed)
    with torch.device(device):
        raw = task_module.get_inputs()
    return [x.to(device) if isinstance(x, torch.Tensor) else x for x in raw]


SPREAD_INT_DTYPES = frozenset({torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8})
"""Integer dtypes `spread` may move: not bool (a mask has no wider range), nor uint16/32/64
(torch implements few operators on them)."""


def spread(
    xs: list[Any],
    shift: tuple[float, float] | None = None,
    int_shift: tuple[int, int] | None = None,
) -> tuple[list[Any], int]:
    """`xs` with floating-point tensors mapped to x*scale + offset (`shift`) and integer tensors
    to x*scale + offset (`int_shift`, integers: the result keeps the tensor's dtype and device):
    trials on inputs so moved catch code that is only right on the task's nominal range (an
    activation that is the identity on [0,1), a softmax without its max subtraction).
    An integer tensor whose mapped values would leave its dtype's range (uint8 and int8 inputs,
    for the shifts the judge uses) is left as it is, as are bool tensors, complex tensors and
    anything else. Returns (a new list, how many tensors were moved). Raises nothing of its own."""
    out, moved = [], 0
    for x in xs:
        if isinstance(x, torch.Tensor):
            # One new tensor, shifted in place: `x * a + b` would hold a second temporary.
            if shift is not None and x.is_floating_point():
                x, moved = x.mul(shift[0]).add_(shift[1]), moved + 1
            elif int_shift is not None and x.dtype in SPREAD_INT_DTYPES and x.numel() and _fits(x, *int_shift):
                x, moved = x.mul(int_shift[0]).add_(int_shift[1]), moved + 1
        out.append(x)
    return out, moved


def _fits(x: torch.Tensor, scale: int, offset: int) -> bool:
    """Whether x*scale + offset stays inside the range of x's dtype (Python ints: no overflow here)."""
    info = torch.iinfo(x.dtype)
    ends = [int(x.min()) * scale + offset, int(x.max()) * scale + offset]
    return info.min <= min(ends) and max(ends) <= info.max


def make_input_sets(
    task_module: types.ModuleType,
    seed: int,
    device: str,
    n: int,
) -> list[list[Any]]:
    """`n` input sets: `task_module.get_inputs()` called `n` times in a row on `device` after one
    `torch.manual_seed(seed)`, so each set draws fresh values from where the last one left off
    (one seeding for a round's K sets instead of K). Tensors the task made elsewhere are moved
    to `device`. Raises whatever get_inputs raises."""
    torch.manual_seed(seed)
    sets = []
    with torch.device(device):
        for _ in range(n):
            sets.append([x.to(device) if isinstance(x, torch.Tensor) else x for x in task_module.get_inputs()])
    return sets


PERTURBED = frozenset({torch.float16, torch.bfloat16, torch.float32, torch.float64})
"""The input dtypes `rounding_perturbed` changes (float8 inputs are left alone)."""


def rounding_perturbed(x: list[Any]) -> list[Any] | None:
    """`x` with each float input (`PERTURBED`) multiplied by 1 + u, u uniform in ±2 epsilons of
    its dtype, drawn on its device from the current generator state: the inputs changed at the
    rounding level, to see how far an output moves with its own rounding noise. None when `x`
    has no such input. Other inputs are passed through, not copied."""
    if not any(isinstance(t, torch.Tensor) and t.dtype in PERTURBED for t in x):
        return None
    # In place on one fresh tensor per input: no full-size temporaries beyond it (inputs reach GiBs).
    return [
        torch.rand_like(t).mul_(2).sub_(1).mul_(2 * torch.finfo(t.dtype).eps).add_(1).mul_(t)
        if isinstance(t, torch.Tensor) and t.dtype in PERTURBED
        else t
        for t in x
    ]


def make_init_inputs(task_module: types.ModuleType) -> list[Any]:
    """The constructor arguments, from the task (never from the candidate)."""
    return list(task_module.get_init_inputs())


def clone_tree(x: Any) -> Any:
    """Deep copy of tensors inside lists/tuples/dicts (other values are kept as they are)."""
    if isinstance(x, torch.Tensor):
        return x.detach().clone()
    if isinstance(x, (list, tuple)):
        return type(x)(clone_tree(v) for v in x)
    if isinstance(x, dict):
        return {k: clone_tree(v) for k, v in x.items()}
    return x


def to_device_tree(x: Any, device: str) -> Any:
    """Move tensors inside lists/tuples/dicts to `device`."""
    if isinstance(x, torch.Tensor):
        return x.to(device)
    if isinstance(x, (list, tuple)):
        return type(x)(to_device_tree(v, device) for v in x)
    if isinstance(x, dict):
        return {k: to_device_tree(v, device) for k, v in x.items()}
    return x
