"""Weight sync by CUDA IPC (`rollout.weight_sync=ipc`, `cudal1.engines.cuda_ipc`): the parts that
need no GPU: the bucket layout both sides compute, the windows the learner exports, the payload
check, and the refusals (a CPU device, a GPU this process cannot see, a config that does not put
the learner and one engine on one GPU). The IPC path itself runs on a GPU only:
benchmarks/ipc_sync.py (docs/benchmarks.md)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from hydra import compose, initialize_config_dir

from cudal1.config import ConfigError, load_config, register_schema
from cudal1.engines.cuda_ipc import (
    FORMAT,
    IpcExporter,
    NotColocatedError,
    bucket_layout,
    check_payload,
    local_device_index,
    open_payload,
    windows,
)
from cudal1.engines.weight_sync import TensorSpec, plan_buckets

ROOT = Path(__file__).resolve().parents[2]
register_schema()

SPECS = [
    TensorSpec("embed", (4, 3), "float32"),
    TensorSpec("norm", (3,), "bfloat16"),
    TensorSpec("q", (3, 3), "float32"),
    TensorSpec("bias", (5,), "float32"),
    TensorSpec("k", (2,), "bfloat16"),
]


def payload(buckets):
    return {"format": FORMAT, "device_uuid": "GPU-00000000-0000-0000-0000-000000000000", "buckets": buckets}


def test_bucket_layout_places_members_back_to_back_in_manifest_order():
    assert bucket_layout(SPECS, [0, 2, 3]) == [(0, 0, 12), (2, 12, 9), (3, 21, 5)]
    assert bucket_layout(SPECS, [4]) == [(4, 0, 2)]
    # the layout of every bucket of a plan covers exactly its elements, one dtype each
    for bucket in plan_buckets(SPECS, bucket_mb=64 / 2**20):
        layout = bucket_layout(SPECS, bucket)
        assert layout[-1][1] + layout[-1][2] == sum(SPECS[i].numel for i in bucket)


def test_windows_bound_the_bytes_the_learner_holds():
    specs = [TensorSpec(f"w{i}", (256,), "float32") for i in range(6)]  # 1 KiB each
    plan = plan_buckets(specs, bucket_mb=1024 / 2**20)  # one tensor per bucket
    assert windows(specs, plan, window_mb=2048 / 2**20) == [[0, 1], [2, 3], [4, 5]]
    assert windows(specs, plan, window_mb=100) == [[0, 1, 2, 3, 4, 5]]
    assert windows(specs, plan, window_mb=100 / 2**20) == [[b] for b in range(6)]  # a bucket over the window: alone
    with pytest.raises(ValueError, match="window_mb"):
        windows(specs, plan, window_mb=0)


def test_payload_check_names_the_disagreement():
    good = [
        {"dtype": "float32", "members": [0, 2], "numel": 21, "handle": {}},
        {"dtype": "bfloat16", "members": [1, 4], "numel": 5, "handle": {}},
    ]
    check_payload(payload(good), SPECS)
    with pytest.raises(ValueError, match="not a cudal1-ipc-1"):
        check_payload({"buckets": good}, SPECS)
    with pytest.raises(ValueError, match="dtype float32 but its members are"):
        check_payload(payload([{**good[0], "members": [0, 1]}]), SPECS)
    with pytest.raises(ValueError, match="outside the manifest"):
        check_payload(payload([{**good[0], "members": [0, 9]}]), SPECS)
    with pytest.raises(ValueError, match="20 elements exported, the manifest says 21"):
        check_payload(payload([{**good[0], "numel": 20}]), SPECS)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusals of a machine without a GPU")
def test_without_a_gpu_ipc_is_refused_on_both_sides():
    with pytest.raises(ValueError, match="CUDA IPC needs a CUDA device"):
        IpcExporter("cpu")
    with pytest.raises(NotColocatedError, match="is not visible here.*same GPU of one node"):
        local_device_index("GPU-1234")
    good = [{"dtype": "float32", "members": [0], "numel": 12, "handle": {}}]
    with pytest.raises(NotColocatedError):
        list(open_payload(payload(good), SPECS))


def composed(overrides):
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base=None):
        return load_config(compose("config", overrides=["run_dir=/tmp/unused", *overrides]))


GPU_PAIR = ["rollout.weight_sync=ipc", "learner.num_gpus=0.5", "rollout.num_gpus=0.5"]


def test_ipc_config_needs_one_learner_and_one_engine_sharing_a_gpu():
    cfg = composed(GPU_PAIR)
    assert cfg.rollout.weight_sync == "ipc"
    with pytest.raises(ConfigError, match="rollout.weight_sync.*ipc needs CUDA GPUs.*no CPU path"):
        composed(["rollout.weight_sync=ipc"])  # the CPU default
    with pytest.raises(
        ConfigError, match="rollout.num_gpus.*fractions summing to at most 1.*learner 1.0 \\+ rollout 0.5"
    ):
        composed([*GPU_PAIR, "learner.num_gpus=1"])
    with pytest.raises(ConfigError, match="rollout.num_gpus.*learner 0.7 \\+ rollout 0.5"):
        composed([*GPU_PAIR, "learner.num_gpus=0.7"])
    for key in ("rollout.num_engines=2", "learner.num_ranks=2"):
        with pytest.raises(ConfigError, match=f"{key.split('=')[0]}.*one learner rank and one engine worker"):
            composed([*GPU_PAIR, key])


def test_preflight_asks_for_one_bundle_of_both_cpus_and_one_gpu():
    from cudal1.actors.preflight import job_needs

    needs = {n.role: dict(n.resources) for n in job_needs(composed(GPU_PAIR))}
    pair = needs["learner + rollout engine (colocated, weight_sync=ipc)"]
    cfg = composed(GPU_PAIR)
    assert pair == {"CPU": cfg.learner.num_cpus + cfg.rollout.num_cpus, "GPU": 1.0}
    assert "learner" not in needs and "rollout engine" not in needs


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal of a machine without a GPU")
def test_the_transformers_engine_refuses_ipc_on_the_cpu(hf_generator):
    with pytest.raises(ValueError, match="needs the engine on a GPU"):
        hf_generator.receive_weights_ipc(payload([]), [], version=1)
    assert hf_generator.model_version == 0


COLOCATE = """
import json, os, ray
from cudal1.actors.cluster import in_bundle
from cudal1.actors.generator_group import colocated_placement_group

