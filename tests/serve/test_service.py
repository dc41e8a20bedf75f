"""The Serve app's plain request handling, without Serve or a model: auth, optimize payload
validation, the persisted job store (atomic files, stale jobs read as interrupted), the job
service's worker (a job whose runner raises is "failed", the next one still runs), and the config."""

from __future__ import annotations

import json
import os
import threading
import time

import pytest

from cudal1.serve.jobs import JobStore, OptimizeService, parse_request
from cudal1.serve.service import ApiError, check_bearer

PROGRAM = (
    "import torch\n\nclass Model(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n\n"
    "    def forward(self, x):\n        return torch.relu(x)\n\ndef get_inputs():\n    return [torch.randn(8, 8)]\n\n"
    "def get_init_inputs():\n    return []\n"
)
LIMITS = {
    "default_rounds": 2,
    "default_samples": 4,
    "max_rounds": 3,
    "max_samples": 4,
    "max_program_chars": 5000,
    "pools": {"cpu": None, "h100": None},
}


def test_the_bearer_token_is_checked():
    check_bearer("Bearer s3cret", "s3cret")
    check_bearer("bearer s3cret", "s3cret")
    for header in (None, "", "Bearer wrong", "Basic s3cret", "s3cret", "Bearer s3cret2"):
        with pytest.raises(ApiError) as e:
            check_bearer(header, "s3cret")
        assert e.value.status == 401


def test_optimize_payloads_are_validated_with_a_message():
    req = parse_request({"program": PROGRAM, "rounds": 1}, **LIMITS)
    assert (req["rounds"], req["samples"], req["pool"], req["start"], req["task_id"]) == (
        1,
        4,
        "cpu",
        [],
        "file/program",
    )
    assert parse_request({"program": PROGRAM, "architecture": "h100"}, **LIMITS)["pool"] == "h100"
    for name, task_id in (("relu", "file/relu"), ("../../etc/passwd", "file/etc_passwd"), ("!!", "file/program")):
        assert parse_request({"program": PROGRAM, "name": name}, **LIMITS)["task_id"] == task_id
    bad = [
        ([1], "JSON object"),
        ({}, "program must be"),
        ({"program": PROGRAM, "rounds": 4}, "rounds must be"),
        ({"program": PROGRAM, "samples": True}, "samples must be"),
        ({"program": PROGRAM, "pool": "tpu"}, "pool 'tpu'"),
        ({"program": PROGRAM + "#" * 5000}, "limit is 5000"),
        ({"program": PROGRAM, "start": [""]}, "start must"),
        ({"program": "import torch\n"}, "KernelBench-format"),
        ({"program": PROGRAM, "x": 1}, "unknown fields: x"),
    ]
    for body, words in bad:
        with pytest.raises(ApiError) as e:
            parse_request(body, **LIMITS)
        assert e.value.status == 400 and words in e.value.message, (body, e.value.message)


def test_the_job_store_writes_atomically_and_a_stale_running_job_reads_as_interrupted(tmp_path):
    store = JobStore(tmp_path, stale_after_s=0.5)
    job = {"id": "a" * 32, "status": "running", "progress": []}
    store.write(job)
    assert json.loads((tmp_path / f"{'a' * 32}.json").read_text())["status"] == "running"
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".tmp-")]
    assert store.read("a" * 32)["status"] == "running"  # fresh
    time.sleep(0.7)
    other = JobStore(tmp_path, stale_after_s=0.5)  # another replica, or this one restarted
    state = other.read("a" * 32)
    assert state["status"] == "interrupted" and "submit it again" in state["message"]
    assert json.loads((tmp_path / f"{'a' * 32}.json").read_text())["status"] == "interrupted"
    store.write({"id": "b" * 32, "status": "done", "progress": []})
    time.sleep(0.7)
    assert other.read("b" * 32)["status"] == "done"  # finished jobs never go stale
    assert other.read("../etc/passwd") is None and other.read("c" * 32) is None
    assert other.ids() == ["a" * 32, "b" * 32]


