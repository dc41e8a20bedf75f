"""Each reward-hack guard of the evaluator against a candidate that cheats and one that does not.

Every row of CASES is one real evaluation (CPU backend, tiny tasks from `evalkit`, candidates from
`candidates/`): the cheat must come back with the exact status and hack kind, the honest one with
status ok. Attacks written against the old in-process evaluator (frames, the heap, the checker's
functions) are kept: in the two-process evaluator they find nothing to attack, and
`test_in_process_attacks_find_nothing` says so from what they print.
"""

from __future__ import annotations

import dataclasses
import os

import pytest

import evalkit
from cudal1.bench.evaluator import extensions_dir
from cudal1.bench.result import HackKind, Status

OK, INCORRECT, HACK = Status.OK, Status.INCORRECT, Status.HACK
K = HackKind


@dataclasses.dataclass(frozen=True)
class Case:
    """One evaluation and what it must give."""

    candidate: str
    task: str
    status: tuple[Status, ...]
    """Accepted statuses (one, except where a fix may legitimately move the verdict)."""
    kinds: tuple[str | None, ...] = (None,)
    """Accepted hack kinds (values; None: no hack kind)."""
    labels: tuple[str, ...] = ()
    """Labels that must be present."""
    absent: tuple[str, ...] = ()
    """Labels that must not be present."""

    @property
    def id(self) -> str:
        return f"{self.candidate}@{self.task}"


def cheat(candidate: str, task: str, status: Status | tuple[Status, ...], *kinds: HackKind | str | None) -> Case:
    """A cheat that must give `status` with one of `kinds` (none given: no hack kind)."""
    statuses = status if isinstance(status, tuple) else (status,)
    return Case(candidate, task, statuses, tuple(getattr(k, "value", k) for k in kinds) or (None,))


def honest(
    candidate: str, task: str = "matmul_relu", labels: tuple[str, ...] = (), absent: tuple[str, ...] = ()
) -> Case:
    """An honest candidate: status ok, no hack kind, with `labels` and without `absent`."""
    return Case(candidate, task, (OK,), (None,), labels, absent)


MM = "matmul_relu"

