"""The profile of one candidate forward that a result carries for the next prompt
(`cudal1.bench.kernelprofile`, `EvalResult.profile`, `Feedback.of`)."""

from __future__ import annotations

import pytest

from cudal1.bench import kernelprofile
from cudal1.bench.result import HARNESS_LABELS, EvalResult, Status
from cudal1.policy.prompts import Feedback

from . import evalkit


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("cudal1-cache")


def test_rows_of_one_name_merge_and_the_slowest_come_first() -> None:
    rows = [("aten::mm", 300.0, 1), ("aten::relu", 50.0, 1), ("aten::mm", 200.0, 2), ("aten::add", 50.0, 4)]
    s = kernelprofile.summarize(rows, "cpu", top=2)
    assert s == {
        "device": "cpu",
        "total_ms": 0.6,  # every row's time, not only the shown ones
        "launches": 8,
        "top": [{"name": "aten::mm", "ms": 0.5, "calls": 3}, {"name": "aten::add", "ms": 0.05, "calls": 4}],
    }  # a tie (add, relu: 0.05 ms) goes by name
    with pytest.raises(ValueError):
        kernelprofile.summarize(rows, "cpu", top=0)


def test_the_judge_keeps_printable_names_of_bounded_length_and_at_most_top_rows() -> None:
    raw = {
        "device": "cuda",
        "total_ms": 1.0,
        "launches": 3,
        "top": [
            {"name": "k\x1b[2J\u00e9`\n'\"" + "x" * 500, "ms": 0.9, "calls": 1},
            {"name": "copy", "ms": 0.1, "calls": 2},
        ],
    }
    kept = kernelprofile.clean(raw, top=1)
    assert kept["top"] == [{"name": ("k?[2J?????" + "x" * 500)[: kernelprofile.NAME_CHARS], "ms": 0.9, "calls": 1}]
    template = "void at::native::kernel<float, 4>(int, float const*, float*) [with T = float]"
    assert (
        kernelprofile.clean({**raw, "top": [{"name": template, "ms": 1.0, "calls": 1}]}, 1)["top"][0]["name"]
        == template
    )
    assert kernelprofile.clean(raw, top=0) == {}


def test_a_profile_in_words() -> None:
    s = {
        "device": "cuda",
        "total_ms": 0.8125,
        "launches": 12,
        "top": [{"name": "gemm_" + "a" * 80, "ms": 0.5, "calls": 1}, {"name": "relu_kernel", "ms": 0.25, "calls": 2}],
    }
    assert kernelprofile.describe(s, name_chars=12) == (
        "one forward, profiled: 12 GPU launches, 0.812 ms on the GPU; most time in: "
        "gemm_aaaa... 0.500 ms (1 call), relu_kernel 0.250 ms (2 calls)"
    )
    assert kernelprofile.describe({}) == ""


def test_an_evaluation_carries_the_candidates_operators_into_its_report(cache_dir) -> None:
    r = evalkit.run("matmul_relu", evalkit.candidate("honest_matmul_relu"), cache_dir)
    assert r.status is Status.OK, evalkit.describe(r)
    p = r.profile
    assert p["device"] == "cpu" and 1 <= len(p["top"]) <= 5
    names = {row["name"] for row in p["top"]}
    assert names & {"aten::mm", "aten::matmul", "aten::addmm"}, p
    assert all(row["ms"] >= 0 and row["calls"] >= 1 for row in p["top"])
    assert p["total_ms"] >= sum(row["ms"] for row in p["top"]) - 1e-6
    assert EvalResult.from_dict(r.to_dict()).profile == p  # the record keeps it
    report = Feedback.of(r).report(max_chars=1000)
    assert "profile: one forward, profiled:" in report and "aten::" in report

    off = evalkit.run("matmul_relu", evalkit.candidate("honest_matmul_relu"), cache_dir, profile_top=0)
    assert off.status is Status.OK and off.profile == {}
    assert "profile:" not in Feedback.of(off).report()


def test_a_candidate_that_dies_under_the_profiler_keeps_its_result(cache_dir) -> None:
    """The profile is the evaluation's last step and feedback only: a candidate process that ends
    while profiled (its own doing, or the profiler's fault) keeps the verdict the checks and the
    timing gave it, without a profile, and nothing says the harness failed."""
    r = evalkit.run("matmul_relu", evalkit.candidate("dies_under_the_profiler"), cache_dir)
    assert r.status is Status.OK and r.speedup is not None, evalkit.describe(r)
    assert r.profile == {} and not HARNESS_LABELS.intersection(r.labels), evalkit.describe(r)
