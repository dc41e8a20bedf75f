"""Red team, fourth pass (h4): attacks an adversarial policy would try on the judge, each run as a
real evaluation on the CPU backend, with what the judge paid against an honest control.

Open holes are expected failures (strict: the day one closes, the test says so) whose reason
states the hole; the README's limits list each of them.
"""

from __future__ import annotations


import pytest
import torch

import evalkit
from evalkit import SIN_CHAIN, SOFTMAX, TANH
from cudal1.bench.evaluator import evaluate
from cudal1.bench.result import HackKind, Status
from cudal1.tasks.task import Task

# Integer data (not indices): the wide integer trial moves them beyond the generator's range.
INT_SQUARE = evalkit.inline_task(
    903,
    "int_square",
    """
class Model(nn.Module):
    def forward(self, x):
        return x * x + 1

def get_inputs():
    return [torch.randint(0, 16, (256, 256))]

def get_init_inputs():
    return []
""",
)


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("cudal1-cache")


def run(task: Task, name: str, cache_dir, spin: bool | None = None, **overrides):
    overrides = {"rounds": 2, "calls_per_round": 2, **overrides}
    source = evalkit.candidate(name, spin=spin) if spin is not None else evalkit.candidate(name)
    return evaluate(task, source, "cpu", settings=evalkit.settings(cache_dir, **overrides))


# -- (c) a host that spins, and claims what the calibration allows ----------------------------

MATMUL_512 = evalkit.MATMUL_512


@pytest.mark.parametrize(
    "name,marker", [("counts_continues", "CONTINUED"), ("daemon_counts_continues", "DAEMON CONTINUED")]
)
def test_the_candidate_is_stopped_while_the_reference_is_timed(name, marker, cache_dir) -> None:
    """On the CPU every process of the candidate (its control group's: a double-forked daemon too)
    is stopped (SIGSTOP) around each reference round trip once it is loaded, and continued after:
    it counts one SIGCONT per reference round trip of the timing pass (one warm-up call, one
    warm-up round, then one per round)."""
    r = run(MATMUL_512, name, cache_dir, rounds=3)
    assert r.status is Status.OK, evalkit.describe(r)
    counts = [int(line.split()[-1]) for line in r.log.splitlines() if line.startswith(marker + " ")]
    assert counts and max(counts) >= 3 + 2, evalkit.describe(r)


# The spinning host's pay against an honest one is held in test_judge.py's host-shortcut series
# (`HOST_SHORTCUTS`), beside the other hosts that cut corners, on the same honest evaluations.


# -- (d) shortcuts valid only on the easy part of the input space ------------------------------


def test_an_approximation_right_everywhere_is_honest(cache_dir) -> None:
    """The control: a clamped rational tanh, within float32's tolerance on every input."""
    r = run(TANH, "tanh_clamped_poly", cache_dir)
    assert r.status is Status.OK, evalkit.describe(r)


def test_an_approximation_right_only_on_the_nominal_range_is_caught_by_the_shifted_trials(cache_dir) -> None:
    """The same rational tanh without its clamp is wrong beyond |x| = 7.6, which randn inputs
    never reach and the shifted trials (x*4-2, x*-3+1) reach on thousands of elements."""
    r = run(TANH, "tanh_unclamped_pade", cache_dir)
    assert r.status is Status.INCORRECT and "shifted" in r.message, evalkit.describe(r)


def test_a_softmax_that_overflows_beyond_the_trials_range_is_refused(cache_dir) -> None:
    """The shifted trials reach |x| of about 20; the wide trial (x*30) reaches about 130, where
    exp overflows (above 88.7) and a softmax without its max subtraction turns NaN, while the
    reference stays finite."""
    r = run(SOFTMAX, "softmax_without_max", cache_dir)
    assert r.status is Status.INCORRECT and "trial wide x*30" in r.message, evalkit.describe(r)


def test_a_numerically_stable_softmax_is_honest(cache_dir) -> None:
    """The control: the max subtracted first, right on the wide trial too."""
    r = run(SOFTMAX, "honest_softmax_stable", cache_dir)
    assert r.status is Status.OK and r.correctness_trials == 5 + 2 + 1 and not r.skipped_trials, evalkit.describe(r)