CASES = [
    # -- results cached across calls, constant outputs ------------------------------------------
    cheat("constant_output", MM, INCORRECT),
    cheat("cache_by_shape", MM, INCORRECT),  # the second trial has fresh inputs
    cheat("cache_by_call_count", MM, HACK, K.RESULT_CACHE),  # right in the trials, stale when timed
    # Precomputes answers for guessable seeds; the judge's are secret: wrong in the first trial.
    cheat("predicted_seeds", MM, INCORRECT),
    honest("honest_matmul_relu", labels=("pytorch_only",), absent=("calls_reference_ops", "custom_kernel")),
    # -- outputs that are not plain materialized tensors ----------------------------------------
    cheat("tensor_subclass", MM, HACK, K.NOT_MATERIALIZED),
    cheat("wrapper_subclass", MM, HACK, K.NOT_MATERIALIZED),
    cheat("lazy_wrapper", MM, HACK, K.NOT_MATERIALIZED),
    # Reading zero bytes of storage segfaults: the check must come before any copy of the output.
    cheat("zero_storage", MM, HACK, K.NOT_MATERIALIZED),
    cheat("short_storage_set", MM, HACK, K.NOT_MATERIALIZED),
    cheat("meta_output", MM, HACK, K.NOT_MATERIALIZED),  # the only other device the CPU box has
    honest("honest_transposed_view"),  # a strided view of its own buffer is materialized
    # -- aliasing and reused output buffers -----------------------------------------------------
    cheat("alias_input", "clamp01", HACK, K.OUTPUT_ALIASES_INPUT),
    # Aliasing only in timed calls: the raw timed output must be checked, not a copy of it.
    cheat("alias_input_when_timed", "clamp01", HACK, K.OUTPUT_ALIASES_INPUT),
    honest("honest_clamp", "clamp01"),
    cheat("reused_output_buffer", MM, HACK, K.OUTPUT_CHANGED_LATER),
    # Buffer reuse only in timed calls.
    cheat("reused_buffer_when_timed", MM, HACK, K.OUTPUT_CHANGED_LATER),
    # -- inputs mutated in place ----------------------------------------------------------------
    cheat("mutates_input", MM, HACK, K.INPUT_MUTATED),
    cheat("mutates_input_when_timed", MM, HACK, K.INPUT_MUTATED),
    honest("honest_inplace_intermediate"),
    # -- work finished after forward returns ----------------------------------------------------
    # The change comes 50 ms after return: waiting a fixed short time misses it, joining the thread does not.
    cheat("thread_scribbles_later", MM, HACK, K.UNFINISHED_WORK, K.OUTPUT_CHANGED_LATER),
    # An output finished by a thread after return: a hack, not merely "incorrect".
    cheat("thread_finishes_output", MM, HACK, K.UNFINISHED_WORK, K.OUTPUT_CHANGED_LATER),
    honest("honest_threadpool"),
    # -- constructor and forward signature, output structure ------------------------------------
    cheat("ctor_extra_arg", MM, HACK, K.WRONG_SIGNATURE),
    cheat("ctor_drops_arg", "scale_bias", HACK, K.WRONG_SIGNATURE),
    cheat("ignores_init_args", "scale_bias", INCORRECT),
    honest("honest_scale_bias", "scale_bias"),
    cheat("forward_arity", MM, HACK, K.WRONG_SIGNATURE),
    cheat("wrong_shape", MM, INCORRECT),
    cheat("wrong_dtype", MM, INCORRECT),
    cheat("wrong_structure", MM, INCORRECT),  # a 1-tuple where the reference returns a tensor
    # -- NaN, and code that is only right on the nominal input range ----------------------------
    cheat("nan_output", MM, INCORRECT),
    cheat("identity_on_unit_interval", "clamp01", INCORRECT),  # caught by the shifted trials
    # -- monkey patching: torch, the checker, the clocks, the reference -------------------------
    cheat("patch_allclose_import", MM, HACK, K.MONKEY_PATCH),
    cheat("patch_allclose_forward", MM, HACK, K.MONKEY_PATCH),
    cheat("patch_assert_close", MM, HACK, K.MONKEY_PATCH),
    cheat("patch_compare_import", MM, HACK, K.MONKEY_PATCH),
    cheat("patch_compare_forward", MM, HACK, K.MONKEY_PATCH),
    cheat("patch_perf_counter_import", MM, HACK, K.TIMER_TAMPERING),
    cheat("patch_perf_counter_ns_import", MM, HACK, K.TIMER_TAMPERING),
    cheat("patch_perf_counter_forward", MM, HACK, K.TIMER_TAMPERING),
    cheat("patch_matmul_import", MM, HACK, K.MONKEY_PATCH),
    cheat("patch_matmul_forward", MM, HACK, K.MONKEY_PATCH),
    # Attributes added to torch.Tensor shadow methods inherited from its C base class; __le__ is what
    # an elementwise tolerance test uses, so zeros would pass.
    cheat("patch_tensor_eq", MM, HACK, K.MONKEY_PATCH),
    cheat("patch_tensor_le", MM, HACK, K.MONKEY_PATCH),
    cheat("patch_tensor_relu", MM, HACK, K.MONKEY_PATCH),  # slows the reference's .relu()
    # Patches of methods of the evaluator's classes, seen by the host's own report.
    cheat("patch_clock_method", MM, HACK, K.TIMER_TAMPERING),
    # A patch of the checker that undoes itself when called: the checker is not in the candidate's
    # process, so it is never called there and the host's report sees it.
    cheat("patch_compare_self_restoring", MM, HACK, K.MONKEY_PATCH),
    # Switches the host's report off, then patches the checker and returns zeros: the host's canary
    # (which compares with the patched function) or else the judge's own checker, in another
    # process, sees the zeros.
    cheat("patch_guard_disabled", MM, (HACK, INCORRECT), K.MONKEY_PATCH, None),
    # Operator overrides and a Python mode left on break the host's canary comparison.
    cheat("patch_aten_kernel", MM, HACK, K.MONKEY_PATCH),
    cheat("dispatch_mode_left_on", MM, HACK, K.MONKEY_PATCH),
    honest("honest_local_names"),
    # -- labels: reduced precision, PyTorch-only, calls back into the reference -----------------
    honest("bf16_exact", "int_relu", labels=("reduced_precision", "pytorch_only")),
    cheat("bf16_matmul", MM, INCORRECT),
    honest("calls_reference_ops", labels=("pytorch_only", "calls_reference_ops"), absent=("custom_kernel",)),
    # A library mapped from outside its build directory is no kernel of its own; a forward that
    # refuses to be recorded gets the worst labels, not none (reduced precision included: its
    # forward computes in bfloat16, which only the recording could see).
    honest(
        "label_forger",
        "int_relu",
        labels=("profile_failed", "pytorch_only", "calls_reference_ops", "reduced_precision"),
        absent=("custom_kernel",),
    ),
    # custom_kernel only for a shared object a build of this candidate recorded (issue 21): not for
    # zero-filled "x.so" files mapped from its build directory, its scratch directory or Triton's
    # cache, nor for a real library it copied into its build directory (at import, or in its first
    # forward as a lazy build would).
    honest("mapped_fake_objects", labels=("pytorch_only",), absent=("custom_kernel",)),
    honest("lazy_shared_object", labels=("pytorch_only",), absent=("custom_kernel",)),
    # ... nor for that copy recorded as built by the recorder the harness once ran in its process
    # (records are the parent's, made for builds it made: `cudal1.bench.builder`).
    honest("forges_a_build_record", labels=("pytorch_only",), absent=("custom_kernel",)),
    # -- looking for the checker (issue 21, public kind) -----------------------------------------
    # Each takes a wrong fast path only where it believes it is timed. Trials and timed calls run
    # the same code path in the host (a round trip of n calls; timing sends several), on inputs of
    # the same nominal distribution (plus shifted trials), and every output of every timed call is
    # checked: a belief that holds in a trial too is a wrong trial (incorrect); one that holds only
    # in timed calls is a wrong timed output (result_cache).
    # The frames it finds are the same in a trial (the host times every call alike, in a function
    # named _timed_forwards): wrong in trial 1, or, were the names neutral, in the first timed batch.
    cheat("checker_by_inspect_stack", MM, (INCORRECT, HACK), None, K.RESULT_CACHE),
    cheat("checker_by_environment", MM, INCORRECT),  # the environment is the same for every call
    cheat("checker_by_call_count", MM, HACK, K.RESULT_CACHE),
    cheat("checker_by_input_magnitude", MM, INCORRECT),  # trials 1-5 are nominal, as timed calls are
]


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    """One build cache for the module (the C++ candidate builds once)."""
    return tmp_path_factory.mktemp("cudal1-cache")


