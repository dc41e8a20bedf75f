"""The tie window learned from pairs of measurements of one program (`cudal1.rl.noise`, issue 23)."""

import math
import random
from statistics import NormalDist

import pytest

from cudal1.bench.result import EvalResult, Label, SecondOpinion, Status, Timing
from cudal1.rl.noise import ALL, TieNoise, noise_key, program_id, reference_ms, size_bucket


def q90_of_pair_differences(sigma: float) -> float:
    """The 0.9 quantile of |e1 - e2| for e1, e2 ~ N(0, sigma) independent: |N(0, sigma·√2)|."""
    return NormalDist().inv_cdf(0.95) * sigma * math.sqrt(2)


def noisy_pairs(noise: TieNoise, pool: str, bucket: str, sigma: float, n: int, rng: random.Random) -> None:
    for _ in range(n):
        true = rng.uniform(0.5, 4.0)
        noise.add_pair(pool, bucket, true * math.exp(rng.gauss(0, sigma)), true * math.exp(rng.gauss(0, sigma)))


def test_a_known_noise_level_is_recovered_within_tolerance():
    rng = random.Random(0)
    for sigma in (0.03, 0.08):
        noise = TieNoise(tie_floor=0.0, window=2000, max_floor=1.0)
        noisy_pairs(noise, "sm_90", "0.01-0.1ms", sigma, 2000, rng)
        expected = q90_of_pair_differences(sigma)  # 0.070 for 3%, 0.186 for 8%
        assert noise.floor("sm_90", "0.01-0.1ms") == pytest.approx(expected, rel=0.08)


def test_below_the_minimum_count_the_configured_floor_holds():
    noise = TieNoise(tie_floor=0.04, min_pairs=20)
    for _ in range(19):
        noise.add_pair("sm_90", "0.01-0.1ms", 1.0, 1.2)  # d = 0.182 each
    assert noise.pairs("sm_90", "0.01-0.1ms") == 19
    assert noise.floor("sm_90", "0.01-0.1ms") == 0.04
    noise.add_pair("sm_90", "0.01-0.1ms", 1.0, 1.2)
    assert noise.floor("sm_90", "0.01-0.1ms") == pytest.approx(math.log(1.2))


def test_a_quiet_pool_never_goes_below_the_config_floor_and_a_wild_one_is_capped():
    noise = TieNoise(tie_floor=0.04, min_pairs=5, max_floor=0.25)
    for _ in range(10):
        noise.add_pair("sm_90", "1-10ms", 2.00, 2.01)  # 0.5%: quieter than the floor
        noise.add_pair("cpu-x86_64", "1-10ms", 1.0, 2.0)  # ln 2 = 0.69: beyond the cap
    assert noise.floor("sm_90", "1-10ms") == 0.04
    assert noise.floor("cpu-x86_64", "1-10ms") == 0.25


def test_buckets_and_pools_are_separate_and_a_thin_bucket_falls_back_to_its_pool():
    rng = random.Random(1)
    noise = TieNoise(tie_floor=0.0, min_pairs=20, max_floor=1.0, window=1000)
    for _ in range(500):  # interleaved: the pool's own window (also 1000) holds both sizes
        noisy_pairs(noise, "sm_90", "1-10ms", 0.01, 1, rng)
        noisy_pairs(noise, "sm_90", "0.01-0.1ms", 0.10, 1, rng)
    small, large = noise.floor("sm_90", "0.01-0.1ms"), noise.floor("sm_90", "1-10ms")
    assert small == pytest.approx(q90_of_pair_differences(0.10), rel=0.1)
    assert large == pytest.approx(q90_of_pair_differences(0.01), rel=0.1)
    # A bucket with too few pairs takes the pool's quantile over all sizes (between the two).
    noisy_pairs(noise, "sm_90", "0.1-1ms", 0.10, 5, rng)
    assert noise.floor("sm_90", "0.1-1ms") == noise.floor("sm_90", ALL)
    assert large < noise.floor("sm_90", ALL) < small
    # Another pool learned nothing: the configured floor.
    assert noise.floor("cpu-x86_64", "0.01-0.1ms") == 0.0


def test_the_window_is_bounded_and_keeps_the_newest():
    noise = TieNoise(tie_floor=0.0, min_pairs=2, window=4, programs=2, max_floor=1.0)
    for _ in range(4):
        noise.add_pair("p", "b", 1.0, 2.0)
    for _ in range(4):
        noise.add_pair("p", "b", 1.0, 1.1)
    assert noise.pairs("p", "b") == 4
    assert noise.floor("p", "b") == pytest.approx(math.log(1.1))
    for i in range(5):
        noise.observe(EvalResult("t", Status.OK, arch="p", speedup=1.5), program=f"prog{i}")
    assert list(noise._last) == ["prog3", "prog4"]


def result(speedup, ref_ms=0.05, arch="sm_90", opinion=None, labels=(), status=Status.OK):
    timing = Timing(ref_ms, ref_ms, ref_ms, ref_ms, [ref_ms], 0.0, 10)
    return EvalResult(
        "level1/1",
        status,
        arch=arch,
        speedup=speedup,
        reference=timing,
        baseline_ms=ref_ms * 1.02,
        labels=list(labels),
        second_opinion=opinion,
    )


