"""Red team, fifth pass (redteam5): attacks an adversarial policy would try on the judge once each
call's input has a storage of its own bytes only (`cudal1.bench.slots.Slot.view`), each run as a
real evaluation on the CPU backend, with what the judge paid against an honest control.

Open holes are strict expected failures whose reason states the hole and what it was paid; the
README's limits list each of them. Attacks that fail are passing tests that pin the verdict.
"""

from __future__ import annotations

import math
import statistics

import pytest
import torch

import evalkit
from evalkit import SIN_CHAIN, SOFTMAX, TANH
from cudal1.bench.evaluator import evaluate
from cudal1.bench.result import HARNESS_LABELS, HackKind, Status
from cudal1.bench.judge import AFTER_BATCHED, AFTER_CANDIDATE
from cudal1.tasks.task import Task

SIN_CHAIN_WIDE = evalkit.SIN_CHAIN_WIDE


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("cudal1-cache")


def run(task: Task, source: str, cache_dir, **overrides):
    overrides = {"rounds": 2, "calls_per_round": 4, **overrides}
    return evaluate(task, source, "cpu", settings=evalkit.settings(cache_dir, **overrides))


def not_harness(r) -> bool:
    return not HARNESS_LABELS.intersection(r.labels) and r.status is not Status.INVALID_TASK


# -- (1) a round trip's input sets reached past the call's own storage -----------------------------


def test_the_control_computes_every_call_on_its_own(cache_dir) -> None:
    r = run(SIN_CHAIN, evalkit.candidate("honest_sin_chain"), cache_dir)
    assert r.status is Status.OK and "BATCHED" not in r.log, evalkit.describe(r)


@pytest.mark.parametrize("name", ["batches_via_frames", "batches_via_referrers", "batches_via_pointer"])
def test_a_call_cannot_batch_the_round_by_introspection_or_pointer(name, cache_dir) -> None:
    """The first call of a round trip looks for the round's other input sets, to compute them
    stacked and hand the outputs out one per call: through the host's frames (the loop's list of
    the sets' arguments, found by walking sys._getframe), the garbage collector (gc.get_referrers
    of the model gives the host and its `sets`) or a raw pointer (ctypes at data_ptr() +
    j*set_bytes, to the end of the slot's mapping in /proc/self/maps). On the CPU each set has a
    slot of its own, and the judge sends set j + 1's only once it holds call j's output
    (`Judge._revealed`): the frames, the collector and the mapping find one set. Before, with
    every set in the slot from the first call, each was paid: medians 2.0-3.4x against 0.9x for
    the same code call by call (sin_chain 16x256, K 4-16)."""
    r = run(SIN_CHAIN, evalkit.candidate(name), cache_dir)
    assert r.status is not Status.OK or "BATCHED" not in r.log, evalkit.describe(r)


def test_a_call_cannot_hand_in_an_output_a_later_call_completes(cache_dir) -> None:
    """Every call but the last of a round returns an output it has not written; the last
    computes the round stacked into them. On the CPU the judge copies call j's output before it
    sends set j + 1, so the first unwritten output is read as it is, and found right when read
    again after the round: `unfinished_work`."""
    r = run(SIN_CHAIN, evalkit.candidate("defers_to_the_last_call"), cache_dir)
    assert r.status is Status.HACK and r.hack_kind is HackKind.UNFINISHED_WORK, evalkit.describe(r)


