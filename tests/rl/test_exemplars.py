import math
import random
from collections import Counter
from itertools import combinations

import pytest

from cudal1.records import Exemplar
from cudal1.rl.exemplars import bucket_probabilities, bucketize, sample_buckets, sample_exemplars, score

# Chi-square critical values at p = 0.001 (a correct sampler fails a test 1 time in 1000 per
# seed; the seeds are fixed, so the tests are deterministic).
CHI2_999 = {1: 10.83, 2: 13.82, 5: 20.52}


def ex(speedup, code=None, status="ok"):
    return Exemplar(task_id="level1/1", code=code or f"# {speedup}", speedup=speedup, status=status)


def chi_square(observed: Counter, expected: dict) -> float:
    n = sum(observed.values())
    assert set(observed) <= set(expected)
    return sum((observed.get(key, 0) - n * p) ** 2 / (n * p) for key, p in expected.items())


def pair_probabilities(p):
    """P({i, j}) for two successive draws without replacement, each ∝ p among the rest."""
    return {(i, j): p[i] * p[j] / (1 - p[i]) + p[j] * p[i] / (1 - p[j]) for i, j in combinations(range(len(p)), 2)}


def test_bucketize_equal_width_and_edges():
    es = [ex(s) for s in (1.0, 1.2, 2.0, 2.9, 3.0, 5.0)]
    buckets = bucketize(es, 4, scale="linear")  # bins of 1.0 over [1, 5]: [1,2) [2,3) [3,4) [4,5]
    assert [[e.speedup for e in b.members] for b in buckets] == [[1.0, 1.2], [2.0, 2.9], [3.0], [5.0]]
    assert buckets[-1].hi == pytest.approx(5.0)  # the maximum lands in the last bin
    assert buckets[0].mean == pytest.approx(1.1)
    assert [len(b.members) for b in bucketize(es, 2, scale="linear")] == [4, 2]  # [1, 3) and [3, 5]


def test_bucketize_degenerate_and_fixed_width():
    assert bucketize([], 4) == []
    same = bucketize([ex(2.0, "a"), ex(2.0, "b")], 4)
    assert len(same) == 1 and len(same[0].members) == 2
    fixed = bucketize([ex(0.4), ex(0.6), ex(1.7)], width=0.5, scale="linear")
    assert [(b.lo, b.hi) for b in fixed] == [(0.0, 0.5), (0.5, 1.0), (1.5, 2.0)]
    with pytest.raises(ValueError):
        bucketize([ex(1.0)], 0)
    with pytest.raises(ValueError):
        bucketize([ex(1.0)], width=0)
    with pytest.raises(ValueError):
        bucketize([ex(float("inf"))], 2)


def test_bucket_probabilities_is_the_softmax_over_bucket_means():
    buckets = bucketize([ex(1.0), ex(1.0, "b"), ex(2.0), ex(4.0)], 3, scale="linear")  # means 1, 2, 4; global mean 2
    probs = bucket_probabilities(buckets, tau=0.5)
    logits = [(m - 2.0) / 0.5 for m in (1.0, 2.0, 4.0)]
    z = sum(math.exp(x) for x in logits)
    assert probs == pytest.approx([math.exp(x) / z for x in logits])
    # Small tau: nearly always the best bucket; large tau: nearly uniform; never overflows.
    assert bucket_probabilities(buckets, tau=1e-3)[-1] == pytest.approx(1.0)
    assert bucket_probabilities(buckets, tau=1e6) == pytest.approx([1 / 3] * 3, rel=1e-4)
    with pytest.raises(ValueError):
        bucket_probabilities(buckets, tau=0.0)


def test_one_heavy_tailed_outlier_does_not_squeeze_the_rest_into_one_bucket():
    """Issue 9, item 13: on the linear scale a 120x outlier puts every other code in the lowest
    of 4 buckets (the draw then contrasts the outlier with anything); on the log scale the codes
    between 1x and 3x still spread over buckets of their own."""
    es = [ex(s) for s in (1.0, 1.5, 2.5, 4.0, 6.0, 10.0, 120.0)]
    linear = bucketize(es, 4, scale="linear", fence=None)  # bins of 29.75x: everything below 30x in the first
    assert [len(b.members) for b in linear] == [6, 1]
    log = bucketize(es, 4, scale="log", fence=None)  # bins of ln(120)/4 = 1.197: [1, 3.3) [3.3, 11) ... [36, 120]
    assert [[e.speedup for e in b.members] for b in log] == [[1.0, 1.5, 2.5], [4.0, 6.0, 10.0], [120.0]]
    # Capped at Tukey's fences (the default), the linear scale spreads them too: 120x counts as
    # Q3 + 1.5 IQR = 8 + 1.5 * 6 = 17x (inclusive quartiles 2.0x and 8.0x), bins of 4x.
    capped = bucketize(es, 4, scale="linear")
    assert [[e.speedup for e in b.members] for b in capped] == [[1.0, 1.5, 2.5, 4.0], [6.0], [10.0], [120.0]]
    assert capped[-1].mean == pytest.approx(17.0)


