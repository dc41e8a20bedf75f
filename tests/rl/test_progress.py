"""Issue 23, items 1, 2 and the RL parts of 3 and 4: copies, fallbacks and noise are not progress,
on the values the issue names."""

import dataclasses
import math

import pytest

from cudal1.bench.result import EvalResult, SecondOpinion, Status
from cudal1.records import Exemplar, Generation, Rollout
from cudal1.rl.advantages import rollout_advantages, tie_clusters
from cudal1.rl.buffer import ExemplarBuffer
from cudal1.rl.rewards import RewardConfig, price, second_opinion, share_identical
from cudal1.rl.similarity import normalized_code

FAIL = RewardConfig().failure_value  # -ln 10

EXEMPLAR = '''import torch
from torch.utils.cpp_extension import load_inline

SOURCE = """
#include <torch/extension.h>
__global__ void scale_kernel(const float* x, float* out, int size) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx < size) out[idx] = 2.0f * x[idx];
}
torch::Tensor scale(torch::Tensor x) {
    auto out = torch::empty_like(x);
    scale_kernel<<<(x.numel() + 255) / 256, 256>>>(x.data_ptr<float>(), out.data_ptr<float>(), x.numel());
    return out;
}
"""
ext = load_inline("scale_ext", cpp_sources="torch::Tensor scale(torch::Tensor x);", cuda_sources=SOURCE,
                  functions=["scale"])


class ModelNew(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.ext = ext

    def forward(self, x):
        return self.ext.scale(x)
'''
COMMENTED = EXEMPLAR.replace("class ModelNew", "# One fused kernel, fully coalesced.\nclass ModelNew")
RENAMED = EXEMPLAR.replace(
    "def forward(self, x):\n        return self.ext.scale(x)",
    "def forward(self, inputs):\n        return self.ext.scale(inputs)",
)
CUDA_RENAMED = EXEMPLAR.replace("idx", "i").replace("size", "n").replace("    int i", "    // the thread\n    int i")
DEAD = EXEMPLAR.replace(
    "    def forward(self, x):\n",
    "    def forward(self, x):\n        '''Scale.'''\n        x = x\n        unused = 3\n        pass\n",
)
HONEST = EXEMPLAR.replace("2.0f * x[idx]", "x[idx] + x[idx]").replace("256", "512")
REFERENCE = "import torch\n\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return 2 * x\n"


def ok(speedup, spread=0.002, labels=(), **kw):
    return EvalResult("level1/9", Status.OK, speedup=speedup, speedup_spread=spread, labels=list(labels), **kw)


# ----- item 1: copies


@pytest.mark.parametrize("copy", [COMMENTED, RENAMED, CUDA_RENAMED, DEAD], ids=["comment", "rename", "cuda", "dead"])
def test_a_cosmetic_edit_of_a_program_is_the_same_program(copy):
    assert normalized_code(copy) == normalized_code(EXEMPLAR)


def test_other_operators_or_constants_are_another_program():
    assert normalized_code(HONEST) != normalized_code(EXEMPLAR)
    assert normalized_code("import torch\ny = torch.relu(x)\n") != normalized_code("import torch\ny = torch.tanh(x)\n")
    assert normalized_code("import torch as t\nt.relu(v)\n") == normalized_code("import torch\ntorch.relu(v)\n")
    # a dead assignment with a call in it is kept: the call may have effects
    assert normalized_code("f(1)\n") != normalized_code("f(1)\ny = g()\n")
    # a class attribute is readable from outside: not dead
    assert normalized_code("class A:\n    k = 1\n") != normalized_code("class A:\n    k = 2\n")
    assert normalized_code("x = (") == "x = ("  # no parse: whitespace collapsed


def test_the_issues_copy_group_pays_the_honest_improvement_most():
    # Issue 23, item 1: after a 2.5x exemplar, [comment added, one variable renamed, honest 1.3x,
    # failure] got [+0.31, +0.88, +0.51, -1.70] (std scaling): the renamed copy beat the honest 1.3x.
    group = [
        price(ok(2.49), code=COMMENTED, shown=[EXEMPLAR]),
        price(ok(2.55), code=RENAMED, shown=[EXEMPLAR]),
        price(ok(1.3), code=HONEST, shown=[EXEMPLAR]),
        price(EvalResult("level1/9", Status.INCORRECT)),
    ]
    assert [p.reason for p in group] == ["copy", "copy", "ok", "incorrect"]
    assert [p.reward for p in group[:2]] == [FAIL, FAIL] and all(p.trainable for p in group)
    for scale in ("none", "std"):
        adv = rollout_advantages(group, [0] * 4, scale=scale)
        assert adv[0] == adv[1] == adv[3] < 0 < adv[2], scale
    v = math.log(1.3) / math.log(10)
    honest = math.log(10) * v / (1 + v)  # 0.2397
    assert rollout_advantages(group, [0] * 4) == pytest.approx(
        [-(honest - FAIL) / 4] * 2 + [3 * (honest - FAIL) / 4] + [-(honest - FAIL) / 4]
    )