def test_a_candidate_is_paid_at_most_its_one_call_difference_from_the_reference(cache_dir) -> None:
    """One-call round trips mixed into the timing pass (`EvalSettings.one_call_rounds`, on by
    default on CUDA, where a round's outputs are read after its last call) floor the batched
    figure at the candidate's one-call difference from the reference
    (`timing.one_call_floor_ms`): a candidate 100 ms slower alone and as fast as the reference
    in batched rounds is paid as about 100 ms slower, less the floor's noise allowance. Without
    the one-call rounds it is paid as the reference. (The CPU backend leaves them off: it hands
    each set over only once the last
    output is read, and its candidate host's one-call round trips ran 0.2-0.4 ms longer than the
    reference host's for the same honest code, most of sin_chain's 0.3 ms call.)"""
    # 100 ms and 16 rounds: the floor's allowance is the calibration's one-call jitter over its
    # rounds, tens of milliseconds on a loaded 2-core machine; 30 ms and 4 rounds once left 0.15x
    # in CI, 60 ms and 8 rounds 0.12-0.29x with three evaluations at once; 100 ms and 16 rounds
    # 0.013-0.077x with three at once.
    # Decided on the median of up to three evaluations: a loaded CI machine once paid one 0.32x
    # (thirty-ninth session), a floor that did not hold pays every one about 1x.
    slow = evalkit.candidate("slow_alone", delay_ms=100)
    paid: list[float] = []
    while not paid or (statistics.median(paid) >= 0.1 and len(paid) < 3):
        floored = run(SIN_CHAIN, slow, cache_dir, one_call_rounds=16)
        assert floored.status is Status.OK and "one_call_floor" in floored.labels, evalkit.describe(floored)
        assert len(floored.round_trips["one-call candidate"]) == 16, floored.round_trips.keys()
        assert len(floored.round_trips["calibration one-call candidate"]) == 16, floored.round_trips.keys()
        assert AFTER_CANDIDATE + "reference" not in floored.round_trips  # `one_call_cap_after_candidate` is off
        paid.append(floored.speedup)
    plain = run(SIN_CHAIN, slow, cache_dir)
    assert plain.status is Status.OK and "one_call_floor" not in plain.labels, evalkit.describe(plain)
    assert not any("one-call" in key for key in plain.round_trips), plain.round_trips.keys()
    # The right value: 100 ms more than a 0.3 ms call is about 0.003x. Without the floor the
    # figure is the reference's, but two rounds of four 0.3 ms calls are below what this machine
    # resolves: 0.04-1.31x on the loaded 2-core CI machine (2026-12-06), so it is only compared.
    assert statistics.median(paid) < 0.1 and plain.speedup > statistics.median(paid), (paid, plain.speedup)
    # The floor starts from the reference figure the speedup divides by: the pass's median capped
    # by the final baseline (raised by the one after the candidate where that was slower). Every
    # batched round of this candidate is below the floor, so its median is the floor, replayed
    # here from the recorded round trips (rounded to 0.1 us).
    from cudal1.bench.settings import EvalSettings
    from cudal1.bench.timing import one_call_floor_ms

    rt = floored.round_trips

    def pairs(prefix: str) -> list[tuple[float, float]]:
        walls = [[t["wall_ms"] for t in rt[f"{prefix}one-call {who}"]] for who in ("candidate", "reference")]
        return list(zip(*walls))

    cpu = EvalSettings.for_backend("cpu")
    reference_ms = min(floored.reference.median_ms, floored.baseline_ms)
    floor, _ = one_call_floor_ms(
        pairs(""), pairs("calibration "), reference_ms, cpu.one_call_margin, cpu.one_call_signed_bias
    )
    assert floored.candidate.median_ms == pytest.approx(floor, abs=1e-3), (floored.candidate.median_ms, floor)


NOISY = evalkit.inline_task(
    990,
    "noisy_reference",
    """
class Model(nn.Module):
    def forward(self, x):
        return x + 10 * torch.rand_like(x)

def get_inputs():
    return [torch.randn(16, 256)]

def get_init_inputs():
    return []
""",
)
"""A reference that differs from itself on every call (beyond any tolerance)."""


SOMETIMES_MUTATES = evalkit.inline_task(
    991,
    "sometimes_mutates",
    """
class Model(nn.Module):
    def forward(self, x):
        if x[0, 0] > 1.0:
            x[0, 1] += 1.0
        return x * 2

def get_inputs():
    return [torch.randn(16, 256)]

def get_init_inputs():
    return []
""",
)
"""A reference that writes into its input on some input sets only (a red team's, 2026-12-06)."""


