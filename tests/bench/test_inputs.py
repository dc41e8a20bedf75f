"""`inputs.spread`: how the shifted and wide correctness trials move a task's inputs; on CUDA, how the
judge tries moved integer inputs on the CPU first (`Judge._outside_domain`)."""

from __future__ import annotations

from types import SimpleNamespace

import math

import pytest
import torch

from cudal1.bench import correctness, inputs
from cudal1.bench.judge import CPU_PROBE_MIB, SHIFTS, WIDE, Judge
from cudal1.bench.settings import EvalSettings


def test_floats_and_integers_move_by_their_own_shift_and_keep_dtype_and_device() -> None:
    f, i = torch.randn(4, 8), torch.randint(0, 16, (4, 8))
    (fx, ix), moved = inputs.spread([f, i], (30.0, 0.0), None)
    assert moved == 1 and torch.equal(fx, f * 30) and ix is i
    (fx, ix), moved = inputs.spread([f, i], None, (61, 1000))
    assert moved == 1 and fx is f and torch.equal(ix, i * 61 + 1000)
    assert ix.dtype == torch.int64 and ix.device == i.device and int(ix.min()) >= 1000


def test_an_integer_tensor_that_would_leave_its_dtypes_range_stays_as_it_is() -> None:
    small = torch.randint(0, 16, (8,), dtype=torch.int16)
    xs = [torch.randint(0, 16, (8,), dtype=torch.uint8), torch.randint(-8, 8, (8,), dtype=torch.int8), small]
    xs += [torch.tensor([30000], dtype=torch.int16), torch.ones(3, dtype=torch.bool), torch.empty(0, dtype=torch.int64)]
    out, moved = inputs.spread(xs, None, (61, 1000))
    assert moved == 1 and torch.equal(out[2], small * 61 + 1000) and out[2].dtype == torch.int16
    assert all(a is b for k, (a, b) in enumerate(zip(out, xs)) if k != 2)


def test_non_tensors_and_no_shift_leave_the_inputs_alone() -> None:
    xs = [torch.randn(3), 7, "s", None]
    out, moved = inputs.spread(xs)
    assert moved == 0 and out == xs and out is not xs


def test_the_wide_trials_reach_beyond_float32s_exp_and_the_shifted_ones_do_not() -> None:
    # exp overflows above 88.7 in float32: only a wide trial brings randn's tails there.
    x = torch.randn(16, 4096, generator=torch.Generator().manual_seed(0))
    assert all(float((x * a + b).abs().max()) < 88.7 for a, b in SHIFTS)
    (wide,), _ = inputs.spread([x], WIDE[0][1], WIDE[0][2])
    assert float(wide.abs().max()) > 88.7


def test_negative_trial_counts_are_refused() -> None:
    with pytest.raises(ValueError, match="wide_trials"):
        EvalSettings(wide_trials=-1)
    assert EvalSettings(wide_trials=0).wide_trials == 0


class _Gather(torch.nn.Module):
    def __init__(self, rows: int) -> None:
        super().__init__()
        self.table = torch.nn.Parameter(torch.randn(rows, 4))

    def forward(self, idx):
        return self.table[idx]


def _cuda_judge(rows: int) -> SimpleNamespace:
    """What `Judge._outside_domain` reads of a judge on CUDA (its CPU copy is built from these)."""
    module = SimpleNamespace(Model=_Gather)
    return SimpleNamespace(
        cuda=True, ref_model=_Gather(rows), module=module, init=[rows], init_seed=7, _cpu_reference=None
    )


def test_on_cuda_moved_integers_are_tried_first_on_a_cpu_copy_of_the_reference() -> None:
    # Out-of-range indices on CUDA are a device-side assert that ends the judge's CUDA context: the
    # judge tries them on a copy of the reference built on the CPU, where they raise.
    judge = _cuda_judge(16)
    idx = torch.randint(0, 16, (8,))
    assert Judge._outside_domain(judge, [idx]) is None
    (moved,), _ = inputs.spread([idx], None, WIDE[1][2])
    why = Judge._outside_domain(judge, [moved])
    assert why is not None and why.startswith("the reference raises there, on the CPU (IndexError"), why
    assert isinstance(judge._cpu_reference, _Gather) and judge._cpu_reference.table.device.type == "cpu"


def test_on_cuda_inputs_too_large_to_try_on_the_cpu_skip_the_trial() -> None:
    rows = CPU_PROBE_MIB * 2**20 // 16 + 1  # float32 rows of 4: just over the bound
    judge = _cuda_judge(1)
    with torch.device("meta"):  # its size, without the memory
        judge.ref_model = _Gather(rows)
    why = Judge._outside_domain(judge, [torch.zeros(2, dtype=torch.int64)])
    assert why is not None and "too large to try on the CPU first" in why and judge._cpu_reference is None


def test_share_of_tolerance_is_the_largest_difference_over_what_the_comparison_allows() -> None:
    ref = torch.tensor([0.0, 2.0, float("nan"), float("inf")])
    # float32: rtol 1e-3, atol 1e-3 x max(1, mean |finite ref| = 1): 1e-3 allowed at 0, 3e-3 at 2.
    got = ref + torch.tensor([1e-3, 3e-3, 0.0, 0.0])
    assert correctness.share_of_tolerance(got, ref) == pytest.approx(1.0, rel=1e-4)
    assert correctness.share_of_tolerance(ref.clone(), ref) == 0.0
    assert correctness.share_of_tolerance(torch.tensor([0.0, 2.0, 1.0, float("inf")]), ref) == float("inf")
    ints = torch.arange(4)
    assert correctness.share_of_tolerance(ints.clone(), ints) == 0.0
    assert correctness.share_of_tolerance(ints + 1, ints) == float("inf")
    with pytest.raises(ValueError):
        correctness.share_of_tolerance(got, ref, chunk=0)


def test_share_of_tolerance_in_chunks_is_the_same_figure() -> None:
    """Chunked (a few elements at a time, as for outputs of GiBs) and whole give the same share:
    the scale is the mean over every finite element, non-finite positions are matched in each
    chunk, and a chunk holding only non-finite values adds nothing."""
    torch.manual_seed(0)
    ref = torch.randn(7, 13) * 3
    ref[2, :] = float("nan")
    ref[4, 5] = float("-inf")
    got = ref + torch.randn(7, 13) * 1e-3
    got[2, :], got[4, 5] = float("nan"), float("-inf")
    whole = correctness.share_of_tolerance(got, ref, chunk=10**9)
    assert 0 < whole < math.inf
    for chunk in (1, 5, 13, 64):
        assert correctness.share_of_tolerance(got, ref, chunk=chunk) == pytest.approx(whole, rel=1e-12)
    bad = got.clone()
    bad[6, 12] = float("nan")  # a non-finite value the reference does not have, in the last chunk
    assert correctness.share_of_tolerance(bad, ref, chunk=5) == math.inf
