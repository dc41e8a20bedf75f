"""Unit tests of output checking: tolerances, NaN, materialization, aliasing."""

import pytest
import torch

from cudal1.bench import correctness as C
from cudal1.bench.result import HackKind


def test_values_within_fp32_tolerance_pass_and_beyond_fail():
    ref = torch.randn(1000)
    ok, err, _ = C.compare_values(ref + 1e-5, ref)
    assert ok and err == pytest.approx(1e-5, rel=1e-2)
    ok, err, msg = C.compare_values(ref + 0.05, ref)
    assert not ok and "values differ" in msg


def test_atol_scales_with_reference_magnitude():
    ref = torch.full((100,), 1e4) + torch.randn(100)
    # 1e-3 relative to a mean |value| of 1e4 is 10 of absolute slack; 5 passes, 50 does not.
    assert C.compare_values(ref + 5.0, ref, rtol=0.0)[0]
    assert not C.compare_values(ref + 50.0, ref, rtol=0.0)[0]


def test_nan_never_passes_where_reference_is_finite():
    ref = torch.randn(10)
    cand = ref.clone()
    cand[3] = float("nan")
    ok, err, msg = C.compare_values(cand, ref)
    assert not ok and "non-finite" in msg and err == float("inf")
    cand[3] = float("inf")
    assert not C.compare_values(cand, ref)[0]


def test_matching_nonfinite_positions_pass_and_others_are_checked():
    ref = torch.tensor([1.0, float("nan"), float("inf"), 2.0])
    assert C.compare_values(ref.clone(), ref)[0]
    moved = torch.tensor([float("nan"), 1.0, float("inf"), 2.0])
    assert not C.compare_values(moved, ref)[0]
    wrong_finite = torch.tensor([1.5, float("nan"), float("inf"), 2.0])
    assert not C.compare_values(wrong_finite, ref)[0]


def test_integer_outputs_must_be_exact():
    ref = torch.arange(10)
    assert C.compare_values(ref.clone(), ref)[0]
    assert not C.compare_values(ref + 1, ref)[0]


def test_complex_outputs_are_compared_on_both_parts():
    ref = torch.randn(256, dtype=torch.complex64) * 40
    assert C.compare_values(ref.clone(), ref)[0]
    # A rounding-sized difference in either part passes ...
    assert C.compare_values(ref + 4e-5, ref)[0] and C.compare_values(ref + 4e-5j, ref)[0]
    # ... a dropped imaginary part does not (it used to: the cast to float discarded it).
    ok, err, msg = C.compare_values(torch.complex(ref.real, torch.zeros_like(ref.real)), ref)
    assert not ok and err > 1.0 and "values differ" in msg
    assert C.comparison_rule(torch.complex64) == C.comparison_rule(torch.float32)
    assert C.comparison_rule(torch.complex128) == C.comparison_rule(torch.float64)


def test_every_dtype_has_a_rule_or_a_clear_error():
    assert C.comparison_rule(torch.bool) == "exact" and C.comparison_rule(torch.int8) == "exact"
    assert C.compare_values(torch.tensor([True, False]), torch.tensor([True, False]))[0]
    assert not C.compare_values(torch.tensor([True, True]), torch.tensor([True, False]))[0]
    assert C.comparison_rule(torch.float16) == (1e-2, 1e-2)
    with pytest.raises(C.NoComparisonRule, match="quint8"):
        C.comparison_rule(torch.quint8)
    with pytest.raises(C.NoComparisonRule):
        C.tolerance(torch.qint32, None, None)


def test_per_dtype_tolerances_are_looser_for_half():
    assert C.tolerance(torch.bfloat16, None, None) > C.tolerance(torch.float32, None, None)
    assert C.tolerance(torch.int64, None, None) == (0.0, 0.0)
    assert C.tolerance(torch.float32, 0.5, None)[0] == 0.5


def test_storage_span_and_short_storage_is_not_materialized():
    t = torch.zeros(4, 5)
    assert C.storage_span_bytes(t) == 80
    assert C.storage_span_bytes(t[:, 1:3]) == (1 + 3 * 5 + 1 + 1) * 4  # offset 1, last element at 17
    fake = torch.zeros(4, 5)
    fake.untyped_storage().resize_(0)  # the tensor still claims 4×5 values
    assert "storage" in C.materialization_problem(fake, torch.Tensor)
    assert C.materialization_problem(t, torch.Tensor) is None


class _Sub(torch.Tensor):
    pass


def test_subclass_meta_and_non_tensor_outputs_are_rejected():
    ref = torch.ones(3)
    assert "plain torch.Tensor" in C.materialization_problem(ref.as_subclass(_Sub), torch.Tensor)
    assert "meta" in C.materialization_problem(torch.empty(3, device="meta"), torch.Tensor)
    assert "not a tensor" in C.materialization_problem([1, 2, 3], torch.Tensor)