def test_integer_arithmetic_right_only_on_the_generators_range_is_refused(cache_dir) -> None:
    """int64 arithmetic done in uint8 wraps for inputs of 16 or more: the wide integer trial's
    inputs (x*61+1000) are all beyond."""
    r = run(INT_SQUARE, "int_range_uint8", cache_dir)
    assert r.status is Status.INCORRECT and "trial wide integers" in r.message, evalkit.describe(r)


def test_integer_arithmetic_right_on_every_input_is_honest(cache_dir) -> None:
    """The control: the same arithmetic in int64, right on the wide integer trial; the shifted and
    the float wide trials move no input of this task, so they are not run."""
    r = run(INT_SQUARE, "honest_int_square", cache_dir)
    assert r.status is Status.OK and r.correctness_trials == 5 + 1 and not r.skipped_trials, evalkit.describe(r)


# Integer inputs that are indices: the reference refuses them moved out of range.
GATHER = evalkit.inline_task(
    906,
    "gather_rows",
    """
class Model(nn.Module):
    def forward(self, x, idx):
        return torch.gather(x, 1, idx)

def get_inputs():
    return [torch.randn(64, 256), torch.randint(0, 256, (64, 32))]

def get_init_inputs():
    return []
""",
)


def test_a_task_whose_integer_inputs_are_indices_skips_the_wide_integer_trial(cache_dir) -> None:
    """The reference (gather) raises on indices moved beyond its rows: that trial lies outside the
    task's domain, is skipped and listed, and the honest candidate is paid; the float trials
    (shifted, wide) move the values gathered and run."""
    r = run(GATHER, "honest_gather_rows", cache_dir)
    assert r.status is Status.OK, evalkit.describe(r)
    assert r.correctness_trials == 5 + 2 + 1, evalkit.describe(r)
    assert len(r.skipped_trials) == 1 and r.skipped_trials[0].startswith("trial wide integers"), r.skipped_trials
    assert "the reference raises there" in r.skipped_trials[0], r.skipped_trials


# -- (a) a round trip's work done in its first call -------------------------------------------


def test_the_control_computes_call_by_call(cache_dir) -> None:
    r = run(SIN_CHAIN, "honest_sin_chain", cache_dir)
    assert r.status is Status.OK and "BATCHED" not in r.log, evalkit.describe(r)


def test_a_call_cannot_reach_the_next_calls_inputs(cache_dir) -> None:
    """A round trip's input sets lie in one slot. When each call's input was a view whose storage
    spanned the whole slot, the first call found every set of the round through its own argument
    (no introspection), computed them stacked and handed the outputs out one per call: correct,
    and timed by what the round took (1.2-1.8x on this chain single-threaded, about 3x with two
    threads on a loaded machine). Each input tensor now has a storage of its own bytes only
    (`Slot.view`), so the candidate finds no other set and computes call by call."""
    r = run(SIN_CHAIN, "batches_the_round", cache_dir, calls_per_round=4)
    assert r.status is Status.OK, evalkit.describe(r)  # its outputs are right: it is not caught
    assert "BATCHED" not in r.log, evalkit.describe(r)


# -- (e) reads the toolchain allows ------------------------------------------------------------


def test_the_builtin_seed_solutions_are_out_of_the_candidates_reach(cache_dir) -> None:
    """A candidate with no code of its own that read its task's seed solution from the cudal1
    package and ran it was paid the seed's speedup (2.96x on level1/7 here, the seed itself
    2.95x), with a source no copy check compares to the seed. The seed directories are now hidden
    from the candidate's reads like the build cache (where Landlock reads are in force)."""
    from cudal1.tasks import find_task, load_builtin

    softmax = find_task(load_builtin(levels=[1]).tasks, "level1/7")
    r = evaluate(
        softmax,
        evalkit.candidate("loads_a_seed_solution", seed="level1/7_Softmax.py"),
        "cpu",
        settings=evalkit.settings(cache_dir, rounds=2, calls_per_round=2),
    )
    if not r.sandbox.get("measures", {}).get("landlock_read", {}).get("active"):
        pytest.skip("no Landlock read rules here: the seeds are as readable as their file modes make them")
    assert r.status is Status.COMPILE_ERROR and "PermissionError" in r.message, evalkit.describe(r)
    assert "LOADED THE SEED" not in r.log, evalkit.describe(r)


