"""The other pools evaluate the primary pool's correct candidates for the record, in the background."""

from __future__ import annotations

import json

from cudal1.bench.result import EvalResult, Status
from cudal1.records import Candidate
from cudal1.tasks import seed_solutions


def test_other_pools_record_what_the_primary_found_correct(ray_cluster, tmp_path):
    from cudal1.actors.bench_pool import BenchmarkPools, PoolSpec
    from cudal1.pipeline.record import PoolRecorder

    settings = {
        "rounds": 1,
        "calls_per_round": 2,
        "max_calls_per_round": 2,
        "warmup_calls": 0,
        "calibration_calls": 3,
        "calibration_rounds": 2,
    }
    specs = [PoolSpec(name=n, num_actors=1, resources={"bench_test": 1}, settings=settings) for n in ("main", "other")]
    seed = seed_solutions("cpu")["level1/4"].read_text()  # the cheapest builtin task to evaluate
    candidates = [
        Candidate("level1/4", seed, origin="step4/g0/s0"),
        Candidate("level1/4", "broken", origin="step4/g0/s1"),
    ]
    primary = [EvalResult("level1/4", Status.OK, speedup=1.7), EvalResult("level1/4", Status.COMPILE_ERROR)]
    with BenchmarkPools(specs, primary="main") as pools:
        recorder = PoolRecorder(pools, tmp_path)
        assert recorder.names == ["other"]
        assert recorder.submit(4, candidates, primary) == 1  # only the correct one goes to the others
        other = pools.pool("other").spec
        assert recorder.placeable("other")
        other.resources = {"lost_arch": 1.0}  # as when the nodes that had it are gone: close stops waiting
        assert not recorder.placeable("other")
        other.resources = {"bench_test": 1}
        recorder.close(timeout_s=300)
        node = pools.pool("other").workers[0]["node_id"]
    lines = [json.loads(line) for line in recorder.path("other").read_text().splitlines()]
    assert len(lines) == 1 and recorder.recorded == {"other": 1}
    rec = lines[0]
    assert (rec["step"], rec["task_id"], rec["origin"], rec["primary_speedup"], rec["pool"]) == (
        4,
        "level1/4",
        "step4/g0/s0",
        1.7,
        "other",
    )
    assert rec["result"]["status"] == "ok" and rec["result"]["speedup"] > 0 and rec["node_id"] == node
    assert not (tmp_path / "record_main.jsonl").exists()