def test_check_output_reports_hacks_and_errors():
    x = torch.randn(8)
    ref = x * 2
    mismatch, _ = C.check_output(x, ref, [x])
    assert mismatch.hack is HackKind.OUTPUT_ALIASES_INPUT
    mismatch, _ = C.check_output(x[:4] * 2, ref, [x])
    assert mismatch.hack is None and "shape" in mismatch.message
    mismatch, _ = C.check_output((x * 2).double(), ref, [x])
    assert "dtype" in mismatch.message
    mismatch, _ = C.check_output((ref, ref), ref, [x])
    assert "tensors" in mismatch.message
    assert C.check_output(x * 2, ref, [x])[0] is None
    # A reference that returns an input view lets the candidate do the same.
    assert C.check_output(x, x, [x], ref_aliases_inputs=True)[0] is None


def test_tree_equal_sees_in_place_changes_and_treats_nan_as_equal():
    a = [torch.tensor([1.0, float("nan")]), 3]
    assert C.tree_equal(a, [a[0].clone(), 3])
    b = [a[0].clone(), 3]
    b[0][0] = 2.0
    assert not C.tree_equal(a, b)
    assert not C.tree_equal([torch.ones(2)], [torch.ones(3)])


def _cases() -> list[tuple[str, torch.Tensor, torch.Tensor]]:
    """(name, candidate, reference) pairs over the dtypes and the non-finite cases, 2-D."""
    g = torch.Generator().manual_seed(7)
    ref = torch.randn(37, 53, generator=g)
    near = ref + 1e-7 * torch.randn(37, 53, generator=g)
    far = ref.clone()
    far[3, 4] += 1.0
    far[30, 50] -= 2.0
    nan_c = near.clone()
    nan_c[5, 5] = float("nan")
    ref_inf = ref.clone()
    ref_inf[1, 2] = float("inf")
    cand_inf = near.clone()
    cand_inf[1, 2] = float("inf")
    cz = torch.complex(ref, ref.flip(0))
    return [
        ("fp32 near", near, ref),
        ("fp32 far", far, ref),
        ("fp32 nan in candidate", nan_c, ref),
        ("fp32 inf in both", cand_inf, ref_inf),
        ("fp32 inf in reference only", near, ref_inf),
        ("fp16 near", near.half(), ref.half()),
        ("fp64 far", far.double(), ref.double()),
        ("complex64 near", cz + 1e-7, cz),
        ("complex64 far", cz + 0.5, cz),
        ("tiny magnitudes", near * 1e-4, ref * 1e-4),
    ]


@pytest.mark.parametrize("i", range(10))
def test_compare_values_and_noise_floor_give_the_same_answer_in_chunks(monkeypatch, i):
    """`compare_values` and `noise_scale_floor` work a `SHARE_CHUNK` of elements at a time: the
    answer with 7-element chunks (chunks that split rows and hold the odd values at their edges)
    is the answer with one chunk."""
    name, cand, ref = _cases()[i]
    whole = C.compare_values(cand, ref, scale_floor=1e-3), C.noise_scale_floor(cand, ref)
    monkeypatch.setattr(C, "SHARE_CHUNK", 7)
    chunked = C.compare_values(cand, ref, scale_floor=1e-3), C.noise_scale_floor(cand, ref)
    (ok_w, err_w, msg_w), floor_w = whole
    (ok_c, err_c, msg_c), floor_c = chunked
    assert ok_w == ok_c and msg_w.split(" (")[0] == msg_c.split(" (")[0], (name, whole, chunked)
    assert err_c == pytest.approx(err_w, rel=1e-6, nan_ok=True) and floor_c == pytest.approx(floor_w, rel=1e-6), name
    if "far" in name:
        assert not ok_c and (name.startswith("complex") or msg_c.startswith("2/")), (name, msg_c)
    if "near" in name:
        assert ok_c, (name, msg_c)


def test_compare_values_and_noise_floor_allocate_at_most_chunks(monkeypatch):
    """No operator of `compare_values` or `noise_scale_floor` makes a tensor larger than a chunk
    of float64: on a 4096x393216 output, a boolean mask over the whole output made CUDA build a
    24 GiB index (an 80 GB card ran out of memory on KernelBench level1/19)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    chunk = 256
    monkeypatch.setattr(C, "SHARE_CHUNK", chunk)

    class Largest(TorchDispatchMode):
        def __init__(self) -> None:
            super().__init__()
            self.bytes = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            given = {
                a.untyped_storage().data_ptr()
                for a in torch.utils._pytree.tree_leaves((args, kwargs))
                if isinstance(a, torch.Tensor)
            }
            for t in torch.utils._pytree.tree_leaves(out):
                if isinstance(t, torch.Tensor) and t.untyped_storage().data_ptr() not in given:
                    self.bytes = max(self.bytes, t.untyped_storage().nbytes())
            return out

    ref = torch.randn(64, 1000)
    ref[7, 9] = float("inf")  # the non-finite paths too
    moved = ref + 1e-6
    wrong = ref.clone()
    wrong[0, 0] = 5.0
    finite_moved, finite_ref = moved.nan_to_num(posinf=1.0), ref.nan_to_num(posinf=1.0)
    with Largest() as mode:
        C.noise_scale_floor(moved, ref)
        C.compare_values(wrong, finite_ref)
        C.compare_values(finite_moved, finite_ref)
    assert 0 < mode.bytes <= chunk * 8, mode.bytes