def test_one_outlier_is_not_shown_in_every_prompt():
    """Issue 23: five codes at 1.0-1.5x and one at 120x. Uncapped, even on the log scale the five
    share the lowest of 4 bins and the outlier has the top one alone: two buckets, two draws, the
    outlier in every prompt. Capped at Tukey's fences the five spread over three buckets and the
    outlier's bucket weighs in at the fence's score: shown often, not always."""
    pool = [ex(s) for s in (1.0, 1.1, 1.2, 1.3, 1.5, 120.0)]
    outlier = pool[-1]

    def shown_with_outlier(draws, **kw):
        rng = random.Random(5)
        return sum(outlier in sample_exemplars(pool, 2, 1.0, rng, **kw) for _ in range(draws))

    uncapped = bucketize(pool, 4, fence=None)
    assert [len(b.members) for b in uncapped] == [5, 1]
    assert shown_with_outlier(500, fence=None) == 500

    buckets = bucketize(pool, 4)
    assert [[e.speedup for e in b.members] for b in buckets] == [[1.0, 1.1, 1.2], [1.3], [1.5], [120.0]]
    ln = [math.log(s) for s in (1.0, 1.1, 1.2, 1.3, 1.5)]
    q1, q3 = ln[1] + 0.25 * (ln[2] - ln[1]), ln[3] + 0.75 * (ln[4] - ln[3])  # inclusive quartiles of the 6 scores
    assert buckets[-1].mean == pytest.approx(q3 + 1.5 * (q3 - q1))  # ln 2.11x, not ln 120x
    p = bucket_probabilities(buckets, tau=1.0)
    expected = sum(q for key, q in pair_probabilities(p).items() if 3 in key)  # P(the top bucket is one of two)
    assert 0.6 < expected < 0.7
    n = 6000
    shown = shown_with_outlier(n)
    assert abs(shown / n - expected) < 4 * math.sqrt(expected * (1 - expected) / n)
    with pytest.raises(ValueError):
        bucketize(pool, 4, fence=-1.0)


def test_log_scale_means_and_temperature_are_in_ln_speedup():
    buckets = bucketize([ex(1.0), ex(2.0), ex(8.0)], 3, scale="log")  # ln: 0, 0.693, 2.079
    assert [b.mean for b in buckets] == pytest.approx([0.0, math.log(2.0), math.log(8.0)])
    g = (math.log(2.0) + math.log(8.0)) / 3
    logits = [(m - g) / 1.0 for m in (0.0, math.log(2.0), math.log(8.0))]
    z = sum(math.exp(x) for x in logits)
    assert bucket_probabilities(buckets, tau=1.0) == pytest.approx([math.exp(x) / z for x in logits])
    # tau = 1 on the log scale: weights proportional to the geometric-mean speedup of each bucket
    assert bucket_probabilities(buckets, tau=1.0) == pytest.approx([1 / 11, 2 / 11, 8 / 11])
    with pytest.raises(ValueError):
        score(0.0, "log")
    with pytest.raises(ValueError):
        score(2.0, "cubic")
    with pytest.raises(ValueError):
        sample_exemplars([ex(1.0), ex(2.0), ex(3.0)], k=2, scale="cubic")


def test_bucket_draws_follow_successive_sampling_probabilities():
    p = [0.5, 0.3, 0.2]
    rng = random.Random(1234)
    n = 20000
    observed = Counter(tuple(sorted(sample_buckets(p, 2, rng))) for _ in range(n))
    assert chi_square(observed, pair_probabilities(p)) < CHI2_999[2]
    first = Counter(sample_buckets(p, 1, rng)[0] for _ in range(n))
    assert chi_square(first, dict(enumerate(p))) < CHI2_999[2]


