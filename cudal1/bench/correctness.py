"""Is a candidate's output the reference's output? Structure, materialization, values.

The judge compares values (`compare_values`, per-dtype rules in `comparison_rule`) on bytes it
copied out of the candidate's memory; the candidate host uses the structural checks
(`materialization_problem`, `shares_memory`, `flatten`) on what `ModelNew.forward` returned.
A nested output is described by `output_tree` (the judge, on the reference's: every leaf a
tensor or a plain value with a rule, else the task cannot be judged) and read along that tree by
`match_output` (the host, on the candidate's: its tensor leaves are the ones the judge reads, its
plain values travel encoded by `encode_value` and are compared by `compare_value`). `check_output` returns a `Mismatch` (or None) rather than raising, so a
wrong answer (status incorrect) stays apart from a reward hack (a tensor that only pretends to be
an answer).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import torch

from .result import HackKind

# (rtol, atol) per floating dtype. atol is relative to the reference's mean |value| (`compare_values`'s
# scale), so that a product of large numbers is judged on the same footing as one of small ones. A
# complex dtype uses the rule of its real part's dtype, on the magnitude of the difference.
TOLERANCES: dict[torch.dtype, tuple[float, float]] = {
    torch.float64: (1e-7, 1e-7),
    torch.float32: (1e-3, 1e-3),
    torch.float16: (1e-2, 1e-2),
    torch.bfloat16: (2e-2, 2e-2),
}
for _name, _tol in (
    ("float8_e4m3fn", 0.125),
    ("float8_e4m3fnuz", 0.125),
    ("float8_e5m2", 0.25),
    ("float8_e5m2fnuz", 0.25),
):
    if hasattr(torch, _name):  # 3 and 2 mantissa bits: one unit in the last place
        TOLERANCES[getattr(torch, _name)] = (_tol, _tol)

COMPLEX_PARTS: dict[torch.dtype, torch.dtype] = {torch.complex128: torch.float64, torch.complex64: torch.float32}
if hasattr(torch, "complex32"):
    COMPLEX_PARTS[torch.complex32] = torch.float16

EXACT_DTYPES = frozenset(
    getattr(torch, n)
    for n in ("bool", "uint8", "int8", "int16", "int32", "int64", "uint16", "uint32", "uint64")
    if hasattr(torch, n)
)
"""Compared bit for bit: integers and bool."""


class NoComparisonRule(ValueError):
    """A dtype for which the checker has no rule (quantized types, say): the task cannot be judged."""


def comparison_rule(dtype: torch.dtype) -> str | tuple[float, float]:
    """ "exact" for integers and bool, else the (rtol, atol) default of `dtype` (complex dtypes:
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
    """Leaves of a (possibly nested) tuple/list/dict output with their paths, e.g. [("out[0]", t),
    ("out['k']", u), ...] (a dict's values in its order). Any other object is a leaf."""
    if isinstance(out, (list, tuple)):
        leaves: list[tuple[str, Any]] = []
        for i, v in enumerate(out):
            leaves.extend(flatten(v, f"{path}[{i}]"))
        return leaves
    if isinstance(out, dict):
        return [leaf for k, v in out.items() for leaf in flatten(v, f"{path}[{k!r}]")]
    return [(path, out)]


# -- the structure of an output, and its non-tensor values ------------------------------------

MAX_OUTPUT_LEAVES = 256
"""Leaves (tensors and values) an output may have; more is a task the judge does not judge."""
MAX_OUTPUT_DEPTH = 16
MAX_STR_CHARS = 1000
"""Longest string an output may hold (it travels in every call's answer)."""
FLOAT_VALUE_DTYPE = torch.float32
"""A Python float in an output is compared with this dtype's tolerance: such floats almost always
come from `.item()` of a float32 tensor, where float64's tolerance would fail honest rewrites."""
VALUE_KINDS = {type(None): "none", bool: "bool", int: "int", float: "float", str: "str"}
"""Non-tensor leaves with a rule, by exact type (a subclass, numpy scalars included, has none)."""
_NON_FINITE = ("nan", "inf", "-inf")


class StructureMismatch(ValueError):
    """A candidate's output is not built like the reference's (keys, lengths, container or leaf
    types): a wrong answer, not a harness failure."""


def output_tree(out: Any) -> tuple[dict[str, Any], list[tuple[str, torch.Tensor]], list[tuple[str, Any]]]:
    """The structure of a reference output, as JSON, with its leaves in order.

    Returns (tree, tensors, values): `tree` is {"tensor": i} (the i-th tensor leaf), {"value": j,
    "kind": "none"|"bool"|"int"|"float"|"str"} (the j-th non-tensor leaf), {"list": [...]},
    {"tuple": [...]}, {"named": type name, "fields": [...], "items": [...]} (a namedtuple, or a
    torch.return_types structseq: the name includes the module there) or {"dict": [[key,
    subtree], ...]} (keys str or int, in the dict's order); `tensors` is [(path, tensor)] and
    `values` [(path, `encode_value(v)`)] in tree order. Raises NoComparisonRule (the task cannot
    be judged) for any other type (a set, a torch.Size, a custom object, a tensor subclass is
    still a tensor here), a dict key that is not str or int, an int beyond 64 bits, a string over
    `MAX_STR_CHARS`, more than `MAX_OUTPUT_LEAVES` leaves or nesting deeper than
    `MAX_OUTPUT_DEPTH`."""
    # A module-level walk, not a closure: a recursive closure is a reference cycle that would hold
    # every tensor leaf until the cyclic garbage collector runs (one leaked output per call).
    tensors: list[tuple[str, torch.Tensor]] = []
    values: list[tuple[str, Any]] = []
    tree = _tree_of(out, "out", 0, tensors, values)
    return tree, tensors, values


def _tree_of(
    x: Any, path: str, depth: int, tensors: list[tuple[str, torch.Tensor]], values: list[tuple[str, Any]]
) -> dict[str, Any]:
    """`output_tree`'s walk: the subtree of `x`, its leaves appended to `tensors` and `values`."""
    if depth > MAX_OUTPUT_DEPTH:
        raise NoComparisonRule(f"{path}: the output is nested deeper than {MAX_OUTPUT_DEPTH} levels")
    if len(tensors) + len(values) >= MAX_OUTPUT_LEAVES:
        raise NoComparisonRule(f"the output has more than {MAX_OUTPUT_LEAVES} leaves")
    if isinstance(x, torch.Tensor):
        tensors.append((path, x))
        return {"tensor": len(tensors) - 1}
    kind = VALUE_KINDS.get(type(x))
    if kind is not None:
        try:
            encoded = encode_value(x)
        except ValueError as exc:
            raise NoComparisonRule(f"{path}: {exc}") from exc
        values.append((path, encoded))
        return {"value": len(values) - 1, "kind": kind}
    container = _container(x)
    if container is None:
        raise NoComparisonRule(f"{path}: no comparison rule for an output of type {_type_name(x)}")
    if container == "dict":
        for key in x:
            if type(key) not in (str, int):
                raise NoComparisonRule(
                    f"{path}: a dict key of type {_type_name(key)} (only str and int keys are judged)"
                )
        return {"dict": [[k, _tree_of(v, f"{path}[{k!r}]", depth + 1, tensors, values)] for k, v in x.items()]}
    items = [_tree_of(v, f"{path}[{i}]", depth + 1, tensors, values) for i, v in enumerate(x)]
    if container == "named":
        return {"named": _named_type(x), "fields": list(_fields(x)), "items": items}
    return {container: items}


def match_output(out: Any, tree: dict[str, Any]) -> tuple[list[tuple[str, Any]], list[tuple[str, Any]]]:
    """A candidate's output read along the reference's `tree` (`output_tree`): ([(path, tensor
    leaf)], [(path, `encode_value` of a value leaf)]) in tree order. Containers must be of the
    same kind (a list is not a tuple; a namedtuple has the reference's type name and fields), a
    dict has exactly the reference's keys (order aside), a sequence its length, a value leaf its
    exact type. Where the reference has a tensor, anything but a container or a plain value is
    returned as the tensor leaf (whether it is a plain materialized tensor, not a subclass or an
    object posing as one, is the caller's check). Raises StructureMismatch naming the first
    difference."""
    tensors: list[tuple[str, Any]] = []
    values: list[tuple[str, Any]] = []
    _match(out, tree, "out", tensors, values)  # module-level, as `output_tree`'s walk (no cycle)
    return tensors, values


def _match(
    x: Any, node: dict[str, Any], path: str, tensors: list[tuple[str, Any]], values: list[tuple[str, Any]]
) -> None:
    """`match_output`'s walk: checks `x` against `node`, its leaves appended to `tensors` and `values`."""
    if "tensor" in node:
        # Anything but a container or a plain value goes to the caller's materialization check,
        # which tells a tensor from an object that only poses as one (a hack, not an error).
        if not isinstance(x, torch.Tensor) and (_container(x) is not None or type(x) in VALUE_KINDS):
            raise StructureMismatch(f"{path}: a {_type_name(x)}, the reference has a tensor")
        tensors.append((path, x))
        return
    if "value" in node:
        kind = VALUE_KINDS.get(type(x))
        if kind != node["kind"]:
            raise StructureMismatch(f"{path}: a {_type_name(x)}, the reference has a {node['kind']}")
        try:
            values.append((path, encode_value(x)))
        except ValueError as exc:
            raise StructureMismatch(f"{path}: {exc}") from exc
        return
    container = _container(x)
    want = next(k for k in ("list", "tuple", "named", "dict") if k in node)
    if container != want:
        raise StructureMismatch(f"{path}: a {_type_name(x)}, the reference has a {_kind_name(node)}")
    if want == "dict":
        keys = [k for k, _ in node["dict"]]
        if len(x) != len(keys) or any(k not in x or type(next(j for j in x if j == k)) is not type(k) for k in keys):
            raise StructureMismatch(f"{path}: keys {_keys(list(x))}, the reference's {_keys(keys)}")
        for k, child in node["dict"]:
            _match(x[k], child, f"{path}[{k!r}]", tensors, values)
        return
    if want == "named" and (_named_type(x) != node["named"] or list(_fields(x)) != node["fields"]):
        raise StructureMismatch(
            f"{path}: a {_named_type(x)}{tuple(_fields(x))}, the reference a {node['named']}{tuple(node['fields'])}"
        )
    items = node["items"] if want == "named" else node[want]
    if len(x) != len(items):
        raise StructureMismatch(f"{path}: {len(x)} items, the reference {len(items)}")
    for i, (v, child) in enumerate(zip(x, items)):
        _match(v, child, f"{path}[{i}]", tensors, values)


def encode_value(value: Any) -> Any:
    """A non-tensor leaf as JSON: None, a bool, an int (within 64 bits), a float (non-finite ones
    as "nan", "inf", "-inf") or a str (at most `MAX_STR_CHARS`). Raises ValueError beyond those
    bounds."""
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        if not -(2**63) <= value < 2**64:
            raise ValueError("an int beyond 64 bits")
        return int(value)
    if isinstance(value, float):
        return float(value) if math.isfinite(value) else repr(float(value))
    if isinstance(value, str):
        if len(value) > MAX_STR_CHARS:
            raise ValueError(f"a string of {len(value)} characters (at most {MAX_STR_CHARS} are judged)")
        return str(value)
    raise ValueError(f"no rule for a {_type_name(value)}")


def compare_value(kind: str, got: Any, want: Any, rtol: float | None = None, atol: float | None = None) -> str | None:
    """Why the encoded non-tensor leaf `got` (from the candidate's process: any JSON) differs from
    the reference's `want` of kind `kind` (`VALUE_KINDS`), or None. None, bools, ints and
    strings must be equal and of the same JSON type; floats are compared as `compare_values`
    compares a float32 tensor (`FLOAT_VALUE_DTYPE`; `rtol`/`atol` override), NaN and infinities
    only with themselves."""
    if kind == "float":
        g, w = _float_of(got), _float_of(want)
        if g is None:
            return f"{str(got)[:60]} is not a float"
        rule = comparison_rule(FLOAT_VALUE_DTYPE)
        ok, _, _ = compare_values(
            torch.tensor([g], dtype=torch.float64),
            torch.tensor([w], dtype=torch.float64),
            rule[0] if rtol is None else rtol,
            rule[1] if atol is None else atol,
        )
        return None if ok else f"{g!r} != reference {w!r}"
    if type(got) is not type(want) or got != want:
        return f"{str(got)[:60]} != reference {str(want)[:60]}"
    return None


def _float_of(encoded: Any) -> float | None:
    if isinstance(encoded, bool):
        return None
    if isinstance(encoded, (int, float)):
        return float(encoded)
    if encoded in _NON_FINITE:
        return float(encoded)
    return None


def _container(x: Any) -> str | None:
    """ "list", "tuple", "named", "dict" for the container types with a rule, else None."""
    t = type(x)
    if t is list:
        return "list"
    if t is tuple:
        return "tuple"
    if t is dict:
        return "dict"
    if isinstance(x, tuple) and _fields(x) is not None:
        return "named"
    return None


def _fields(x: Any) -> tuple[str, ...] | None:
    """The field names of a namedtuple or a structseq (torch.return_types), else None."""
    fields = getattr(type(x), "_fields", None)
    if fields is None and hasattr(type(x), "n_sequence_fields"):
        fields = getattr(type(x), "__match_args__", None)
    if isinstance(fields, tuple) and all(type(f) is str for f in fields) and len(fields) == len(x):
        return fields
    return None


def _named_type(x: Any) -> str:
    """A namedtuple's class name (the candidate defines its own class, in its own module); a
    structseq's module and name (torch.return_types.max)."""
    t = type(x)
    return f"{t.__module__}.{t.__qualname__}" if hasattr(t, "n_sequence_fields") else t.__name__


def _type_name(x: Any) -> str:
    t = type(x)
    return t.__qualname__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__qualname__}"