def test_a_calibration_made_as_the_pass_judges_nothing(cache_dir) -> None:
    """`EvalSettings.one_call_calibration_as_pass`: the calibration's one-call rounds lie among
    its batched rounds and every round's outputs are compared with the reference host's, as in
    the timing pass, only for the idle gaps that work makes; what the checks find is not acted
    on. A reference that differs from itself makes its candidate incorrect at the first trial,
    as without them, and not a failure of the harness's calibration."""
    copy = """
import torch
import torch.nn as nn

class ModelNew(nn.Module):
    def forward(self, x):
        return x + 10 * torch.rand_like(x)
"""
    # A fixed seed fixes the order (1 in 210 orders would put every one-call round last).
    r = run(NOISY, copy, cache_dir, one_call_rounds=4, one_call_calibration_as_pass=True, seed=1)
    assert r.status is Status.INCORRECT and not_harness(r), evalkit.describe(r)
    trips = r.round_trips
    assert len(trips["calibration one-call candidate"]) == 4, trips.keys()
    # Among the batched rounds: some batched round began after the first one-call round.
    first_one_call = min(t["go_s"] for t in trips["calibration one-call reference"])
    assert max(t["go_s"] for t in trips["calibration reference"]) > first_one_call, trips
    # A reference that writes into its inputs now and then: the stand-in's input check finds it
    # in the calibration, and that is dropped too (the candidate is judged as without the checks).
    mutates = """
import torch
import torch.nn as nn

class ModelNew(nn.Module):
    def forward(self, x):
        return x * 2
"""
    for as_pass in (True, False):
        r = run(SOMETIMES_MUTATES, mutates, cache_dir, one_call_rounds=16, one_call_calibration_as_pass=as_pass, seed=1)
        assert not_harness(r), (as_pass, evalkit.describe(r))


def test_the_one_call_rounds_grow_with_their_noise_when_a_share_is_asked(cache_dir) -> None:
    """With `one_call_share` the calibration takes more one-call rounds after its first
    `one_call_rounds`, as many as `timing.one_call_round_count` asks from those first ones'
    jitter and the reference's per-call figure, up to `max_one_call_rounds`; every timing pass
    makes as many. On the CPU a one-call round trip's noise is most of sin_chain's call, so what
    the first four ask for is beyond the cap of 12, and the cap is what is made.

    With `one_call_cap_after_candidate`, once the candidate's processes are ended the reference
    host makes as many one-call round trips again, each after an idle gap drawn from the
    calibration's before its reference one-call trips (`timing.idle_gaps_ms`), recorded under
    `judge.AFTER_CANDIDATE`; the floor's cap takes them (`timing.one_call_floor_ms`)."""
    from cudal1.bench.timing import idle_gaps_ms, jitter, one_call_round_count

    r = run(
        SIN_CHAIN,
        evalkit.candidate("honest_sin_chain"),
        cache_dir,
        one_call_rounds=4,
        one_call_share=0.05,
        max_one_call_rounds=12,
        one_call_cap_after_candidate=True,
    )
    assert r.status is Status.OK, evalkit.describe(r)
    trips = r.round_trips
    first = [
        c["wall_ms"] - ref["wall_ms"]
        for c, ref in zip(trips["calibration one-call candidate"][:4], trips["calibration one-call reference"][:4])
    ]
    k = r.calls_per_round
    reference_ms = statistics.median([t["own_ms"] / k for t in trips["calibration reference"][1:]])
    asked = one_call_round_count(4, 10**6, jitter(first), reference_ms, 1.0, 0.05)
    assert asked > 12, (asked, first, reference_ms)
    assert len(trips["calibration one-call candidate"]) == 12, len(trips["calibration one-call candidate"])
    assert len(trips["one-call candidate"]) == 12 and len(trips["one-call reference"]) == 12, trips.keys()
    # Without a share the first four alone: the floor's test above.
    after = trips[AFTER_CANDIDATE + "reference"]
    assert min(t["go_s"] for t in after) > max(
        t["go_s"] for k, ts in trips.items() if k != AFTER_CANDIDATE + "reference" for t in ts
    )
    # As many as the pass made, each at least as long after the trip before as the shortest of
    # the calibration's gaps (the first follows the baseline's batched rounds).
    calibration = {k: v for k, v in trips.items() if k.startswith("calibration ")}
    waited = idle_gaps_ms(trips, AFTER_CANDIDATE + "reference")
    given = idle_gaps_ms(calibration, "calibration one-call reference")
    assert len(after) == 12 and len(waited) == 12 and given, (len(after), waited, given)
    assert min(waited) >= min(given) - 0.01, (waited, given)