# -- fresh ideas ----------------------------------------------------------------------------------

ROW_MEAN_FILLED = evalkit.inline_task(
    906,
    "row_mean_filled",
    """
class Model(nn.Module):
    def forward(self, x):
        return torch.ones_like(x) * x.mean(dim=1, keepdim=True)

def get_inputs():
    return [torch.randn(1024, 1024)]

def get_init_inputs():
    return []
""",
)


def test_an_output_that_repeats_memory_is_not_materialized(cache_dir) -> None:
    """Each row filled with its mean, returned as the means expanded to the output's shape (a
    stride 0): every value the judge read was right, the output was never written, and it was
    paid 2.0-3.1x (floored by the resolution) against an honest 0.8-1.0x. The judge now refuses
    a stride-0 dimension the reference's output does not have; the same values written out are
    honest."""
    r = run(ROW_MEAN_FILLED, "broadcast_view_output", cache_dir)
    assert r.status is Status.HACK and r.hack_kind is HackKind.NOT_MATERIALIZED, evalkit.describe(r)
    assert "stride 0" in r.message, evalkit.describe(r)
    honest = run(ROW_MEAN_FILLED, "honest_row_mean_filled", cache_dir)
    assert honest.status is Status.OK, evalkit.describe(honest)


SLIDING_WINDOWS = evalkit.inline_task(
    908,
    "sliding_windows",
    """
class Model(nn.Module):
    def forward(self, x):
        n = (x.shape[0] + 1) // 2
        return torch.sin(x).unfold(0, n, 1).contiguous()

def get_inputs():
    return [torch.randn(2047)]

def get_init_inputs():
    return []
""",
)


def test_an_output_whose_dimensions_overlap_is_not_materialized(cache_dir) -> None:
    """Sliding windows returned as one row's overlapping windows (strides (1, 1), no stride 0):
    every value the judge reads is right and 2n - 1 of the n x n values were written. The judge
    refuses a view that maps two indices to one element where the reference's output does not."""
    r = run(SLIDING_WINDOWS, "sliding_window_view_output", cache_dir)
    assert r.status is Status.HACK and r.hack_kind is HackKind.NOT_MATERIALIZED, evalkit.describe(r)
    assert "[1, 1]" in r.message, evalkit.describe(r)


def test_which_output_views_repeat_memory() -> None:
    """Views that read some element twice (expanded, sliding windows, rows that overlap) are
    caught; dense, transposed, channels-last and sliced layouts, and a size-1 dimension of any
    stride, are not."""
    from cudal1.bench.judge import _repeats_memory

    base = torch.zeros(6, 8)
    views = {
        "expanded": (torch.zeros(6, 1).expand(6, 8), True),
        "windows": (torch.zeros(13).unfold(0, 8, 1), True),
        "rows read twice": (torch.zeros(20).as_strided((4, 8), (4, 1)), True),
        "dense": (base, False),
        "transposed": (base.t(), False),
        "every other column": (base[:, ::2], False),
        "a size-1 dimension of stride 0": (torch.zeros(1, 8).expand(1, 8).as_strided((1, 8), (0, 1)), False),
        "channels last": (torch.zeros(2, 3, 4, 5).to(memory_format=torch.channels_last), False),
    }
    for name, (t, repeats) in views.items():
        assert _repeats_memory(list(t.stride()), tuple(t.shape)) is repeats, name
    assert (
        not _repeats_memory("1,1", (4, 4)) and not _repeats_memory([1], (4, 4)) and not _repeats_memory([0, 0], (0, 4))
    )


def test_a_reference_that_returns_a_broadcast_view_allows_one(cache_dir) -> None:
    """Where the reference's own output has a stride 0, so may the candidate's."""
    task = evalkit.inline_task(
        907,
        "row_mean_expanded",
        """
class Model(nn.Module):
    def forward(self, x):
        return x.mean(dim=1, keepdim=True).expand(x.shape[0], x.shape[1])

def get_inputs():
    return [torch.randn(256, 256)]

def get_init_inputs():
    return []
""",
    )
    r = run(task, "broadcast_view_output", cache_dir)
    assert r.status is Status.OK, evalkit.describe(r)


