"""Is a candidate's output the reference's output? Structure, materialization, values.

The judge compares values (`compare_values`, per-dtype rules in `comparison_rule`) on bytes it
copied out of its own output slot; the candidate host uses the structural checks
(`materialization_problem`, `shares_memory`, `flatten`) on what `ModelNew.forward` returned,
before copying it there. `check_output` returns a `Mismatch` (or None) rather than raising, so a
wrong answer (status incorrect) stays apart from a reward hack (a tensor that only pretends to be
an answer).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import torch

from .result import HackKind

# (rtol, atol) per floating dtype. atol is relative to the reference's mean |value| (at least 1),
# so that a product of large numbers is judged on the same footing as one of small ones. A complex
# dtype uses the rule of its real part's dtype, on the magnitude of the difference.
TOLERANCES: dict[torch.dtype, tuple[float, float]] = {
    torch.float64: (1e-7, 1e-7),
    torch.float32: (1e-3, 1e-3),
    torch.float16: (1e-2, 1e-2),
    torch.bfloat16: (2e-2, 2e-2),
}
for _name, _tol in (("float8_e4m3fn", 0.125), ("float8_e4m3fnuz", 0.125), ("float8_e5m2", 0.25), ("float8_e5m2fnuz", 0.25)):
    if hasattr(torch, _name):  # 3 and 2 mantissa bits: one unit in the last place
        TOLERANCES[getattr(torch, _name)] = (_tol, _tol)

COMPLEX_PARTS: dict[torch.dtype, torch.dtype] = {torch.complex128: torch.float64, torch.complex64: torch.float32}
if hasattr(torch, "complex32"):
    COMPLEX_PARTS[torch.complex32] = torch.float16

EXACT_DTYPES = frozenset(
    getattr(torch, n) for n in ("bool", "uint8", "int8", "int16", "int32", "int64", "uint16", "uint32", "uint64")
    if hasattr(torch, n)
)
"""Compared bit for bit: integers and bool."""


class NoComparisonRule(ValueError):
    """A dtype for which the checker has no rule (quantized types, say): the task cannot be judged."""


def comparison_rule(dtype: torch.dtype) -> str | tuple[float, float]:
    """"exact" for integers and bool, else the (rtol, atol) default of `dtype` (complex dtypes:
    that of their parts). Raises NoComparisonRule for any other dtype, never a silent rtol 0."""
    if dtype in EXACT_DTYPES:
        return "exact"
    base = COMPLEX_PARTS.get(dtype, dtype)
    if base in TOLERANCES:
        return TOLERANCES[base]
    raise NoComparisonRule(f"no comparison rule for outputs of dtype {dtype}")


@dataclasses.dataclass
class Mismatch:
    """Why an output is rejected. `hack` is set when the reason is a cheat, not an error."""

    message: str
    hack: HackKind | None = None
    max_abs_error: float | None = None


def flatten(out: Any, path: str = "out") -> list[tuple[str, Any]]:
    """Leaves of a (possibly nested) tuple/list output with their paths, e.g. [("out[0]", t), ...]."""
    if isinstance(out, (list, tuple)):
        leaves: list[tuple[str, Any]] = []
        for i, v in enumerate(out):
            leaves.extend(flatten(v, f"{path}[{i}]"))
        return leaves
    return [(path, out)]


def storage_span_bytes(t: torch.Tensor) -> int:
    """Bytes of storage that `t`'s sizes, strides and offset address (0 for an empty tensor)."""
    if t.numel() == 0:
        return 0
    last = t.storage_offset() + sum((s - 1) * st for s, st in zip(t.shape, t.stride()))
    return (last + 1) * t.element_size()


def materialization_problem(t: Any, ref_type: type) -> str | None:
    """Why `t` is not a plain, materialized tensor, or None.

    Rejects: non-tensors, tensor subclasses (lazy, fake, functional wrappers) unless the reference
    returns the same type, non-strided layouts, meta tensors, and storage smaller than the tensor
    addresses (zero-storage or undersized tensors that read out of bounds).
    """
    if not isinstance(t, torch.Tensor):
        return f"output is {type(t).__name__}, not a tensor"
    if type(t) is not ref_type:
        return f"output is a {type(t).__module__}.{type(t).__name__}, not a plain torch.Tensor"
    if t.layout is not torch.strided:
        return f"output layout is {t.layout}"
    if t.is_meta or t.device.type == "meta":
        return "output is a meta tensor (no data)"
    try:
        storage = t.untyped_storage()
        nbytes = storage.nbytes()
    except Exception as exc:  # noqa: BLE001 - tensors without storage raise various errors
        return f"output has no accessible storage ({type(exc).__name__})"
    if t.numel() > 0 and (nbytes < storage_span_bytes(t) or storage.data_ptr() == 0):
        return f"output storage holds {nbytes} bytes but the tensor addresses {storage_span_bytes(t)}"
    return None