def test_the_fixed_cost_cap_after_the_candidate_comes_from_the_clean_baselines_round_trips(cache_dir) -> None:
    """The reference's batched round trips once the candidate's processes are ended (the clean
    baseline after the candidate) are recorded under `judge.AFTER_BATCHED`, after everything
    else. With `fixed_cost_cap_after_candidate` what the candidate host may leave unexplained is
    recomputed with them (`timing.allowed_fixed_cost`): the recorded `overhead_ms` is that
    figure from the record's own round trips."""
    from cudal1.bench.timing import allowed_fixed_cost, jitter

    r = run(SIN_CHAIN, evalkit.candidate("honest_sin_chain"), cache_dir, fixed_cost_cap_after_candidate=True)
    assert r.status is Status.OK, evalkit.describe(r)
    trips = r.round_trips
    after = trips[AFTER_BATCHED + "reference"]
    assert len(after) >= 2 and min(t["go_s"] for t in after) > max(
        t["go_s"] for k, ts in trips.items() if k != AFTER_BATCHED + "reference" for t in ts
    )

    replay = evalkit.benchmark("allowance_replay")
    fixed = replay.fixed_costs  # wall - own; skips the calibration's warm-up
    cal_r, cal_c = fixed(trips["calibration reference"], True), fixed(trips["calibration candidate"], True)
    after_ms = fixed(trips[AFTER_BATCHED + "reference"], False)
    expected = allowed_fixed_cost(
        fixed(trips["reference"], False), cal_r, cal_c, jitter(cal_r + cal_c), after_reference_ms=after_ms
    )
    assert r.overhead_ms == pytest.approx(expected, abs=2e-3), (r.overhead_ms, expected)
    # The replay's rule of this setting reproduces the judged speedup from the record alone.
    tolerance = evalkit.settings(cache_dir).unexplained_tolerance
    assert replay.replay(r.to_dict(), "after_cap", tolerance) == pytest.approx(r.speedup, rel=1e-3), r.speedup
    plain = run(SIN_CHAIN, evalkit.candidate("honest_sin_chain"), cache_dir)
    assert plain.status is Status.OK and len(plain.round_trips[AFTER_BATCHED + "reference"]) >= 2, plain.round_trips


# -- (2) calls of a round trip overlapped through threads ------------------------------------------


def test_the_control_finishes_every_output_before_it_returns(cache_dir) -> None:
    r = run(SIN_CHAIN_WIDE, evalkit.candidate("honest_sin_chain"), cache_dir)
    assert r.status is Status.OK and "PIPELINED" not in r.log, evalkit.describe(r)


