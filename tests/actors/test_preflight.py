"""A job that asks the cluster for more than it has fails at once, saying what each role needs and
what each node has (issue 11 §4); one that fits starts as before."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir

from cudal1.actors.preflight import ActorNeed, InsufficientResources, check_cluster, job_needs, total_need, unplaced
from cudal1.config import load_config, register_schema

ROOT = Path(__file__).resolve().parents[2]
register_schema()


def composed(name: str = "config", overrides: list[str] = ()):
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base=None):
        return load_config(compose(name, overrides=["run_dir=/tmp/unused", *overrides]))


def test_packing_places_each_actor_on_one_node():
    gpu = ActorNeed.of("learner", 2, num_cpus=1, num_gpus=1)
    pool = ActorNeed.of("pool", 2, num_cpus=1, num_gpus=1, accelerator_type="H100")
    nodes = [{"CPU": 8, "GPU": 2, "accelerator_type:H100": 1}, {"CPU": 8, "GPU": 2}]
    assert unplaced([gpu, pool], nodes) == []
    # Four GPUs in total but only the first node has H100s: one learner rank must go to the
    # second node so both pool actors find room on the first.
    nodes = [{"CPU": 8, "GPU": 2, "accelerator_type:H100": 1}, {"CPU": 8, "GPU": 1}]
    assert unplaced([gpu, pool], nodes) == ["learner"]
    # Enough CPUs in total (3) but no node has 2 for one actor.
    assert unplaced([ActorNeed.of("build", 1, num_cpus=2)], [{"CPU": 1}, {"CPU": 1}, {"CPU": 1}]) == ["build"]
    assert total_need([gpu, pool]) == {"CPU": 4.0, "GPU": 4.0, "accelerator_type:H100": 0.002}


def test_the_message_names_needs_nodes_and_what_is_left_over():
    needs = [ActorNeed.of("benchmark pool 'cpu'", 2), ActorNeed.of("rollout generator"), ActorNeed.of("learner")]
    nodes = [{"node_id": "a", "address": "10.0.0.1", "resources": {"CPU": 2.0, "memory": 1e9, "node:10.0.0.1": 1.0}}]
    with pytest.raises(InsufficientResources) as e:
        check_cluster(needs, nodes)
    text = str(e.value)
    assert "benchmark pool 'cpu': 2 × (CPU 1)" in text and "rollout generator: 1 × (CPU 1)" in text
    assert "total: CPU 4" in text
    assert "10.0.0.1: CPU 2" in text and "memory" not in text  # bookkeeping resources left out
    assert "No node left for: rollout generator × 1, learner × 1." in text
    check_cluster(needs, [{"CPU": 4}])  # fits: no error


def test_job_needs_follow_the_config():
    needs = {n.role: n for n in job_needs(composed())}
    assert needs["benchmark pool 'cpu'"].count == 2 and needs["benchmark pool 'cpu'"].resources == {"CPU": 1.0}
    assert needs["rollout engine"].resources == {"CPU": 1.0} and needs["learner"].count == 1
    assert total_need(list(needs.values())) == {"CPU": 4.0}  # the README's figure for the default job
    smoke = composed("smoke")
    assert total_need(job_needs(smoke)) == {"CPU": 3.0}
    gpu = composed(overrides=["bench=h100", "learner.num_gpus=1", "rollout.num_gpus=1"])
    roles = {n.role: n.resources for n in job_needs(gpu)}
    assert any(r.get("accelerator_type:H100") for r in roles.values())
    assert roles["learner"]["GPU"] == 1.0 and roles["rollout engine"]["GPU"] == 1.0
    assert roles["build actors of pool 'h100'"] == {"CPU": 2.0}
    # Builds on CPU-only nodes of their own: the build actors ask for the custom resource too.
    builder = composed(overrides=["bench=h100", "+bench.pools.h100.build_resources={builder: 1}"])
    assert {n.role: n.resources for n in job_needs(builder)}["build actors of pool 'h100'"] == {
        "CPU": 2.0,
        "builder": 1.0,
    }
    group = {
        n.role: n
        for n in job_needs(
            composed(overrides=["rollout.num_gpus=1", "rollout.num_engines=2", "rollout.tensor_parallel_size=2"])
        )
    }
    assert group["rollout engine"].count == 2 and group["rollout engine"].resources["GPU"] == 2.0


def test_start_ray_checks_the_running_cluster(ray_cluster):
    from cudal1.launch import start_ray

    start_ray(composed())  # 4 CPUs asked, the session cluster has 4
    with pytest.raises(InsufficientResources, match="total: CPU 6"):
        start_ray(composed(overrides=["bench.pools.cpu.num_actors=4"]))
    start_ray(composed(overrides=["bench.pools.cpu.num_actors=4", "ray.preflight=false"]))  # the user's call


def test_the_training_job_stops_at_once_on_a_small_cluster(tmp_path):
    """What the README's user saw: `ray start --head` on 2 cores gave 2 CPUs and the job waited 10
    minutes. Now: exit code 2 within the Ray start-up, one message, no traceback, no run written."""
    run_dir = tmp_path / "run"
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    start = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "jobs/train.py", f"run_dir={run_dir}", "ray.num_cpus=2"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    elapsed = time.monotonic() - start
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert "train: the job needs more than the Ray cluster has" in proc.stderr
    assert "total: CPU 4" in proc.stderr and "Traceback" not in proc.stderr
    assert not (run_dir / "state.json").exists() and not (run_dir / "config.yaml").exists()
    assert elapsed < 120, elapsed  # Ray's start-up, not a start timeout (600 s)


def test_a_bad_config_value_is_one_line(tmp_path):
    proc = subprocess.run(
        [sys.executable, "jobs/train.py", f"run_dir={tmp_path / 'r'}", "learner.lr=-1"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == ["train: config error at learner.lr: must be > 0; got -1.0"]