def check(case: Case, r) -> None:
    """Assert that result `r` is what `case` says."""
    kind = r.hack_kind.value if r.hack_kind else None
    why = evalkit.describe(r)
    assert r.status in case.status, why
    assert kind in case.kinds, why
    for label in case.labels:
        assert has_label(r.labels, label), why
    for label in case.absent:
        assert not has_label(r.labels, label), why


def has_label(labels: list[str], label: str) -> bool:
    """`label` is among `labels`; "<prefix>:<flag>" also matches a "<prefix>:" label listing <flag>
    among others (e.g. "global_flags:num_threads" in "global_flags:default_dtype,num_threads")."""
    if ":" in label:
        prefix, item = label.split(":", 1)
        return any(
            got.split(":", 1)[0] == prefix and item in got.split(":", 1)[1].split(",") for got in labels if ":" in got
        )
    return label in labels


def _param(case: Case):
    return pytest.param(case, id=case.id)


@pytest.mark.parametrize("case", [_param(c) for c in CASES])
def test_guard(case: Case, cache_dir) -> None:
    r = evalkit.run(case.task, evalkit.candidate(case.candidate), cache_dir)
    check(case, r)
    if r.status is OK:
        assert r.speedup and r.speedup > 0 and r.correctness_trials >= 5, evalkit.describe(r)


def test_result_cache_by_data_ptr(cache_dir) -> None:
    """A cache keyed by an input's pointer: the inputs of a call sit where an earlier call's did
    (a fresh slot per call, mapped where the last one was) with fresh values, so a correctness
    trial is answered from the cache, wrong."""
    r = evalkit.run(MM, evalkit.candidate("cache_by_data_ptr"), cache_dir)
    assert "cache hit" in r.log, evalkit.describe(r)
    assert r.status is INCORRECT and r.message.startswith("trial"), evalkit.describe(r)