def _kind_name(node: dict[str, Any]) -> str:
    if "named" in node:
        return f"{node['named']}{tuple(node['fields'])}"
    return next(k for k in ("list", "tuple", "dict") if k in node)


def _keys(keys: list[Any]) -> str:
    text = ", ".join(repr(k) for k in keys[:8])
    return f"[{text}{', ...' if len(keys) > 8 else ''}]"


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
    cand: torch.Tensor,
    ref: torch.Tensor,
    rtol: float | None = None,
    atol: float | None = None,
    scale_floor: float = 1.0,
) -> tuple[bool, float, str]:
    """Elementwise |cand - ref| <= atol * scale + rtol * |ref|, scale = max(scale_floor, mean |ref|).

    `scale_floor` 1.0 (the default) forgives atol absolute on outputs of magnitude below 1; the
    judge passes the floor its reference's own rounding noise asks for (`noise_scale_floor`, at
    most 1.0), so that an output of magnitude 1e-4 is held to its magnitude and not to 1.
    Integers and bool must be equal. Complex values are compared on the magnitude of the
    difference (both parts count). NaN or inf in the candidate where the reference is finite
    never passes; where both are non-finite they must agree; another shape never passes.
    Works a `SHARE_CHUNK` of elements at a time (its extra memory is a few chunks). Returns (ok,
    max_abs_error, message). Raises NoComparisonRule for a reference dtype without a rule.
    """
    r_tol, a_tol = tolerance(ref.dtype, rtol, atol)
    if ref.dtype in EXACT_DTYPES:
        ok = torch.equal(cand, ref)
        return ok, 0.0 if ok else float("nan"), "" if ok else "integer/bool values differ"
    if ref.is_complex():
        work = torch.complex128 if ref.dtype == torch.complex128 else torch.complex64
    else:
        work = torch.float64 if ref.dtype == torch.float64 else torch.float32
    if cand.shape != ref.shape:
        return False, float("inf"), f"shape {tuple(cand.shape)} where the reference's is {tuple(ref.shape)}"
    if ref.numel() == 0:
        return True, 0.0, ""
    # A `SHARE_CHUNK` at a time: whole-output temporaries would take several copies of an
    # output that reaches 6 GiB on KernelBench (an 80 GB card ran out of memory).
    pairs = list(zip(_flat_chunks(cand), _flat_chunks(ref)))
    total = sum(float(r.to(work).abs().sum(dtype=torch.float64)) for _, r in pairs)
    if not math.isfinite(total):
        return _compare_nonfinite(cand.to(work), ref.to(work), r_tol, a_tol, scale_floor)
    scale = max(scale_floor, total / ref.numel())
    max_err, n = 0.0, 0
    for c, r in pairs:
        c, r = c.to(work), r.to(work)
        err = (c - r).abs()
        # NaN compares False, so a NaN anywhere in the candidate lands in `bad`.
        bad = ~(err <= r.abs().mul_(r_tol).add_(a_tol * scale))
        n += int(bad.sum())
        max_err = max(max_err, float(err.nan_to_num(nan=math.inf).max()))
    if n == 0:
        return True, max_err, ""
    if not all(bool(torch.isfinite(c).all()) for c, _ in pairs):
        return False, float("inf"), "non-finite values (NaN/inf) where the reference is finite"
    return (
        False,
        max_err,
        f"{n}/{ref.numel()} values differ (max abs error {max_err:.3g}, rtol {r_tol}, atol {a_tol}×{scale:.3g})",
    )