def test_a_forged_build_time_is_held_to_the_judges_clock(cache_dir) -> None:
    """`build_seconds` comes from the candidate's host; one that claims a million seconds (the
    pipeline sums it into where the time went) is held to how long its load took on the judge's
    clock."""
    r = evalkit.run("matmul_relu", evalkit.candidate("forges_build_seconds"), cache_dir)
    assert "FORGED BUILD SECONDS" in r.log and r.status is Status.OK, evalkit.describe(r)
    assert r.build_seconds is not None and r.build_seconds <= r.eval_seconds, (r.build_seconds, r.eval_seconds)


@pytest.mark.parametrize("kind", ["type", "runtime"])
def test_an_exception_with_a_huge_message_stays_the_candidates_failure(kind, cache_dir) -> None:
    """A 16 MB exception in a timed call: as a signature-like TypeError its whole text went into
    the host's answer, a frame past the wire's limit (a protocol hack); as a RuntimeError it is
    cut to a line (runtime_error). Neither becomes a harness failure (left out of training)."""
    r = evalkit.run("matmul_relu", evalkit.candidate("huge_error_message", kind=kind), cache_dir)
    expected = Status.HACK if kind == "type" else Status.RUNTIME_ERROR
    assert r.status is expected and len(r.message) < 2000, evalkit.describe(r)
    assert "harness_error" not in r.labels and "worker_crashed" not in r.labels, evalkit.describe(r)


TWO_RELUS = evalkit.inline_task(
    908,
    "two_relus",
    """
class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x), torch.clamp(x, min=0.0)

def get_inputs():
    return [torch.randn(512, 512)]

def get_init_inputs():
    return []
""",
)


def test_two_outputs_of_one_call_in_one_memory_are_refused(cache_dir) -> None:
    """On a task with two equal outputs, one tensor returned for both (the second never written)
    was paid 2.2x: the host checks an output only against the inputs and earlier calls' outputs.
    The judge now refuses outputs of one call whose described memory overlaps, unless the
    reference's own outputs share memory; the same values in two tensors are honest."""
    r = run(TWO_RELUS, "one_tensor_for_two_outputs", cache_dir)
    assert r.status is Status.HACK and r.hack_kind is HackKind.NOT_MATERIALIZED, evalkit.describe(r)
    assert "share memory" in r.message, evalkit.describe(r)
    honest = run(TWO_RELUS, "honest_two_relus", cache_dir)
    assert honest.status is Status.OK, evalkit.describe(honest)


def test_a_spread_trial_where_the_reference_is_ill_conditioned_is_skipped(cache_dir) -> None:
    """level2/8 (a softmax between two matmuls): on the wide trial's inputs (x*30) the reference's
    own float32 error is most of the tolerance, so a change of its inputs at the rounding level
    moves its output by more than `CONDITION_SHARE` of it; an honest seed, which rounds otherwise,
    could fail there. That trial is skipped and listed; the seed is paid."""
    from cudal1.tasks import find_task, load_builtin, seed_solutions

    task = find_task(load_builtin(levels=[2]).tasks, "level2/8")
    seed = seed_solutions("cpu")["level2/8"].read_text()
    r = evaluate(task, seed, "cpu", settings=evalkit.settings(cache_dir))
    assert r.status is Status.OK, evalkit.describe(r)
    assert [s.split(":")[0] for s in r.skipped_trials] == ["trial wide x*30"], r.skipped_trials
    assert "ill-conditioned" in r.skipped_trials[0] and r.correctness_trials == 5 + 2, r.skipped_trials


# -- memory repeated through the page tables (forty-second session's red team) --------------------