def test_calls_of_a_round_cannot_overlap_through_threads(cache_dir) -> None:
    """Every call but the round trip's last returns its output unfinished and leaves it to a pool
    of two threads; the last computes its own and waits for the pool (a call finds its place in
    the round from its input's address and /proc/self/maps). The judge copies each call's output
    before it reveals the next set, so an unfinished output is what it holds: the timed round's
    check (`unfinished_work` or a wrong output) ends it. Before the reveal, every output was
    complete by the round's end and the overlap was paid 1.1-9.6x."""
    r = run(SIN_CHAIN_WIDE, evalkit.candidate("pipelines_the_round"), cache_dir)
    assert r.status is not Status.OK or "PIPELINED" not in r.log, evalkit.describe(r)


def test_no_input_the_host_maps_changes_under_it(cache_dir) -> None:
    """A thread of the candidate samples every input slot this process maps, every 0.2 ms,
    through /proc/self/mem. Each set's slot is written before it is sent (set 0 before the go,
    the later sets before the round, each sent with its reveal), so no sample ever changes while
    its mapping lasts: nothing can be computed on inputs while the judge writes them, or before
    their call is due. With the later sets written into the round's one slot at their reveal, the
    watcher saw them change (a thread could have started on them while the judge's writing was
    off its clock)."""
    r = run(SIN_CHAIN_WIDE, evalkit.candidate("watches_the_slots"), cache_dir)
    assert r.status is Status.OK and "SLOTS" in r.log, evalkit.describe(r)  # it watched
    assert "WATCHED" not in r.log, evalkit.describe(r)


# -- (3) telling the shifted trials apart by magnitude ----------------------------------------------


def test_exact_only_where_the_input_looks_shifted_is_wrong_in_a_nominal_trial(cache_dir) -> None:
    """The shifted trials (x*4-2, x*-3+1) are the only inputs with |x| above 6, so a candidate can
    tell them apart and compute exactly there; but trials 1-5 are of the task's nominal
    distribution, as every timed call is, and every timed output is checked: sloppiness kept for
    nominal inputs is wrong in trial 1, before any shifted trial runs."""
    r = run(TANH, evalkit.candidate("exact_only_on_wide_inputs"), cache_dir, calls_per_round=2)
    assert r.status is Status.INCORRECT and r.message.startswith("trial 1"), evalkit.describe(r)
    assert "EXACT PATH" not in r.log, evalkit.describe(r)


# -- (4) exceptions the host might take for its own failure ------------------------------------------

KINDS = ["system_exit", "keyboard_interrupt", "generator_exit", "base_exception", "unprintable"]


@pytest.mark.parametrize("where", ["import", "init", "forward"])
@pytest.mark.parametrize("kind", KINDS)
def test_anything_the_candidate_raises_is_its_own_failure(kind, where, cache_dir) -> None:
    """SystemExit, KeyboardInterrupt, GeneratorExit, a BaseException of its own, or an exception
    whose str() and repr() raise, at import, in ModelNew() or in forward: the host catches
    BaseException, and an exception it cannot print takes the host down (runtime_error,
    worker_crashed). Never a harness failure, which the reward would leave out of training."""
    r = evalkit.run("matmul_relu", evalkit.candidate("raises_something", kind=kind, where=where), cache_dir)
    expected = {Status.RUNTIME_ERROR} | ({Status.COMPILE_ERROR} if where == "import" else set())
    assert r.status in expected and not_harness(r), evalkit.describe(r)


@pytest.mark.parametrize("kind", ["system_exit", "unprintable"])
def test_raising_only_while_recorded_loses_labels_or_the_result(kind, cache_dir) -> None:
    """Raising only in the forward recorded for labels (a dispatch mode is on): a printable
    exception gets the worst labels (profile_failed, reduced_precision), an unprintable one takes
    the host down after everything was timed (runtime_error). Neither is the harness's failure."""
    r = evalkit.run("matmul_relu", evalkit.candidate("raises_something", kind=kind, where="recorded"), cache_dir)
    if kind == "unprintable":
        assert r.status is Status.RUNTIME_ERROR and not_harness(r), evalkit.describe(r)
    else:
        assert r.status is Status.OK and {"profile_failed", "reduced_precision"} <= set(r.labels), evalkit.describe(r)


