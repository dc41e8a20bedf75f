import math

import pytest

from cudal1.training.schedule import lr_at


def test_cosine_starts_at_the_base_and_ends_at_its_floor():
    assert lr_at(5e-3, 0, 300) == pytest.approx(5e-3)
    assert lr_at(5e-3, 150, 300) == pytest.approx(5e-3 * (0.05 + 0.95 * 0.5))  # halfway: cos(pi/2) = 0
    last = lr_at(5e-3, 299, 300)
    assert 5e-3 * 0.05 < last < 5e-3 * 0.051  # just above the floor: 0.05 + 0.95 (1 + cos(299 pi/300)) / 2
    assert last == pytest.approx(5e-3 * (0.05 + 0.95 * 0.5 * (1 + math.cos(math.pi * 299 / 300))))
    assert lr_at(5e-3, 300, 300) == lr_at(5e-3, 400, 300) == pytest.approx(2.5e-4)
    rates = [lr_at(1.0, u, 50) for u in range(50)]
    assert all(a > b for a, b in zip(rates, rates[1:]))  # strictly falling
    assert lr_at(1.0, 10, 50, min_ratio=0.0) == pytest.approx(0.5 * (1 + math.cos(math.pi * 0.2)))


def test_constant_and_a_single_unit_keep_the_base():
    assert lr_at(3e-4, 7, 10, schedule="constant") == 3e-4
    assert lr_at(3e-4, 0, 1) == pytest.approx(3e-4)  # the smoke config's one SFT epoch


@pytest.mark.parametrize(
    "kwargs",
    [
        {"schedule": "linear"},
        {"total": 0},
        {"unit": -1},
        {"base": 0.0},
        {"base": float("nan")},
        {"min_ratio": 1.5},
        {"min_ratio": -0.1},
    ],
)
def test_bad_arguments_are_refused(kwargs):
    args = {"base": 1e-3, "unit": 0, "total": 10, **kwargs}
    with pytest.raises(ValueError):
        lr_at(**args)