@ray.remote
class Probe:
    def where(self):
        return ray.get_gpu_ids(), os.environ.get("CUDA_VISIBLE_DEVICES"), ray.get_runtime_context().get_node_id()

# a node with 2 GPUs (declared; Ray's accounting needs no device): the pair must still get the same one
ray.init(address="local", num_cpus=2, num_gpus=2, include_dashboard=False, log_to_driver=False)
pg = colocated_placement_group(2.0, timeout_s=60)
# another actor takes a fraction of a GPU first, so a free placement could have split the pair
other = Probe.options(num_cpus=0, num_gpus=0.5).remote()
ray.get(other.where.remote())
pair = [Probe.options(num_cpus=1, num_gpus=0.5, scheduling_strategy=in_bundle(pg)).remote() for _ in range(2)]
print(json.dumps(ray.get([p.where.remote() for p in pair])))
ray.shutdown()
"""


def test_the_colocated_bundle_gives_learner_and_engine_the_same_gpu():
    """What `rollout.weight_sync=ipc` relies on: two actors with num_gpus=0.5 in the one bundle of
    `colocated_placement_group` are given the same GPU. A Ray cluster of its own (GPUs declared),
    in a subprocess, beside the suite's. Without the bundle the same two actors were put on GPUs 0
    and 1 (tried by hand, 2026-12-02), so this can fail."""
    import json
    import os
    import subprocess
    import sys

    env = {**os.environ, "PYTHONPATH": str(ROOT), "RAY_ADDRESS": ""}
    done = subprocess.run([sys.executable, "-c", COLOCATE], capture_output=True, text=True, timeout=240, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    (ids_a, visible_a, node_a), (ids_b, visible_b, node_b) = json.loads(done.stdout.strip().splitlines()[-1])
    assert len(ids_a) == 1 and ids_a == ids_b and visible_a == visible_b and node_a == node_b