def test_a_message_in_plain_unicode_keeps_its_text(cache_dir) -> None:
    """The control of the next test: ordinary non-ASCII text in an exception comes back as it was."""
    r = evalkit.run("matmul_relu", evalkit.candidate("raises_something", kind="unicode", where="forward"), cache_dir)
    assert r.status is Status.RUNTIME_ERROR and "résumé ✓" in r.message, evalkit.describe(r)


@pytest.mark.parametrize("where", ["import", "forward"])
def test_a_message_from_the_candidate_is_valid_text(where, cache_dir) -> None:
    """An exception message holding a lone surrogate (the wire's JSON escapes it and decodes it
    back) reaches the result as valid UTF-8 (`evaluator.valid_text`): a refinement prompt quoting
    that feedback can be tokenized. The status stays the candidate's."""
    r = evalkit.run("matmul_relu", evalkit.candidate("raises_something", kind="surrogate", where=where), cache_dir)
    assert r.status in (Status.RUNTIME_ERROR, Status.COMPILE_ERROR) and not_harness(r), evalkit.describe(r)
    r.message.encode("utf-8")
    r.log.encode("utf-8")
    assert "\\ud8" in r.message.lower() or "\\udc" in r.message.lower(), r.message  # escaped, not dropped


# -- (5) what the tolerance allows on outputs far below it -----------------------------------------


def test_a_softmax_answered_uniformly_where_the_input_looks_nominal_is_wrong_in_trial_1(cache_dir) -> None:
    """1/n everywhere on nominal inputs (exact where |x| > 6): the softmax lies within the absolute
    tolerance of 1/n except where x is above about 2.1, which every randn row of 4096 holds."""
    r = run(SOFTMAX, evalkit.candidate("softmax_uniform"), cache_dir, calls_per_round=2)
    assert r.status is Status.INCORRECT and r.message.startswith("trial 1"), evalkit.describe(r)


def test_a_relative_error_of_two_percent_on_outputs_of_order_one_is_refused() -> None:
    """The control of the next test: on outputs of magnitude about 1 the tolerance is relative."""
    from cudal1.bench.correctness import compare_values

    torch.manual_seed(0)
    ref = torch.tanh(torch.randn(64, 1024)) * 3
    ok, _, _ = compare_values(ref * 1.02, ref)
    assert not ok


def test_a_softmax_with_no_reduction_is_refused(cache_dir) -> None:
    """exp(x) over the normalizer a randn row has on average (4096 * e^0.5), off by up to 5% on
    every value and exact where the input looks shifted: every value lies far below the absolute
    allowance an output of magnitude 1 gets (1e-3), which the judge no longer gives an output of
    magnitude 2.4e-4 (`correctness.noise_scale_floor`, measured on the first trial): wrong in
    trial 1. Before, it passed all 7 trials in 3 evaluations of 3."""
    r = run(SOFTMAX, evalkit.candidate("softmax_expected_normalizer"), cache_dir, calls_per_round=2)
    assert r.status is Status.INCORRECT and r.message.startswith("trial 1"), evalkit.describe(r)


def test_an_exact_softmax_computed_otherwise_passes(cache_dir) -> None:
    """The control: the softmax written out (max subtracted, exp, sum, divide), which rounds
    otherwise than torch.softmax, passes every trial under the allowance held to the output's
    magnitude."""
    r = run(SOFTMAX, evalkit.candidate("softmax_written_out"), cache_dir, calls_per_round=2)
    assert r.status is Status.OK and r.correctness_trials >= 5, evalkit.describe(r)