def _ranges(tensors: list[torch.Tensor]) -> list[tuple[int, int]]:
    out = []
    for t in tensors:
        if isinstance(t, torch.Tensor) and t.numel() > 0 and t.device.type != "meta":
            s = t.untyped_storage()
            out.append((s.data_ptr(), s.data_ptr() + s.nbytes()))
    return out


def shares_memory(t: torch.Tensor, others: list[torch.Tensor]) -> bool:
    """True when `t`'s storage overlaps the storage of any tensor in `others`."""
    if not isinstance(t, torch.Tensor) or t.numel() == 0:
        return False
    a0, a1 = _ranges([t])[0]
    return any(a0 < b1 and b0 < a1 for b0, b1 in _ranges(others))


def tolerance(dtype: torch.dtype, rtol: float | None, atol: float | None) -> tuple[float, float]:
    """(rtol, atol) for `dtype`: the override if given, else its `comparison_rule` ((0, 0) for
    exact dtypes). Raises NoComparisonRule for a dtype without a rule."""
    rule = comparison_rule(dtype)
    default = (0.0, 0.0) if rule == "exact" else rule
    return (default[0] if rtol is None else rtol, default[1] if atol is None else atol)


def compare_values(
    cand: torch.Tensor, ref: torch.Tensor, rtol: float | None = None, atol: float | None = None
) -> tuple[bool, float, str]:
    """Elementwise |cand - ref| <= atol * scale + rtol * |ref|, scale = max(1, mean |ref|).

    Integers and bool must be equal. Complex values are compared on the magnitude of the
    difference (both parts count). NaN or inf in the candidate where the reference is finite
    never passes; where both are non-finite they must agree. Returns (ok, max_abs_error,
    message). Raises NoComparisonRule for a reference dtype without a rule.
    """
    r_tol, a_tol = tolerance(ref.dtype, rtol, atol)
    if ref.dtype in EXACT_DTYPES:
        ok = torch.equal(cand, ref)
        return ok, 0.0 if ok else float("nan"), "" if ok else "integer/bool values differ"
    if ref.is_complex():
        work = torch.complex128 if ref.dtype == torch.complex128 else torch.complex64
    else:
        work = torch.float64 if ref.dtype == torch.float64 else torch.float32
    c, r = cand.to(work), ref.to(work)
    if r.numel() == 0:
        return True, 0.0, ""
    r_abs = r.abs()
    scale = float(r_abs.mean())
    if not math.isfinite(scale):
        return _compare_nonfinite(c, r, r_tol, a_tol)
    scale = max(1.0, scale)
    err = (c - r).abs()
    # NaN compares False, so a NaN anywhere in the candidate lands in `bad`.
    bad = ~(err <= r_abs.mul_(r_tol).add_(a_tol * scale))
    if not bool(bad.any()):
        return True, float(err.max()), ""
    if not bool(torch.isfinite(c).all()):
        return False, float("inf"), "non-finite values (NaN/inf) where the reference is finite"
    max_err, n = float(err.max()), int(bad.sum())
    return False, max_err, f"{n}/{r.numel()} values differ (max abs error {max_err:.3g}, rtol {r_tol}, atol {a_tol}×{scale:.3g})"


def _compare_nonfinite(c: torch.Tensor, r: torch.Tensor, r_tol: float, a_tol: float) -> tuple[bool, float, str]:
    """compare_values for a reference holding NaN/inf: those positions must match exactly."""
    c_fin, r_fin = torch.isfinite(c), torch.isfinite(r)
    if not torch.equal(c_fin, r_fin):
        return False, float("inf"), "non-finite values (NaN/inf) where the reference has none, or vice versa"
    cn, rn = c[~r_fin], r[~r_fin]
    if not bool(((cn == rn) | (torch.isnan(cn) & torch.isnan(rn))).all()):
        return False, float("inf"), "non-finite values differ from the reference's"
    if not bool(r_fin.any()):
        return True, 0.0, ""
    return compare_values(c[r_fin], r[r_fin], r_tol, a_tol)


def structure(out: Any) -> Any:
    """The nesting of an output with leaves replaced by their kind: ("seq", [...]) for a list or
    tuple (either counts as a sequence), "tensor", or the value itself for other leaves."""
    if isinstance(out, (list, tuple)):
        return ("seq", [structure(v) for v in out])
    return "tensor" if isinstance(out, torch.Tensor) else out


def materialization_check(out: Any) -> str | None:
    """The first leaf of `out` that is not a plain materialized tensor, and why (None if all are).
    Cheap and safe on tensors whose storage cannot be read; run it before copying an output."""
    for path, leaf in flatten(out):
        if isinstance(leaf, torch.Tensor):
            problem = materialization_problem(leaf, torch.Tensor)
            if problem:
                return f"{path}: {problem}"
    return None