def test_keys_come_from_the_result_reference_time_and_arch():
    r = result(2.0, ref_ms=0.05)
    assert reference_ms(r) == 0.05  # the smaller of the baseline and the reference median
    assert noise_key(r) == ("sm_90", "0.01-0.1ms")
    assert noise_key(EvalResult("t", Status.OK, backend="cpu")) == ("cpu", "unknown")
    assert [size_bucket(x) for x in (0.005, 0.01, 0.5, 3.0, 99.0, 100.0, None, -1.0)] == [
        "lt0.01ms",
        "0.01-0.1ms",
        "0.1-1ms",
        "1-10ms",
        "10-100ms",
        "ge100ms",
        "unknown",
        "unknown",
    ]


def test_second_opinions_and_repeated_programs_make_pairs_and_bounds_or_failures_do_not():
    noise = TieNoise(min_pairs=1)
    agree = SecondOpinion(2.2, Status.OK, 1, 0.1, 0.1, True)
    assert noise.observe(result(2.0, opinion=agree)) == 1
    assert noise.pairs("sm_90", "0.01-0.1ms") == 1
    assert noise.floor("sm_90", "0.01-0.1ms") == pytest.approx(math.log(1.1))
    crashed = SecondOpinion(None, Status.RUNTIME_ERROR, 1, None, 0.1, False)
    assert noise.observe(result(2.0, opinion=crashed)) == 0
    assert noise.observe(result(None, status=Status.INCORRECT), program="a") == 0
    assert noise.observe(result(3.0, labels=[Label.BELOW_RESOLUTION]), program="a") == 0
    prog = program_id("level1/1", "def f(): pass")
    assert noise.observe(result(1.50), program=prog) == 0  # first measurement of the program
    assert noise.observe(result(1.53), program=prog) == 1  # measured again in a later step
    assert noise.observe(result(1.60, arch="cpu-x86_64"), program=prog) == 0  # another pool: no pair
    assert noise.pairs("sm_90", ALL) == 2
    assert sorted(noise._diffs[("sm_90", "0.01-0.1ms")]) == pytest.approx(sorted([math.log(1.1), math.log(1.53 / 1.5)]))


def test_the_state_survives_a_round_trip_through_json():
    import json

    rng = random.Random(2)
    noise = TieNoise(min_pairs=10)
    noisy_pairs(noise, "sm_90", "0.01-0.1ms", 0.1, 50, rng)
    noise.observe(result(1.5), program="p")
    back = TieNoise.from_dict(json.loads(json.dumps(noise.to_dict())))
    assert back.floor("sm_90", "0.01-0.1ms") == noise.floor("sm_90", "0.01-0.1ms") > 0.04
    assert back.observe(result(1.6), program="p") == 1  # the remembered program pairs after the resume
    smaller = TieNoise.from_dict(noise.to_dict(), window=10, min_pairs=10)
    assert smaller.pairs("sm_90", "0.01-0.1ms") == 10


def test_metrics_name_the_floors_in_use():
    noise = TieNoise(min_pairs=1)
    noise.add_pair("sm_90", "0.01-0.1ms", 1.0, 1.2)
    m = noise.metrics(used=[("sm_90", "1-10ms")])
    assert m["reward/tie_floor/sm_90/0.01-0.1ms"] == pytest.approx(math.log(1.2))
    assert m["reward/tie_pairs/sm_90/0.01-0.1ms"] == 1.0
    assert m["reward/tie_floor/sm_90/1-10ms"] == pytest.approx(math.log(1.2))  # falls back to the pool's
    assert m["reward/tie_pairs/sm_90/1-10ms"] == 0.0
    assert "reward/tie_floor/sm_90/all" in m


def test_bad_settings_and_speedups_raise():
    for bad in (dict(quantile=0.0), dict(min_pairs=0), dict(max_floor=0.01), dict(window=5), dict(programs=-1)):
        with pytest.raises(ValueError):
            TieNoise(**bad)
    with pytest.raises(ValueError):
        TieNoise().add_pair("p", "b", 0.0, 1.0)
    with pytest.raises(ValueError):
        TieNoise().add_pair("p", "b", math.inf, 1.0)


def test_the_run_builds_it_from_the_reward_config():
    from cudal1.rl.noise import tie_noise
    from cudal1.rl.rewards import RewardConfig

    cfg = RewardConfig(tie_floor=0.05, tie_quantile=0.8, tie_min_pairs=3, tie_max_floor=0.3)
    noise = tie_noise(cfg)
    assert (noise.tie_floor, noise.quantile, noise.min_pairs, noise.max_floor) == (0.05, 0.8, 3, 0.3)
    for d in (0.06, 0.07, 0.08, 0.09, 0.5):
        noise.add_pair("sm_90", "1-10ms", 1.0, math.exp(d))
    assert noise.floor("sm_90", "1-10ms") == pytest.approx(0.09)  # 4th of 5: ceil(0.8 x 5)
    assert tie_noise(RewardConfig(tie_calibration=False)) is None
    with pytest.raises(ValueError):
        tie_noise(cfg, {"diffs": []})