def test_the_job_service_runs_jobs_in_order_and_a_failing_one_does_not_stop_it(tmp_path):
    calls = []
    release = threading.Event()

    def run_job(request, on_progress):
        calls.append(request["rounds"])
        on_progress({"event": "round_start", "task_id": "file/program", "round": 1, "rounds": request["rounds"]})
        if request["rounds"] == 2:
            raise RuntimeError("engine died")
        release.wait(10)
        return {"status": "correct", "message": "1.00x"}

    service = OptimizeService(JobStore(tmp_path, 60), run_job, LIMITS, max_pending=2)
    first = service.submit({"program": PROGRAM, "rounds": 1})
    second = service.submit({"program": PROGRAM, "rounds": 2, "name": "my softmax (v2)"})
    # the response names the program's task: the name it was sent, made safe; "program" without one
    assert (first["task_id"], second["task_id"]) == ("file/program", "file/my_softmax_v2")
    assert service.get(second["id"])["task_id"] == "file/my_softmax_v2"
    with pytest.raises(ApiError) as e:
        service.submit({"program": PROGRAM})
    assert e.value.status == 429
    deadline = time.time() + 10
    while service.get(first["id"])["status"] != "running" and time.time() < deadline:
        time.sleep(0.05)
    assert service.get(first["id"])["progress"][0]["event"] == "round_start"
    release.set()
    while service.get(second["id"])["status"] in ("queued", "running") and time.time() < deadline:
        time.sleep(0.05)
    one, two = service.get(first["id"]), service.get(second["id"])
    assert (one["status"], one["result"], one["message"]) == (
        "done",
        {"status": "correct", "message": "1.00x"},
        "1.00x",
    )
    assert two["status"] == "failed" and two["message"] == "RuntimeError: engine died"
    assert calls == [1, 2]
    # a fresh service over the same directory (a restarted replica) reads both
    again = OptimizeService(JobStore(tmp_path, 60), run_job, LIMITS)
    assert again.get(first["id"])["result"]["message"] == "1.00x" and again.get(second["id"])["status"] == "failed"
    with pytest.raises(ApiError) as e:
        again.get("f" * 32)
    assert e.value.status == 404
    service.close()
    again.close()


def test_the_serve_config_needs_a_token_and_names_a_bad_key(monkeypatch):
    from cudal1.config import ConfigError
    from cudal1.serve.app import compose_config

    monkeypatch.delenv("CUDAL1_SERVE_TOKEN", raising=False)
    with pytest.raises(ConfigError, match="serve.token"):
        compose_config([])
    monkeypatch.setenv("CUDAL1_SERVE_TOKEN", "x")
    cfg = compose_config(["serve.autoscaling=true", "serve.max_replicas=3"])
    from cudal1.serve.app import deployment_options

    opts = deployment_options(cfg)
    assert opts["autoscaling_config"]["max_replicas"] == 3 and "num_replicas" not in opts
    assert opts["ray_actor_options"]["runtime_env"]["env_vars"]["CUDAL1_SERVE_TOKEN"] == "x"
    for override, key in (
        ("serve.min_replicas=5", "serve.min_replicas"),
        ("rounds=9", "rounds"),
        ("serve.port=0", "serve.port"),
        ("serve.route_prefix=v1", "serve.route_prefix"),
        ("serve.progress_s=0", "serve.progress_s"),
        ("serve.answer_timeout_s=-1", "serve.answer_timeout_s"),
        ("rollout.tensor_parallel_size=2", "rollout.tensor_parallel_size"),
        ("rollout.num_engines=2", "rollout.num_engines"),
    ):
        with pytest.raises(ConfigError) as e:
            compose_config([override])
        assert e.value.key == key
    assert os.environ["CUDAL1_SERVE_TOKEN"] == "x"