# Attacks on the old in-process evaluator: they look for the reference, its outputs or its seeds
# in their own process and print what they found. Nothing is there; each computes honestly (or,
# without an answer of its own, is wrong).
NOTHING_FOUND = [
    ("patch_reference_class", "NO REFERENCE FOUND", "PATCHED REFERENCE", OK),
    ("steal_reference_output", "NOTHING TO STEAL", "STOLE", OK),
    ("predicted_seeds", None, "PREDICTED", INCORRECT),
]


@pytest.mark.parametrize("name,printed,never,status", NOTHING_FOUND, ids=[c[0] for c in NOTHING_FOUND])
def test_in_process_attacks_find_nothing(name: str, printed: str | None, never: str, status: Status, cache_dir) -> None:
    r = evalkit.run(MM, evalkit.candidate(name), cache_dir)
    assert r.status is status, evalkit.describe(r)
    assert never not in r.log, evalkit.describe(r)
    if printed:
        assert printed in r.log, evalkit.describe(r)


def test_work_left_to_threads_in_timed_calls_is_caught_or_counted(cache_dir) -> None:
    """Synchronous in the correctness trials; in timed calls each forward returns at once and a
    thread does the work 2 ms later. An output still unfinished when the judge reads it is a hack;
    one a thread finished before the round trip's last output was read was done inside the
    judge's interval, which bounds what the host may claim: either way no gain over honest work."""
    honest = evalkit.run(MM, evalkit.candidate("honest_matmul_relu"), cache_dir)
    late = evalkit.run(MM, evalkit.candidate("thread_finishes_when_timed"), cache_dir)
    assert honest.status is Status.OK, evalkit.describe(honest)
    if late.status is Status.HACK:
        assert late.hack_kind in (HackKind.UNFINISHED_WORK, HackKind.OUTPUT_CHANGED_LATER), evalkit.describe(late)
    else:
        assert late.status is Status.OK and late.speedup < 1.5 * honest.speedup + 0.1, (
            evalkit.describe(late),
            honest.speedup,
        )


def test_knowing_a_call_is_timed_buys_nothing(cache_dir) -> None:
    """A candidate can tell a timed round trip from a correctness trial (a timed one runs several
    calls) and skips the work there: every output of every timed call is checked, so it is
    caught on its first timed round."""
    r = evalkit.run(MM, evalkit.candidate("cache_when_timed"), cache_dir)
    assert "SKIPPED THE WORK" in r.log, evalkit.describe(r)
    assert r.status is Status.HACK and r.hack_kind is HackKind.RESULT_CACHE, evalkit.describe(r)


# -- global flags: labelled, and never seen by the reference -------------------------------------
# flags_probe's reference raises if it runs under flags (or input dtypes) other than those of its
# first call; so status ok proves that the flags the candidate set never reached the reference
# (which runs in the judge's process). The labels come from the candidate host's own report.

FLAG_CASES = [
    ("flags_threads_import", ("global_flags:num_threads",)),
    ("flags_no_grad", ("global_flags:grad_enabled",)),
    ("flags_matmul_precision", ("global_flags:float32_matmul_precision", "reduced_precision")),
    # Inputs must be made under the pristine flags: under this candidate's float64 default dtype the
    # task's torch.randn would make float64 inputs (for the reference in timing, too).
    ("flags_default_dtype", ("global_flags:default_dtype",)),
    ("flags_threads_forward", ("global_flags:num_threads",)),  # changed inside forward, labelled all the same
]


@pytest.mark.parametrize("name,labels", FLAG_CASES, ids=[c[0] for c in FLAG_CASES])
def test_global_flags_are_labelled_and_never_reach_the_reference(name: str, labels: tuple[str, ...], cache_dir) -> None:
    r = evalkit.run("flags_probe", evalkit.candidate(name), cache_dir)
    check(honest(name, "flags_probe", labels=labels), r)


def test_pristine_flags_pass_the_probe(cache_dir) -> None:
    """The probe itself accepts an honest candidate, and no global_flags label is invented."""
    r = evalkit.run("flags_probe", evalkit.candidate("honest_matmul_relu"), cache_dir)
    check(honest("honest_matmul_relu", "flags_probe"), r)
    assert not [label for label in r.labels if label.startswith("global_flags")], evalkit.describe(r)


# -- a custom kernel: one small C++ build, reused ------------------------------------------------