def test_the_allowance_follows_the_output_magnitude_unless_that_is_noise() -> None:
    """`noise_scale_floor`: a softmax over 4096 columns (magnitude 2.4e-4, moving by about 1e-11
    at the rounding level) is held to its own magnitude, so 5% off everywhere is refused and the
    float64 answer passes; a mean of normalized values (magnitude 1e-8, all of it rounding noise)
    keeps an allowance at its noise, so the float64 answer passes there too."""
    from cudal1.bench.correctness import compare_values, noise_scale_floor
    from cudal1.bench.inputs import rounding_perturbed

    torch.manual_seed(0)
    x = torch.randn(16, 4096)
    ref = torch.softmax(x, dim=1)
    floor = noise_scale_floor(torch.softmax(rounding_perturbed([x])[0], dim=1), ref)
    assert floor < 1e-3
    cand = torch.exp(x) / (x.shape[1] * math.exp(0.5))
    assert compare_values(cand, ref)[0]  # the allowance of magnitude 1: the hole
    assert not compare_values(cand, ref, scale_floor=floor)[0]
    assert compare_values(torch.softmax(x.double(), dim=1).float(), ref, scale_floor=floor)[0]

    def centred(v: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.layer_norm(v, v.shape[1:]).mean(dim=(1, 2, 3))

    v = torch.randn(8, 16, 32, 32)
    noise_ref = centred(v)
    assert float(noise_ref.abs().mean()) < 1e-6
    noise_floor = noise_scale_floor(centred(rounding_perturbed([v])[0]), noise_ref)
    assert noise_floor > float(noise_ref.abs().mean())
    assert compare_values(centred(v.double()).float(), noise_ref, scale_floor=noise_floor)[0]
    assert not compare_values(noise_ref + 5e-4, noise_ref, scale_floor=noise_floor)[0]
    assert compare_values(noise_ref + 5e-4, noise_ref)[0]  # the allowance of magnitude 1 takes it


def test_the_moved_and_nominal_outputs_pair_their_tensors_whatever_the_sequence_type() -> None:
    """`_tensor_pairs`, which both the scale floors and the ill-conditioning check read: tensor
    leaves paired in order, a list and a tuple one kind of sequence, a Python number that moved
    with the inputs no reason to refuse the pairing; a different tree or a tensor turned into a
    value is no pairing (None)."""
    from cudal1.bench.judge import _tensor_pairs

    a, b, c = torch.ones(2), torch.zeros(3), torch.full((2,), 2.0)
    pairs = _tensor_pairs([c, 0.5, {"k": b}], (a, 0.25, {"k": b}))
    assert [(got is c, want is a) for got, want in pairs[:1]] == [(True, True)] and len(pairs) == 2
    assert pairs[1][0] is b and pairs[1][1] is b
    assert _tensor_pairs((a, b), (a,)) is None
    assert _tensor_pairs((a, 1.0), (a, b)) is None
    assert _tensor_pairs({"x": a}, {"y": a}) is None


# -- (6) the host's own reports switched off --------------------------------------------------------


@pytest.mark.parametrize(
    "cheat,kinds",
    [
        ("relu_in_place", (HackKind.INPUT_MUTATED, HackKind.OUTPUT_ALIASES_INPUT)),
        ("one_buffer", (HackKind.OUTPUT_CHANGED_LATER,)),
    ],
)
def test_with_the_hosts_reports_silenced_the_judges_own_checks_catch_it(cheat, kinds, cache_dir) -> None:
    """The host runs in the candidate's process, so its reports can be switched off (found through
    gc.get_referrers, told that no candidate is loaded). The judge does not rely on them: it
    compares every input with what it wrote, and asks which pages hold each output (a relu in
    place on the input: input_mutated, or output_aliases_input where the parent's read of the
    output comes first), copies each call's output as it is placed and reads a sample of them again before the
    next round trip (one buffer for every call: each copy is right, the buffer then holds the
    round's last output, output_changed_later)."""
    r = evalkit.run("relu", evalkit.candidate("silences_the_host", cheat=cheat), cache_dir, calls_per_round=4)
    assert "SILENCED" in r.log, evalkit.describe(r)
    assert r.status is Status.HACK and r.hack_kind in kinds, evalkit.describe(r)