def test_a_fallback_to_the_reference_ties_the_failures():
    # Issue 23, item 1: the reference as ModelNew beside an honest 1.5x and three failures got 0.79
    # of the real gain's advantage.
    fallback = price(ok(1.0, labels=["pytorch_only", "calls_reference_ops"]), code=REFERENCE)
    assert (fallback.reason, fallback.reward) == ("fallback", FAIL)
    group = [fallback, price(ok(1.5, labels=["custom_kernel"]))] + [price(EvalResult("t", Status.INCORRECT))] * 3
    adv = rollout_advantages(group, [0] * 5)
    assert adv[0] == adv[2] == adv[3] == adv[4] < 0 < adv[1]
    # with a gain it is not a fallback: the labels price the gain (0.25 × 0.75 of its log)
    assert price(ok(1.5, labels=["pytorch_only", "calls_reference_ops"])).speedup == pytest.approx(1.5**0.1875)
    # a slow PyTorch rewrite that does not call the reference's operators stays a correct answer
    assert price(ok(0.9, labels=["pytorch_only"])).reason == "ok"


def test_a_fallbacks_gain_within_the_noise_is_no_gain():
    # The reference's own operators measured 1.04-1.14x by noise on a loaded CPU (five-variant
    # run, 2026-12-04): within the pool's noise such a gain makes the response a fallback.
    labels = ["pytorch_only", "calls_reference_ops"]
    cfg = RewardConfig()  # tie_floor 0.04 ln-speedup units
    assert price(ok(1.04, labels=labels), cfg=cfg).reason == "fallback"  # ln 1.04 = 0.0392
    assert price(ok(1.05, labels=labels), cfg=cfg).reason == "ok"  # ln 1.05 = 0.0488: a gain
    # a calibrated floor (the pool's noise, ln units) widens it, for this label only
    assert price(ok(1.14, labels=labels), cfg=cfg, tie_floor=0.15).reason == "fallback"
    assert price(ok(1.17, labels=labels), cfg=cfg, tie_floor=0.15).reason == "ok"  # ln 1.17 = 0.157
    assert price(ok(1.14, labels=["custom_kernel"]), cfg=cfg, tie_floor=0.15).reason == "ok"
    # a fallback's two measurements: the slower one decides (1.3x, then 1.1x on another actor)
    check = second_opinion(ok(1.3), ok(1.1), cfg)
    assert price(dataclasses.replace(ok(1.3, labels=labels), second_opinion=check), cfg=cfg, tie_floor=0.15).reason == (
        "fallback"
    )


def test_near_copies_stay_out_of_the_buffer(tmp_path):
    buf = ExemplarBuffer(tmp_path)
    assert buf.add([Exemplar("level1/9", EXEMPLAR, 2.5)]) == 1
    assert buf.add([Exemplar("level1/9", c, 2.6) for c in (COMMENTED, RENAMED, CUDA_RENAMED, DEAD)]) == 0
    assert buf.add([Exemplar("level1/9", HONEST, 1.3)]) == 1 and buf.stats()["duplicates"] == 4


# ----- item 2: noise


def test_identical_programs_evaluated_separately_share_one_price_and_carry_no_signal():
    # Four copies of one program (cosmetic edits), evaluated separately, within the noise.
    codes = [HONEST, HONEST.replace("class", "# mine\nclass"), HONEST, HONEST.replace("self.ext", "self.k")]
    priced = [price(ok(s)) for s in (2.00, 2.05, 2.08, 1.97)]
    shared = share_identical(priced, [0] * 4, codes)
    assert len({id(p) for p in shared}) == 1 and shared[0].speedup == 2.00  # the lower median
    for scale in ("none", "std"):
        assert rollout_advantages(shared, [0] * 4, scale=scale) == [0.0] * 4
    # one group's programs never share with another group's; untrainable ones keep their own
    died = price(EvalResult("t", Status.RUNTIME_ERROR, labels=["actor_died"]))
    mixed = share_identical([priced[0], priced[1], died], [0, 1, 0], [HONEST] * 3)
    assert mixed == [priced[0], priced[1], died]
    with pytest.raises(ValueError):
        share_identical(priced, [0] * 4, codes[:3])