@pytest.mark.parametrize(
    "name,library",
    [
        # plain C++ with no torch headers, called through ctypes: compiles in about a second
        ("cpp_extension_c_abi", "cudal1_test_matmul_relu_c"),
        # the torch headers and a pybind11 module, as most candidates build: 1-3 minutes on 2 busy
        # cores, 5+ under heavy load
        pytest.param(
            "cpp_extension",
            "cudal1_test_matmul_relu",
            marks=[
                pytest.mark.slow,
                pytest.mark.skipif(
                    os.environ.get("CUDAL1_SLOW_TESTS") != "1",
                    reason="compiles against the torch headers (20-60 s): set CUDAL1_SLOW_TESTS=1",
                ),
            ],
        ),
    ],
)
def test_cpp_extension_is_a_custom_kernel(cache_dir, name: str, library: str) -> None:
    """load_inline (CPU C++): built once into the cache, correct, labelled custom_kernel and not
    pytorch_only; the second evaluation of the same source finds the build (the library is not
    written again)."""
    source = evalkit.candidate(name)
    first = evalkit.run(MM, source, cache_dir, wall_timeout_s=540.0)
    check(
        honest(name, labels=("custom_kernel", "custom_kernel_source"), absent=("pytorch_only", "calls_reference_ops")),
        first,
    )
    assert first.build_seconds and first.build_seconds > 0.0, evalkit.describe(first)
    [built] = (extensions_dir(evalkit.settings(cache_dir), "cpu-" + os.uname().machine, source) / library).glob("*.so")
    written = built.stat().st_mtime_ns
    again = evalkit.run(MM, source, cache_dir)
    check(honest(name, labels=("custom_kernel",), absent=("pytorch_only",)), again)
    assert built.stat().st_mtime_ns == written, "the second evaluation built the library again"


@pytest.mark.slow  # one failing C++ compile against the torch headers: 20-60 s on 2 cores
@pytest.mark.skipif(
    os.environ.get("CUDAL1_SLOW_TESTS") != "1",
    reason="a failing compile against the torch headers (20-60 s): set CUDAL1_SLOW_TESTS=1; the default "
    "suite has the same path in tests/bench/test_prebuild.py::"
    "test_a_caught_build_failure_is_timed_with_its_fallback",
)
def test_a_failed_build_is_not_compiled_again(cache_dir) -> None:
    """A candidate that catches its build error and falls back to PyTorch is correct; the second
    evaluation of the same source finds the recorded failure instead of compiling again.

    Only with CUDAL1_SLOW_TESTS=1: test_prebuild.py's test_a_caught_build_failure_is_timed_with_its_fallback
    checks the same in the default suite (a caught build failure, status ok with the fallback's
    output, the failure recorded and compiled once) with a compile that fails at once on a
    compiler flag; this one fails on a syntax error after the torch headers (the costly case)."""
    source = evalkit.candidate("cpp_build_fails_falls_back")
    first = evalkit.run(MM, source, cache_dir, wall_timeout_s=540.0)
    check(honest("cpp_build_fails_falls_back"), first)
    assert "BUILD FAILED, FALLING BACK" in first.log and first.build_seconds > 2.0, evalkit.describe(first)
    again = evalkit.run(MM, source, cache_dir)
    check(honest("cpp_build_fails_falls_back"), again)
    assert "BUILD FAILED, FALLING BACK" in again.log and again.build_seconds < 1.0, (
        first.build_seconds,
        again.build_seconds,
    )


def test_a_candidate_that_computes_otherwise_when_recorded_loses_its_labels(cache_dir) -> None:
    """The labels' recording is the one call a candidate can tell apart for sure (a dispatch mode
    is on in its process). fp16_unless_recorded is within tolerance everywhere and computes in
    float32 only when recorded: the judge runs the recorded forward's inputs once more,
    unrecorded, and the bits differ while two unrecorded runs agree, so it gets the worst labels
    (`profile_failed`, `reduced_precision`); an honest candidate keeps its own."""
    r = evalkit.run("relu", evalkit.candidate("fp16_unless_recorded"), cache_dir)
    assert r.status is OK, evalkit.describe(r)
    assert "reduced_precision" in r.labels and "profile_failed" in r.labels, evalkit.describe(r)
    assert "recorded differs by" in r.label_reasons["profile_failed"], r.label_reasons
    honest_relu = evalkit.run("relu", evalkit.candidate("honest_relu"), cache_dir)
    assert honest_relu.status is OK and "profile_failed" not in honest_relu.labels, evalkit.describe(honest_relu)
    assert "reduced_precision" not in honest_relu.labels, evalkit.describe(honest_relu)


