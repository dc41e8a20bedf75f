"""What a fresh red team of the reward and advantage math found paying the wrong thing
(2026-12-07, main at d1affb3), each on the value that is right."""

import dataclasses
import math

import pytest

from cudal1.bench.result import EvalResult, HackKind, SecondOpinion, Status, Timing
from cudal1.rl.advantages import rollout_advantages, tie_clusters
from cudal1.rl.rewards import RewardConfig, price
from cudal1.rl.similarity import normalized_code
from cudal1.rl.turns import episode_rewards

from .test_progress import EXEMPLAR, HONEST

FAIL = RewardConfig().failure_value


def ok(speedup, spread=0.01, labels=(), **kw):
    return EvalResult("level1/9", Status.OK, speedup=speedup, speedup_spread=spread, labels=list(labels), **kw)


def failed():
    return price(EvalResult("level1/9", Status.INCORRECT))


def timing(rounds):
    med = sorted(rounds)[len(rounds) // 2]
    return Timing(med, med, min(rounds), max(rounds), list(rounds), (max(rounds) - min(rounds)) / med, 10 * len(rounds))


def noisy_slow():
    """A 1.0x whose rounds ran 0.8-1.25x: spread 0.45, under `max_spread`, so priced as "ok"."""
    return ok(1.0, spread=0.45, reference=timing([1.0, 1.0, 1.0]), candidate=timing([1.25, 1.0, 0.8]))


# ----- a candidate's own noise


def test_a_noisy_slow_result_does_not_tie_a_clean_faster_one():
    """Every round of the noisy 1.0x is below the clean 1.5x, so the measurement tells them
    apart: the 1.5x keeps its lead, and the 1.0x's jitter earns it nothing over a clean 1.0x.
    (With the larger of the two spreads as the tie window both got advantage 0.82.)"""
    noisy, clean, fast = price(noisy_slow()), price(ok(1.0)), price(ok(1.5))
    with_noise = rollout_advantages([noisy, fast, failed()], [0, 0, 0])
    without = rollout_advantages([clean, fast, failed()], [0, 0, 0])
    assert with_noise[1] > with_noise[0]
    assert with_noise == pytest.approx(without)


def test_only_the_faster_results_spread_widens_the_tie_window():
    assert tie_clusters([1.0, 1.5], [0.45, 0.01]) == [0, 1]
    assert tie_clusters([1.0, 1.5], [0.01, 0.45]) == [0, 0]  # the noisy 1.5x may be no faster


def test_an_improvement_over_a_noisy_earlier_turn_is_not_erased():
    rewards = episode_rewards([[price(noisy_slow()), price(ok(1.5))], [failed()]])
    assert rewards[0][1] > rewards[0][0]


# ----- below the timer's resolution


@pytest.mark.parametrize(
    "labels",
    [["reduced_precision", "custom_kernel"], ["calls_reference_ops", "pytorch_only"]],
    ids=["reduced_precision", "calls_reference_ops"],
)
def test_a_below_resolution_tie_keeps_what_the_labels_price(labels):
    """Below resolution every speedup is a lower bound and such results tie, but a label's
    discount is a price, not noise: the discounted one is not averaged with an honest one."""
    discounted = price(ok(5.0, labels=["below_resolution", *labels]))
    honest = price(ok(5.0, labels=["below_resolution", "custom_kernel"]))
    assert discounted.reward < honest.reward and discounted.bound and honest.bound
    adv = rollout_advantages([discounted, honest, failed()], [0, 0, 0])
    assert adv[0] < adv[1]
    # two honest ones below resolution still tie, whatever their bounds
    other = price(ok(9.0, labels=["below_resolution", "custom_kernel"]))
    adv = rollout_advantages([honest, other, failed()], [0, 0, 0])
    assert adv[0] == adv[1] > 0


# ----- copies a cosmetic edit hid

RENAMED_COPIES = {
    "extension_name": EXEMPLAR.replace('"scale_ext"', '"my_scale_ext"'),
    "host_function": EXEMPLAR.replace("scale(", "scale2(").replace('["scale"]', '["scale2"]'),
    "annotated_attribute": EXEMPLAR.replace("self.ext = ext", "self.ext: object = ext"),
    "import_order": EXEMPLAR.replace(
        "import torch\nfrom torch.utils.cpp_extension import load_inline\n",
        "from torch.utils.cpp_extension import load_inline\nimport torch\n",
    ),
}


@pytest.mark.parametrize("copy", list(RENAMED_COPIES.values()), ids=list(RENAMED_COPIES))
def test_a_renamed_copy_of_a_shown_exemplar_is_a_copy(copy):
    assert normalized_code(copy) == normalized_code(EXEMPLAR)
    assert price(ok(2.6), code=copy, shown=[EXEMPLAR]).reason == "copy"


def test_different_kernels_and_calls_stay_different_programs():
    assert normalized_code(HONEST) != normalized_code(EXEMPLAR)
    # an attribute the C source does not declare keeps its spelling
    assert normalized_code(EXEMPLAR.replace("self.ext.scale(x)", "self.ext.scale(x).relu()")) != normalized_code(
        EXEMPLAR.replace("self.ext.scale(x)", "self.ext.scale(x).tanh()")
    )
    # a string that names nothing the C source declares keeps its spelling
    assert normalized_code("import torch\nx = torch.zeros(3, device='cuda')\n") != normalized_code(
        "import torch\nx = torch.zeros(3, device='cpu')\n"
    )


# ----- price never raises


@pytest.mark.parametrize("second", [float("nan"), float("inf"), 0.0, -2.0])
def test_an_unusable_second_opinion_pays_no_gain(second):
    r = dataclasses.replace(ok(9.0), second_opinion=SecondOpinion(second, Status.OK, 1, None, 0.1, False))
    p = price(r)
    assert (p.reason, p.speedup) == ("suspect:unverified", 1.0)


def test_a_huge_finite_speedup_is_priced_at_the_credit_bound():
    p = price(ok(1e308))
    assert p.reason == "ok" and math.isfinite(p.reward)
    assert p.reward >= price(ok(1e6)).reward


# ----- the harness's failures


def test_a_harness_label_leaves_any_status_but_a_hack_out_of_training():
    p = price(ok(2.0, labels=["actor_died"]))
    assert (p.trainable, p.reason) == (False, "actor_died")
    # A caught hack is the judge's own finding: no label makes it the harness's failure.
    hack = price(EvalResult("t", Status.HACK, hack_kind=HackKind.TIMER_TAMPERING, labels=["harness_error"]))
    assert hack.trainable and hack.reward == RewardConfig().hack_value
