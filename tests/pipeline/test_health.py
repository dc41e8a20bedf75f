"""The weight-sync check (issue 25): a broken sync asks for one re-sync, then stops the run."""

from __future__ import annotations

import math

import pytest

from cudal1.actors.health import WeightSyncBroken
from cudal1.pipeline.health import SyncWatch


def test_a_gap_within_the_limit_never_asks_anything():
    watch = SyncWatch(0.1)
    assert [watch.check(s, g, 0) for s, g in enumerate([3e-7, 0.02, 0.1, None])] == [False] * 4


def test_one_excess_asks_for_a_resync_and_a_good_step_after_it_clears_it():
    watch = SyncWatch(0.1)
    assert watch.check(0, 0.01, 0) is False
    assert watch.check(1, 0.2, 0) is True  # the figure: 0.015 rose to 0.2
    assert watch.resynced_at == 1
    assert watch.check(2, 0.012, 0) is False
    assert watch.resynced_at is None
    assert watch.check(3, 0.3, 0) is True  # a later excess gets its own re-sync


def test_an_excess_right_after_the_resync_stops_the_run_with_the_figures():
    watch = SyncWatch(0.1)
    assert watch.check(4, 0.2, 0) is True
    with pytest.raises(WeightSyncBroken, match=r"step 5: .* gap is 0.25 nats/token \(limit 0.1; 0.2 at step 4"):
        watch.check(5, 0.25, 0)


def test_off_policy_steps_are_not_judged_and_do_not_clear_a_pending_resync():
    watch = SyncWatch(0.1)
    assert watch.check(0, 2.25, 1) is False  # async drift (docs/training.md: 0.39-2.25 at lr 5e-2)
    assert watch.check(1, 0.2, 0) is True
    assert watch.check(2, 0.01, 1) is False
    assert watch.resynced_at == 1
    with pytest.raises(WeightSyncBroken):
        watch.check(3, 0.2, 0)


def test_off_and_bad_values():
    assert SyncWatch(None).check(0, 10.0, 0) is False
    with pytest.raises(WeightSyncBroken, match="gap is nan"):
        SyncWatch(0.1).check(0, math.nan, 0)
    for bad in (0.0, -1.0, math.inf, math.nan):
        with pytest.raises(ValueError):
            SyncWatch(bad)


def test_rollouts_older_than_the_bound_are_too_stale():
    from cudal1.pipeline.health import too_stale

    assert too_stale([5, 4, 3, 5], 5, 1) == [False, False, True, False]
    assert too_stale([5, 4], 5, 0) == [False, True]
    assert too_stale([], 5, 1) == []
    with pytest.raises(ValueError):
        too_stale([1], 1, -1)