NOISE_FACTOR = 20.0
"""`noise_scale_floor`: the absolute allowance is at least this many times how far the reference's
output moves when its float inputs change at the rounding level. Checked on the H200 against every
KernelBench level 1-3 task's float64 answer (`scripts/gpu_tolerance_audit.py`, docs/benchmarks.md)."""


def noise_scale_floor(moved: torch.Tensor, ref: torch.Tensor, atol: float | None = None) -> float:
    """The `scale_floor` of `compare_values` for one output leaf: NOISE_FACTOR times the largest
    |moved - ref| (the reference's output on inputs changed at the rounding level, against its
    output on the inputs themselves), over the dtype's atol, clamped to [smallest normal of the
    dtype, 1.0]. An output whose magnitude comes from cancellation (a mean of normalized values:
    1e-8 where the terms are 1) moves by its own magnitude and keeps an allowance at its noise;
    a well-conditioned output of magnitude 1e-4 (a softmax over 4096 columns) moves by 1e-11 and
    is held to 1e-3 of its own magnitude. 1.0 (the old allowance) when the leaf is not floating
    point or complex, or when `moved` is not finite where `ref` is. Raises NoComparisonRule for a
    dtype without a rule."""
    if ref.dtype in EXACT_DTYPES or not (ref.is_floating_point() or ref.is_complex()):
        return 1.0
    _, a_tol = tolerance(ref.dtype, None, atol)
    if moved.shape != ref.shape or a_tol <= 0 or ref.numel() == 0:
        return 1.0
    work = torch.complex128 if ref.is_complex() else torch.float64
    noise, any_finite = 0.0, False
    # A `SHARE_CHUNK` at a time, and no boolean-mask indexing: on a 4096x393216 output the mask's
    # index alone took 24 GiB.
    for m, r in zip(_flat_chunks(moved), _flat_chunks(ref)):
        fin = torch.isfinite(r)
        m, r = m.to(work), r.to(work)
        if bool((fin & ~torch.isfinite(m)).any()):
            return 1.0
        any_finite = any_finite or bool(fin.any())
        noise = max(noise, float(torch.where(fin, (m - r).abs(), 0.0).max()))
    if not any_finite:
        return 1.0
    real = COMPLEX_PARTS.get(ref.dtype, ref.dtype)
    return min(1.0, max(NOISE_FACTOR * noise / a_tol, torch.finfo(real).tiny))