def test_the_std_scaling_turns_noise_into_unit_advantages_and_none_does_not():
    # Four distinct programs at one speed: separate evaluations land 5.5% apart; the 4% window
    # ties three of them and leaves the fourth out, so a split always remains.
    group = [price(ok(s)) for s in (1.97, 2.00, 2.05, 2.08)]
    assert tie_clusters([p.speedup for p in group], [p.spread for p in group], 0.04) == [0, 0, 0, 1]
    std = rollout_advantages(group, [0] * 4, scale="std")
    none = rollout_advantages(group, [0] * 4, scale="none")
    assert max(map(abs, std)) == pytest.approx(math.sqrt(3), rel=1e-3)  # 1.73: unit-size from noise
    assert max(map(abs, none)) < 0.03
    # a real difference keeps its size under "none": 1.3x against a failure
    real = rollout_advantages([price(ok(1.3)), price(EvalResult("t", Status.INCORRECT))], [0, 0], scale="none")
    assert real[0] == pytest.approx(-real[1]) and real[0] == pytest.approx(1.27, abs=0.005)


def test_a_noisy_result_does_not_tie_two_clean_ones_together():
    # the 1.5x with a 60% spread ties each slower one, but 1.0x and 1.3x are 26% apart
    assert tie_clusters([1.0, 1.3, 1.5], [0.002, 0.002, 0.6]) == [0, 1, 1]
    assert tie_clusters([1.5, 1.0, 1.3], [0.6, 0.002, 0.002]) == [1, 0, 1]
    # within 4% is a tie, 5% is not
    assert tie_clusters([2.0, 2.07], [0.0, 0.0]) == [0, 0] and tie_clusters([2.0, 2.11], [0.0, 0.0]) == [0, 1]


def test_results_below_resolution_tie_with_each_other():
    fast = [price(ok(s, labels=["below_resolution"])) for s in (30.0, 14.0)]
    assert all(p.bound for p in fast)
    assert tie_clusters([30.0, 14.0, 2.0, 1.5], [0.0] * 4, bounds=[True, True, False, False]) == [2, 2, 1, 0]
    group = fast + [price(ok(2.0))]
    adv = rollout_advantages(group, [0] * 3)
    assert adv[0] == adv[1] > 0 > adv[2]


# ----- items 3 and 4: results the reward cannot trust


@pytest.mark.parametrize("spread", [None, float("nan"), float("inf"), -0.1])
def test_an_unknown_spread_is_not_trusted_as_zero(spread):
    p = price(ok(3.0, spread=spread))
    assert (p.reason, p.speedup, p.spread) == ("ok:noisy", 1.0, math.inf)
    # a slowdown is still a slowdown
    assert price(ok(0.5, spread=spread)).speedup == 0.5


def test_a_failed_second_opinion_is_priced_as_a_failure():
    def checked(status, speedup=None):
        return dataclasses.replace(ok(9.0), second_opinion=SecondOpinion(speedup, status, 1, None, 0.1, False))

    assert (price(checked(Status.INCORRECT)).reason, price(checked(Status.INCORRECT)).reward) == (
        "second_opinion:incorrect",
        FAIL,
    )
    hack = price(checked(Status.HACK), cfg=RewardConfig(hack_reward=-5.0))
    assert (hack.reason, hack.reward, hack.trainable) == ("second_opinion:hack", -5.0, True)
    # a crash on the other actor may be the actor's: no gain, but not a failure
    crashed = price(checked(Status.RUNTIME_ERROR))
    assert (crashed.reason, crashed.speedup, crashed.reward) == ("suspect:unverified", 1.0, 0.0)
    group = [price(checked(Status.INCORRECT)), price(ok(1.2)), price(EvalResult("t", Status.INCORRECT))]
    adv = rollout_advantages(group, [0] * 3)
    assert adv[0] == adv[2] < 0 < adv[1]


def test_a_nan_engine_log_probability_keeps_its_sample_out_of_the_update():
    from cudal1.pipeline.rollouts import unusable_logprob_count, update_examples

    def rollout(sample, logprobs, advantage):
        gen = Generation([1, 2], [3, 4, 5], logprobs, "...", "stop")
        r = Rollout("level1/9", 0, 0, sample, "prompt", gen, {"code": HONEST})
        r.advantage = advantage
        return r

    rs = [
        rollout(0, [-0.1, float("nan"), -0.2], 0.5),
        rollout(1, [-0.1, -0.3, -0.2], -0.5),
        rollout(2, [-0.1, float("-inf"), -0.2], 0.0),
        rollout(3, [-0.1, float("inf"), -0.2], -0.2),
    ]
    examples = update_examples(rs)
    assert [e.advantage for e in examples] == [-0.5]
    assert all(math.isfinite(x) for e in examples for x in e.old_logprobs)
    assert unusable_logprob_count(rs) == 2  # the zero-advantage one would not have trained anyway