REPEAT_4 = evalkit.inline_task(
    962,
    "repeat_4",
    """
class Model(nn.Module):
    def forward(self, x):
        return torch.sin(x).repeat(4, 1)

def get_inputs():
    return [torch.randn(1024, 1024)]

def get_init_inputs():
    return []
""",
)
COL_MEAN_FILLED = evalkit.inline_task(
    961,
    "col_mean_filled",
    """
class Model(nn.Module):
    def forward(self, x):
        return torch.ones_like(x) * x.mean(dim=0, keepdim=True)

def get_inputs():
    return [torch.randn(256, 16384)]

def get_init_inputs():
    return []
""",
)
SIN_TWICE = evalkit.inline_task(
    963,
    "sin_twice",
    """
class Model(nn.Module):
    def forward(self, x):
        y = torch.sin(x)
        return y, y.clone()

def get_inputs():
    return [torch.randn(2048, 2048)]

def get_init_inputs():
    return []
""",
)


@pytest.mark.parametrize(
    "task, name",
    [
        (REPEAT_4, "aliased_pages_repeat"),
        (REPEAT_4, "aliased_private_file_pages"),
        (COL_MEAN_FILLED, "aliased_pages_output"),
        (SIN_TWICE, "aliased_pages_two_outputs"),
    ],
    ids=lambda v: v if isinstance(v, str) else v.name,
)
def test_an_output_whose_pages_are_mapped_twice_is_not_materialized(task, name, cache_dir) -> None:
    """An output whose virtual pages are one file's pages mapped at several addresses (a memfd
    mapped shared 4 times, or privately and never written; one row mapped once per row; two
    outputs on one region) has plain strides and disjoint addresses, and every value read is
    right: paid 1.37x, 1.83x, 1.12x and 1.83x against honest 0.94-1.36x before the judge asked
    the kernel which memory holds each output. No page of an output may be mapped at two
    addresses unless the reference's are."""
    r = run(task, name, cache_dir)
    assert r.status is Status.HACK and r.hack_kind is HackKind.NOT_MATERIALIZED, evalkit.describe(r)
    whys = ["repeats memory through the page tables"]
    if name == "aliased_private_file_pages":  # pages of a private file mapping never written through it
        whys.append("pages never written")
    assert any(why in r.message for why in whys), evalkit.describe(r)


def test_shared_memory_mapped_once_is_honest_and_a_reference_that_repeats_pages_allows_it(cache_dir) -> None:
    """An output in a shared mapping that the process maps once (as a helper process's results
    would be) passes; an output that repeats pages is refused only where the reference's does not
    (the rule compares with the reference, as the stride and overlap rules do)."""
    shared_once = """
import mmap
import torch
import torch.nn as nn

class ModelNew(nn.Module):
    def forward(self, x):
        m = mmap.mmap(-1, x.numel() * 4)  # MAP_SHARED | MAP_ANONYMOUS
        return torch.sin(x, out=torch.frombuffer(m, dtype=torch.float32).view_as(x))
"""
    sin = evalkit.inline_task(
        965,
        "sin_1024",
        """
class Model(nn.Module):
    def forward(self, x):
        return torch.sin(x)

def get_inputs():
    return [torch.randn(1024, 1024)]

def get_init_inputs():
    return []
""",
    )
    r = evaluate(sin, shared_once, "cpu", settings=evalkit.settings(cache_dir))
    assert r.status is Status.OK, evalkit.describe(r)
    private_file_written = """
import mmap
import os
import torch
import torch.nn as nn

class ModelNew(nn.Module):
    def forward(self, x):
        fd = os.memfd_create("out")
        os.ftruncate(fd, x.numel() * 4)
        m = mmap.mmap(fd, x.numel() * 4, flags=mmap.MAP_PRIVATE)
        os.close(fd)
        return torch.sin(x, out=torch.frombuffer(m, dtype=torch.float32).view_as(x))
"""
    r = evaluate(sin, private_file_written, "cpu", settings=evalkit.settings(cache_dir))
    assert r.status is Status.OK, evalkit.describe(r)  # every page written: the process's own copies
    tiles = evalkit.candidate("aliased_pages_repeat")
    repeating_reference = evalkit.inline_task(
        964,
        "repeat_4_by_pages",
        tiles.replace("class ModelNew", "class Model")
        + "\n\ndef get_inputs():\n    return [torch.randn(1024, 1024)]\n\ndef get_init_inputs():\n    return []\n",
    )
    r = evaluate(repeating_reference, tiles, "cpu", settings=evalkit.settings(cache_dir))
    assert r.status is Status.OK, evalkit.describe(r)