SHARE_CHUNK = 1 << 24
"""Elements `compare_values`, `noise_scale_floor`, `share_of_tolerance`, `max_abs_diff` and
`max_abs` take at a time (16 Mi: 128 MiB in float64)."""


def _flat_chunks(t: torch.Tensor) -> list[torch.Tensor]:
    """`t` flattened, in views of at most `SHARE_CHUNK` elements (read at call time)."""
    flat = t.reshape(-1)
    return [flat[i : i + SHARE_CHUNK] for i in range(0, flat.numel(), SHARE_CHUNK)]


def _wide(t: torch.Tensor) -> torch.Tensor:
    return t.to(torch.complex128 if t.is_complex() else torch.float64)


def max_abs_diff(x: torch.Tensor, y: torch.Tensor) -> float:
    """max |x - y| over all elements (same shape), in float64 (complex128) a `SHARE_CHUNK` at a
    time; a NaN counts as infinite; 0.0 when empty."""
    worst = 0.0
    for cx, cy in zip(_flat_chunks(x), _flat_chunks(y)):
        worst = max(worst, float((_wide(cx) - _wide(cy)).abs().nan_to_num(nan=math.inf).max()))
    return worst


def max_abs(x: torch.Tensor) -> float:
    """max |x| over the finite elements, in float64 (complex128) a `SHARE_CHUNK` at a time; 0.0
    when empty."""
    worst = 0.0
    for c in _flat_chunks(x):
        worst = max(worst, float(_wide(c).abs().nan_to_num(nan=0.0, posinf=0.0).max()))
    return worst