def test_sample_exemplars_end_to_end_distribution():
    low = [ex(1.0, "l1"), ex(1.1, "l2")]
    mid = [ex(2.0, "m1")]
    high = [ex(3.0, "h1"), ex(3.1, "h2"), ex(2.95, "h3")]
    pool = low + mid + high
    buckets = bucketize(pool, 3)
    assert [len(b.members) for b in buckets] == [2, 1, 3]
    which = {id(e): i for i, b in enumerate(buckets) for e in b.members}
    p = bucket_probabilities(buckets, tau=1.0)

    rng = random.Random(7)
    pairs, high_picks = Counter(), Counter()
    for _ in range(6000):
        got = sample_exemplars(pool, k=2, tau=1.0, rng=rng, n_buckets=3)
        assert len(got) == 2 and got[0].speedup <= got[1].speedup
        b = tuple(sorted(which[id(e)] for e in got))
        assert b[0] != b[1]  # two distinct buckets whenever there are two
        pairs[b] += 1
        high_picks.update(e.code for e in got if which[id(e)] == 2)
    assert chi_square(pairs, pair_probabilities(p)) < CHI2_999[2]
    # Within a bucket the pick is uniform.
    assert chi_square(high_picks, {"h1": 1 / 3, "h2": 1 / 3, "h3": 1 / 3}) < CHI2_999[2]


def test_sample_exemplars_edge_cases():
    rng = random.Random(0)
    assert sample_exemplars([], 2, 1.0, rng) == []
    one = ex(1.5)
    assert sample_exemplars([one], 2, 1.0, rng) == [one]
    a, b = ex(2.0, "a"), ex(1.2, "b")
    assert sample_exemplars([a, b], 2, 1.0, rng) == [b, a]  # all of them, slowest first
    assert sample_exemplars([a, b], 0, 1.0, rng) == []
    # One bucket with several codes: still two distinct codes to contrast.
    flat = [ex(1.0, c) for c in "wxyz"]
    for _ in range(20):
        got = sample_exemplars(flat, 2, 1.0, rng)
        assert len(got) == 2 and got[0] is not got[1]
    # Only correct solutions with a usable speedup are ever sampled.
    dirty = [ex(9.0, "bad", status="incorrect"), ex(float("nan"), "nan"), ex(0.0, "zero"), one]
    assert sample_exemplars(dirty, 2, 1.0, rng) == [one]
    with pytest.raises(ValueError):
        sample_exemplars(flat, 2, 0.0, rng)
    with pytest.raises(ValueError):
        sample_exemplars(flat, -1, 1.0, rng)


def test_sampling_is_reproducible_from_the_seed():
    pool = [ex(1.0 + i / 7, f"c{i}") for i in range(12)]
    draws = [
        [[e.code for e in sample_exemplars(pool, 2, 0.5, rng)] for _ in range(30)]
        for rng in (random.Random(3), random.Random(3))
    ]
    assert draws[0] == draws[1]


def test_a_contrastive_sft_example_shows_strictly_slower_variants_and_targets_the_fastest():
    from cudal1.rl.exemplars import contrastive_target

    def prog(speedup, status="ok"):  # each speedup its own program (ex's default code is only a comment)
        return ex(speedup, f"def forward(x):\n    return x * {speedup}\n", status)

    shown, target = contrastive_target([prog(1.0), prog(2.5), prog(1.6), prog(0.7)], k=2)
    assert target.speedup == 2.5 and [e.speedup for e in shown] == [1.0, 1.6]  # the fastest slower ones, slowest first
    # Fewer than two variants, or none slower beyond the min gain: no example (it would teach copying).
    assert contrastive_target([prog(2.5)]) is None
    assert contrastive_target([prog(2.5), prog(2.49)], min_gain=1.01) is None
    assert contrastive_target([prog(2.5), prog(2.0, status="incorrect")]) is None
    assert contrastive_target([]) is None
    assert contrastive_target([ex(2.5, code="same"), ex(1.0, code="same")]) is None
    with pytest.raises(ValueError):
        contrastive_target([ex(1.0)], k=0)


def test_a_contrastive_sft_pair_never_contrasts_one_program_with_itself():
    """Issue 23: a variant that differs from the target only by a comment and renamed names is the
    same program measured again; its 'speedup gap' is noise, so it is neither shown against the
    target nor shown twice."""
    from cudal1.rl.exemplars import contrastive_target

    fast = "def forward(x):\n    return x.relu()\n"
    renamed = "# same program\ndef forward(inp):\n    return inp.relu()\n"
    slow = "def forward(x):\n    return x.clamp(min=0)\n"
    slow_again = "def forward(t):  # renamed\n    return t.clamp(min=0)\n"
    assert contrastive_target([ex(1.2, renamed), ex(2.0, fast)]) is None
    shown, target = contrastive_target([ex(1.2, renamed), ex(2.0, fast), ex(1.1, slow), ex(1.4, slow_again)], k=2)
    assert target.code == fast and [e.code for e in shown] == [slow_again]  # the program's fastest measurement, once