CAT_X_2X = evalkit.inline_task(
    971,
    "cat_x_2x",
    """
class Model(nn.Module):
    def forward(self, x):
        return torch.cat([x, x * 2], dim=0)

def get_inputs():
    return [torch.randn(2048, 2048)]

def get_init_inputs():
    return []
""",
)


def test_the_judges_input_pages_moved_under_an_output_are_an_aliased_input(cache_dir) -> None:
    """cat([x, 2x]) whose first half is the judge's own input pages, moved under the output with
    mremap (the input's old address left empty, so the input slot is mapped once and the host's
    check of virtual addresses sees no overlap): accepted in 12 of 12 evaluations and paid up to
    1.64x against an honest 0.81-1.05x before (forty-third session's red team). An output in the
    pages of an input slot is the input aliased, whatever its address."""
    r = run(CAT_X_2X, "moved_input_pages", cache_dir)
    assert r.status is Status.HACK and r.hack_kind is HackKind.OUTPUT_ALIASES_INPUT, evalkit.describe(r)
    assert "pages of the judge's inputs" in r.message, evalkit.describe(r)


PAD_ROWS = evalkit.inline_task(
    972,
    "pad_rows",
    """
class Model(nn.Module):
    def forward(self, x):
        return torch.nn.functional.pad(x * 2, (0, 0, 0, 1536))

def get_inputs():
    return [torch.randn(512, 1024)]

def get_init_inputs():
    return []
""",
)
SCALE_512 = evalkit.inline_task(
    973,
    "scale_512",
    """
class Model(nn.Module):
    def forward(self, x):
        return x * 2

def get_inputs():
    return [torch.randn(512, 1024)]

def get_init_inputs():
    return []
""",
)


def test_an_output_on_pages_never_written_is_not_materialized(cache_dir) -> None:
    """Zero rows left in fresh private memory, never touched: every read of them is the kernel's
    zero page, and the output was paid 1.2-3.0x against an honest 1.0-1.2x (forty-third session's
    red team, 2048x2048 with 6144 zero rows). The parent reads the pagemap after its copy. A view
    whose span holds pages no element lies in (the unwritten half of each row of a padded buffer)
    is honest and passes."""
    from cudal1.bench.pagemap import zero_frames

    if zero_frames() is None:
        pytest.skip("page frame numbers are shown to root only: the zero page cannot be seen")
    r = run(PAD_ROWS, "zero_pages_pad", cache_dir)
    assert r.status is Status.HACK and r.hack_kind is HackKind.NOT_MATERIALIZED, evalkit.describe(r)
    assert "pages never written" in r.message, evalkit.describe(r)
    honest = run(SCALE_512, "honest_padded_view", cache_dir)
    assert honest.status is Status.OK, evalkit.describe(honest)


KEEPS_WEIGHT = evalkit.inline_task(
    975,
    "keeps_weight",
    """
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("w", torch.randn(256, 256))

    def forward(self, x):
        return x * 2, self.w

def get_inputs():
    return [torch.randn(512, 1024)]

def get_init_inputs():
    return []
""",
)


KEEPS_GLOBAL = evalkit.inline_task(
    976,
    "keeps_global",
    """
_TABLE = torch.arange(65536.0).view(256, 256)

class Model(nn.Module):
    def forward(self, x):
        return x * 2, _TABLE

def get_inputs():
    return [torch.randn(512, 1024)]

def get_init_inputs():
    return []
""",
)