def share_of_tolerance(
    cand: torch.Tensor,
    ref: torch.Tensor,
    rtol: float | None = None,
    atol: float | None = None,
    chunk: int = SHARE_CHUNK,
    scale_floor: float = 1.0,
) -> float:
    """The largest |cand - ref| / (atol * scale + rtol * |ref|) over the elements, scale =
    max(scale_floor, mean |finite ref|): how much of `compare_values`'s allowance a difference
    takes (1 = at the limit). Integers and bool: 0 when equal, else inf; non-finite positions that differ: inf.

    Works through `chunk` elements at a time in float64 (complex128), so its extra memory is a few
    chunks, not a few float64 copies of the output (KernelBench outputs reach 6 GiB in float32).
    Raises NoComparisonRule for a reference dtype without a rule, ValueError for chunk < 1."""
    if chunk < 1:
        raise ValueError(f"chunk must be >= 1, got {chunk}")
    r_tol, a_tol = tolerance(ref.dtype, rtol, atol)
    if ref.dtype in EXACT_DTYPES:
        return 0.0 if torch.equal(cand, ref) else math.inf
    if ref.numel() == 0:
        return 0.0
    work = torch.complex128 if ref.is_complex() else torch.float64
    c_all, r_all = cand.reshape(-1), ref.reshape(-1)
    spans = [(i, min(i + chunk, r_all.numel())) for i in range(0, r_all.numel(), chunk)]
    total, count = 0.0, 0
    for a, b in spans:
        r = r_all[a:b].to(work)
        fin = torch.isfinite(r)
        total += float(r[fin].abs().sum())
        count += int(fin.sum())
    scale = max(scale_floor, total / count) if count else scale_floor
    worst = 0.0
    for a, b in spans:
        c, r = c_all[a:b].to(work), r_all[a:b].to(work)
        fin = torch.isfinite(r)
        if not torch.equal(fin, torch.isfinite(c)):
            return math.inf
        if not bool(fin.all()):
            if not _nonfinite_agree(c, r, fin):
                return math.inf
            c, r = c[fin], r[fin]
            if r.numel() == 0:
                continue
        # 0/0 (a zero tolerance on an exact match) is no difference; x/0 stays inf.
        part = torch.nan_to_num((c - r).abs() / (r.abs() * r_tol + a_tol * scale), nan=0.0)
        worst = max(worst, float(part.max()))
    return worst