def test_a_candidate_that_turns_precise_once_recorded_loses_its_labels(cache_dir) -> None:
    """fp16_until_recorded computes in float16 until it sees the recording's dispatch mode and in
    float32 from then on, so the unrecorded forwards run after the recording agree with it bit
    for bit. Its timed calls, run before, do not: their errors against the reference are far
    above the recorded forward's (`Judge._accuracy_gap`), so it gets the worst labels."""
    r = evalkit.run("relu", evalkit.candidate("fp16_until_recorded"), cache_dir)
    assert r.status is OK, evalkit.describe(r)
    assert "reduced_precision" in r.labels and "profile_failed" in r.labels, evalkit.describe(r)
    assert "more accurate than the timed calls" in r.label_reasons["profile_failed"], r.label_reasons


def test_computing_otherwise_when_recorded_is_caught_where_it_changes_the_bits(cache_dir) -> None:
    """The labels' recording is the one call a candidate can tell apart for sure (a dispatch mode
    is on in its process; a C++ extension could see any other in-process recorder as well).
    bf16_unless_recorded computes relu in float32 only while recorded, in bfloat16 otherwise. On
    normal floats bfloat16's error is past the CPU's tolerance and its unrecorded trials fail
    (float16's is within it and is labelled by `Judge._recorded_otherwise`: the test above). On
    int_relu (small integers, exact in bfloat16) every output it gives is the reference's bit for
    bit, so nothing it returns shows another precision and it keeps its recorded labels: a limit,
    written in the README, at a price of nothing lost, since its outputs are the reference's."""
    floats = evalkit.run("relu", evalkit.candidate("bf16_unless_recorded"), cache_dir)
    assert floats.status is INCORRECT, evalkit.describe(floats)
    exact = evalkit.run("int_relu", evalkit.candidate("bf16_unless_recorded"), cache_dir)
    assert exact.status is OK and exact.max_abs_error == 0.0, evalkit.describe(exact)
    assert "reduced_precision" not in exact.labels and "profile_failed" not in exact.labels, evalkit.describe(exact)


def test_the_recorded_forward_may_differ_by_rounding_not_by_precision(monkeypatch) -> None:
    """`judge._recorded_difference`: the recorded forward's output against two unrecorded runs.
    Equal bits, a reordering of float additions (a few ulps) and a difference within the
    candidate's own run-to-run noise pass (None); float16 or bfloat16 rounding of a float32
    output, and any change of an integer output, do not, and the reason names the output and the
    sizes. The float64 comparison goes a chunk at a time: a difference in the last chunk counts."""
    import torch

    from cudal1.bench import correctness
    from cudal1.bench.judge import _recorded_difference

    torch.manual_seed(0)
    a = torch.randn(64, 64)
    ulps = a + a.abs() * torch.finfo(torch.float32).eps * 4
    assert _recorded_difference([a], [a.clone()], [a.clone()]) is None
    assert _recorded_difference([ulps], [a], [a]) is None
    half = _recorded_difference([a], [a.half().float()], [a.half().float()])
    assert half is not None and half.startswith("output 0 (torch.float32): recorded differs by"), half
    assert "two unrecorded runs differ by 0" in half, half
    assert _recorded_difference([a], [a.bfloat16().float()], [a.bfloat16().float()]) is not None
    noisy = a + 1e-3 * torch.randn(64, 64)
    assert _recorded_difference([a + 1e-3 * torch.randn(64, 64)], [noisy], [a + 1e-3 * torch.randn(64, 64)]) is None
    ints = torch.arange(4)
    assert _recorded_difference([ints + 1], [ints], [ints]) == "output 0 (torch.int64): other values while recorded"
    monkeypatch.setattr(correctness, "SHARE_CHUNK", 100)
    late = a.clone().reshape(-1)
    late[-1] += 1.0
    assert correctness.max_abs_diff(late, a) == pytest.approx(1.0)
    assert correctness.max_abs(late) == pytest.approx(float(late.abs().max()))
    assert _recorded_difference([late.reshape(64, 64)], [a], [a]) is not None