def test_output_bytes_an_earlier_call_left_are_not_paid_for(cache_dir) -> None:
    """The zero rows of pad_rows written once at init into a ring of 12 private buffers, never
    again: real, distinct pages, so neither the page-repeat rule nor the zero-page question sees
    them, and each call writes a quarter of its output (the forty-fourth session's red team,
    2048 rows with 6144 zero rows: the judge's time per call fell 2x, 40x at 256 MiB; here, a ring
    of 48, paid 1.0-1.43x in three runs). With at most 4 calls a round trip, 12 buffers pass the
    host's check against the outputs of this round trip and the last, and serve again within the
    timed rounds. The parent now writes a pattern over every output byte the judge has read
    before the host's next round trip: once a buffer serves again, its zero rows read as that
    pattern, a wrong timed answer."""
    r = _run_source(PAD_ROWS, _ring(12), cache_dir, rounds=6, max_calls_per_round=4)
    assert "RING WRAPPED" in r.log, evalkit.describe(r)
    assert r.status is Status.HACK or r.status is Status.INCORRECT, evalkit.describe(r)
    assert "wrong output" in r.message and "values differ" in r.message, evalkit.describe(r)
    honest = run(PAD_ROWS, "honest_pad_ring", cache_dir, rounds=6, max_calls_per_round=4)
    assert honest.status is Status.OK, evalkit.describe(honest)


@pytest.mark.xfail(
    strict=True,
    reason="open: a buffer returned once, its constant part written at init, is never seen "
    "(the overwrite after each read covers only memory an earlier call returned)",
)
def test_a_stock_of_outputs_filled_at_init_is_not_paid_for(cache_dir) -> None:
    """The same candidate with more buffers than the evaluation has calls: each is returned once,
    so the pattern written over the outputs the judge has read never reaches one before it
    serves. Its cost is memory: the stock must hold every call's output (here 32 of 8 MiB). Right:
    refused or wrong, like the ring's."""
    r = _run_source(PAD_ROWS, _ring(32), cache_dir, max_calls_per_round=4)
    assert "RING WRAPPED" not in r.log, evalkit.describe(r)
    assert r.status in (Status.HACK, Status.INCORRECT), evalkit.describe(r)


def _ring(slots: int) -> str:
    return evalkit.candidate("prefaulted_pad_ring", slots=slots)


def _run_source(task: Task, source: str, cache_dir, **overrides):
    overrides = {"rounds": 2, "calls_per_round": 2, **overrides}
    return evaluate(task, source, "cpu", settings=evalkit.settings(cache_dir, **overrides))


def test_file_pages_shown_again_under_an_output_are_pages_never_written(cache_dir) -> None:
    """The ring's zero rows as private mappings of a file of zeros, each call dropping its own
    copies of them (MADV_DONTNEED) so that the file's pages show again and the parent's pattern
    is gone (the forty-fourth session's second red team: `ok` with the ring wrapped). A page of
    a private file mapping that the process has not written is the file's, never this call's:
    the parent's pagemap read refuses it as it refuses the zero page."""
    r = _run_source(
        PAD_ROWS, evalkit.candidate("file_revert_ring", slots=12), cache_dir, rounds=6, max_calls_per_round=4
    )
    assert r.status is Status.HACK and r.hack_kind is HackKind.NOT_MATERIALIZED, evalkit.describe(r)
    assert "pages never written" in r.message, evalkit.describe(r)


def test_outputs_that_cannot_be_written_over_are_the_candidates_failure(cache_dir) -> None:
    """Each returned buffer made read-only by a thread just after the call: the parent's
    overwrite fails, and that is the candidate's protocol hack, never the harness's failure."""
    r = run(PAD_ROWS, "readonly_after_answer", cache_dir, rounds=6, max_calls_per_round=4)
    assert r.status is Status.HACK and r.hack_kind is HackKind.HARNESS_TAMPERING, evalkit.describe(r)
    assert "cannot be written over" in r.message and "harness_error" not in r.labels, evalkit.describe(r)


@pytest.mark.parametrize("task,kept", [(KEEPS_WEIGHT, "self.w"), (KEEPS_GLOBAL, "_TABLE")], ids=["buffer", "global"])
def test_an_output_the_reference_keeps_is_not_written_over(task, kept, cache_dir) -> None:
    """A reference that returns its own buffer, or a tensor of its module's, beside x*2: the same
    memory every call, so the parent does not write its pattern there (the candidate's copy
    would differ from the reference's next output if it did)."""
    r = _run_source(task, evalkit.candidate("keeps_weight", kept=kept), cache_dir)
    assert r.status is Status.OK, evalkit.describe(r)