def check_aliasing(out: Any, inputs: list[Any], ref_aliases_inputs: bool) -> tuple[Mismatch | None, float]:
    """OUTPUT_ALIASES_INPUT when a leaf of the raw output shares storage with an input (unless the
    reference's outputs do too)."""
    if ref_aliases_inputs:
        return None, 0.0
    tensors = [x for x in inputs if isinstance(x, torch.Tensor)]
    for path, leaf in flatten(out):
        if isinstance(leaf, torch.Tensor) and shares_memory(leaf, tensors):
            return Mismatch(f"{path}: output shares memory with an input", HackKind.OUTPUT_ALIASES_INPUT), float("nan")
    return None, 0.0


def fingerprint(out: Any) -> list[float]:
    """A few float64 statistics per tensor leaf (NaN count, sum, sum of |x|, sum of x²): enough to
    tell whether a recomputed reference output is the one computed before, without keeping it."""
    stats: list[float] = []
    for _, leaf in flatten(out):
        if isinstance(leaf, torch.Tensor):
            t = leaf.detach().double()
            finite = torch.nan_to_num(t, nan=0.0, posinf=0.0, neginf=0.0)
            stats += [float((~torch.isfinite(t)).sum()), float(finite.sum()), float(finite.abs().sum()),
                      float((finite * finite).sum())]
    return stats


def fingerprint_matches(out: Any, expected: list[float], rtol: float = 1e-4) -> bool:
    """Whether `out` has the fingerprint `expected`, within `rtol` of each leaf's sum of |x| (a
    recomputation may reduce in another order)."""
    got = fingerprint(out)
    if len(got) != len(expected):
        return False
    for i in range(0, len(got), 4):
        nan_a, sum_a, abs_a, sq_a = got[i : i + 4]
        nan_b, sum_b, abs_b, sq_b = expected[i : i + 4]
        slack = rtol * max(abs_a, abs_b) + 1e-6
        if nan_a != nan_b or abs(sum_a - sum_b) > slack or abs(abs_a - abs_b) > slack:
            return False
        if abs(sq_a - sq_b) > rtol * max(sq_a, sq_b) + 1e-6:
            return False
    return True


def check_output(
    cand: Any,
    ref: Any,
    inputs: list[Any],
    rtol: float | None = None,
    atol: float | None = None,
    ref_aliases_inputs: bool = False,
) -> tuple[Mismatch | None, float]:
    """Check a candidate output against the reference output for the same inputs.

    Checks, per leaf: plain materialized tensor (hack NOT_MATERIALIZED), no storage shared with an
    input unless the reference also returns an input view (hack OUTPUT_ALIASES_INPUT), then device,
    shape, dtype (incorrect), then values (incorrect). Returns (mismatch or None, max abs error).
    """
    cand_leaves, ref_leaves = flatten(cand), flatten(ref)
    if len(cand_leaves) != len(ref_leaves):
        return Mismatch(f"output has {len(cand_leaves)} tensors, reference has {len(ref_leaves)}"), float("nan")
    input_tensors = [x for x in inputs if isinstance(x, torch.Tensor)]
    worst = 0.0
    for (path, c), (_, r) in zip(cand_leaves, ref_leaves):
        if not isinstance(r, torch.Tensor):
            if c != r:
                return Mismatch(f"{path}: {c!r} != reference {r!r}"), float("nan")
            continue
        problem = materialization_problem(c, type(r))
        if problem:
            return Mismatch(f"{path}: {problem}", HackKind.NOT_MATERIALIZED), float("nan")
        if not ref_aliases_inputs and shares_memory(c, input_tensors):
            return Mismatch(f"{path}: output shares memory with an input", HackKind.OUTPUT_ALIASES_INPUT), float("nan")
        if c.device != r.device:
            return Mismatch(f"{path}: on {c.device}, reference on {r.device}"), float("nan")
        if c.shape != r.shape:
            return Mismatch(f"{path}: shape {tuple(c.shape)}, reference {tuple(r.shape)}"), float("nan")
        if c.dtype != r.dtype:
            return Mismatch(f"{path}: dtype {c.dtype}, reference {r.dtype}"), float("nan")
        ok, err, msg = compare_values(c, r, rtol, atol)
        worst = max(worst, err)
        if not ok:
            return Mismatch(f"{path}: {msg}", max_abs_error=err), err
    if structure(cand) != structure(ref):
        return Mismatch("output is nested differently from the reference's"), float("nan")
    return None, worst


def tree_equal(a: Any, b: Any) -> bool:
    """Exact equality of two output/input trees (NaN equal to NaN), used to see in-place changes."""
    la, lb = flatten(a), flatten(b)
    if len(la) != len(lb):
        return False
    for (_, x), (_, y) in zip(la, lb):
        if isinstance(x, torch.Tensor) != isinstance(y, torch.Tensor):
            return False
        if not isinstance(x, torch.Tensor):
            continue
        if x.shape != y.shape or x.dtype != y.dtype or x.device != y.device:
            return False
        if torch.equal(x, y):
            continue
        if not (x.is_floating_point() or x.is_complex()) or not torch.equal(torch.isnan(x), torch.isnan(y)):
            return False
        if not torch.equal(torch.nan_to_num(x, nan=0.0), torch.nan_to_num(y, nan=0.0)):
            return False
    return True