def _nonfinite_agree(c: torch.Tensor, r: torch.Tensor, r_fin: torch.Tensor) -> bool:
    """Whether `c` holds `r`'s values where `r` is not finite (`r_fin` False): the same inf, or
    NaN for NaN."""
    cn, rn = c[~r_fin], r[~r_fin]
    return bool(((cn == rn) | (torch.isnan(cn) & torch.isnan(rn))).all())


def _compare_nonfinite(
    c: torch.Tensor, r: torch.Tensor, r_tol: float, a_tol: float, scale_floor: float
) -> tuple[bool, float, str]:
    """compare_values for a reference holding NaN/inf: those positions must match exactly."""
    c_fin, r_fin = torch.isfinite(c), torch.isfinite(r)
    if not torch.equal(c_fin, r_fin):
        return False, float("inf"), "non-finite values (NaN/inf) where the reference has none, or vice versa"
    if not _nonfinite_agree(c, r, r_fin):
        return False, float("inf"), "non-finite values differ from the reference's"
    if not bool(r_fin.any()):
        return True, 0.0, ""
    return compare_values(c[r_fin], r[r_fin], r_tol, a_tol, scale_floor)


def structure(out: Any) -> Any:
    """The nesting of an output with leaves replaced by their kind: ("seq", [...]) for a list or
    tuple (either counts as a sequence), ("map", [(key, ...)]) for a dict, "tensor", or the value
    itself for other leaves."""
    if isinstance(out, (list, tuple)):
        return ("seq", [structure(v) for v in out])
    if isinstance(out, dict):
        return ("map", [(k, structure(v)) for k, v in out.items()])
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
            stats += [
                float((~torch.isfinite(t)).sum()),
                float(finite.sum()),
                float(finite.abs().sum()),
                float((finite * finite).sum()),
            ]
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
