"""jobs/augment.py for real: vLLM's own OpenAI-compatible server (a subprocess, on the CPU, with
an API key) serves the embedded small model; a real HTTP proxy process in front of it fails on a
schedule (429, 500, a timeout, truncated JSON); answers are validated on a real CPU benchmark
pool of the session's Ray cluster.

The small model does not write correct code by itself. The teacher endpoint therefore asks the
server for structured output (vLLM's `structured_outputs.choice`, passed through the endpoint's
`extra_body`): the model itself picks, token by token, one of two complete answers of the first
task, its seed solution and its reference renamed ModelNew. Which one it picks is the model's
sampling (seeded per attempt), so the test checks each record against what its code is: for the
first task every teacher answer is correct (status ok, speedup > 0), for the second every one is
the wrong task's code and must fail with the evaluator's verdict. (With both tasks' answers among
the choices, a run whose three teacher answers all fell on the other task's code had nothing
correct to check: a chance near one in eight, seen once in a fresh clone.) The second endpoint asks the same server without
constraints: its answers hold no code and are recorded as parse errors with their label.
"""

from __future__ import annotations

import json
import secrets
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

pytest.importorskip("vllm")
pytest.importorskip("openai")

from cudal1.policy.prompts import sft_response  # noqa: E402
from cudal1.tasks import find_task, load_tasks  # noqa: E402
from cudal1.tasks.suite import seeds_for  # noqa: E402
from cudal1.tasks.task import reference_as_candidate  # noqa: E402
from tests.procs import stop_process_group  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
PROXY = Path(__file__).with_name("flaky_proxy.py")
# Two builtin tasks cheap to evaluate on the CPU (4 MiB and 2 MiB of inputs: about 2.5 s and 2 s an
# evaluation here, against 6-9 s and 4 s for level1/13 and level1/12): what is checked is the job's
# bookkeeping and each record's verdict, not the tasks. The first task's answers (its seed, its
# reference) take two inputs and no constructor arguments, so on the second task (one input,
# Linear's two sizes) they fail with the evaluator's verdict.
TASK_IDS = ["level1/1", "level2/1"]
KEY_ENV = "CUDAL1_TEST_ENDPOINT_KEY"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server_process(small_model_dir, tmp_path_factory):
    """vLLM's OpenAI server on the small model, starting: (process, base URL without /v1, API key, log)."""
    key = secrets.token_hex(8)
    port = free_port()
    log = tmp_path_factory.mktemp("vllm") / "server.log"
    with open(log, "w") as out:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "vllm.entrypoints.openai.api_server",
                "--model",
                str(small_model_dir),
                "--served-model-name",
                "small",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--api-key",
                key,
                "--dtype",
                "float32",
                "--max-model-len",
                "4096",
                "--kv-cache-memory-bytes",
                str(256 << 20),
                "--enforce-eager",
                "--seed",
                "0",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        yield proc, f"http://127.0.0.1:{port}", key, log
    finally:
        stop_process_group(proc)


@pytest.fixture(scope="module")
def server(server_process, pools):
    """The server once it answers (it boots while Ray and the pool start): (base URL, API key)."""
    proc, url, key, log = server_process
    deadline = time.monotonic() + 300
    while True:
        try:
            request = urllib.request.Request(url + "/v1/models", headers={"Authorization": f"Bearer {key}"})
            with urllib.request.urlopen(request, timeout=5):
                return url, key
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"vLLM's server did not start:\n{log.read_text()[-3000:]}") from None
            time.sleep(1)


class Proxy:
    """tests/augment/flaky_proxy.py as a subprocess: its URL, its request log, a new schedule."""

    def __init__(self, upstream: str, log: Path, schedule: list[str], hold_s: float) -> None:
        self.log = log
        self.proc = subprocess.Popen(
            [
                sys.executable,
                str(PROXY),
                "--upstream",
                upstream,
                "--log",
                str(log),
                "--schedule",
                ",".join(schedule),
                "--hold-s",
                str(hold_s),
            ],
            stdout=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        self.url = f"http://127.0.0.1:{int(self.proc.stdout.readline())}"

    def requests(self) -> list[dict]:
        return [json.loads(line) for line in self.log.read_text().splitlines()] if self.log.exists() else []


@pytest.fixture(scope="module")
def proxies(server, tmp_path_factory):
    d = tmp_path_factory.mktemp("proxy")
    # The injected timeout holds the connection past any teacher timeout the test sets (the proxy
    # answers other requests meanwhile; its process ends with the module).
    flaky = Proxy(server[0], d / "flaky.jsonl", ["429", "500", "timeout", "badjson"], hold_s=300)
    clean = Proxy(server[0], d / "clean.jsonl", [], hold_s=0)
    yield flaky, clean
    stop_process_group(flaky.proc)
    stop_process_group(clean.proc)


@pytest.fixture(scope="module")
def pools(ray_cluster):
    from cudal1.actors.bench_pool import BenchmarkPools, PoolSpec

    spec = PoolSpec(
        name="cpu",
        backend="cpu",
        num_actors=1,
        resources={"bench_test": 1},
        settings={
            "rounds": 1,
            "calls_per_round": 2,
            "warmup_calls": 0,
            "correctness_trials": 2,
            "max_calls_per_round": 2,
            "calibration_calls": 3,
            "calibration_rounds": 2,
            "shifted_trials": 0,
            "wide_trials": 0,
        },
    )
    with BenchmarkPools([spec], primary="cpu") as p:
        yield p


def job_config(tmp_path, proxies, answers, teacher_timeout_s: float = 4.0):
    from omegaconf import OmegaConf

    from cudal1.config import load_augment_config

    flaky, clean = proxies
    teacher = {
        "name": "teacher",
        "base_url": flaky.url + "/v1",
        "model": "small",
        "api_key_env": KEY_ENV,
        "concurrency": 1,
        "temperature": 1.0,
        "max_tokens": 1024,
        # The test passes a timeout measured on this machine (see `teacher_timeout`): the
        # injected timeout costs that much wall time, an honest answer must never meet it.
        "timeout_s": teacher_timeout_s,
        "max_retries": 2,
        "backoff_s": 0.05,
        "backoff_max_s": 0.2,
        "extra_body": {"structured_outputs": {"choice": answers}},
    }
    free = {
        "name": "free",
        "base_url": clean.url + "/v1",
        "model": "small",
        "api_key_env": KEY_ENV,
        "concurrency": 2,
        "temperature": 1.0,
        "max_tokens": 48,
        "timeout_s": 60.0,
    }
    return load_augment_config(
        OmegaConf.create(
            {
                "endpoints": [teacher, free],
                "tasks": {"ids": TASK_IDS},
                "out_dir": str(tmp_path / "ds"),
                "version": "test",
                "k": 3,
                "attempts_per_task": 4,
                "bench": {"pools": {"cpu": {"backend": "cpu", "num_actors": 1}}},
            }
        )
    )


def teacher_timeout(cfg, server) -> float:
    """A teacher timeout (s) for this machine: 4 s, or 5x the slowest of two answers asked straight
    of the server if that is longer (a loaded CI machine answered past 4 s). The first request also
    compiles the server's grammar for these choices, so it is asked with a long timeout and not timed."""
    from cudal1.augment.collect import endpoint_specs
    from cudal1.augment.endpoint import EndpointClient

    spec = endpoint_specs(cfg)[0]
    spec.base_url, spec.timeout_s, spec.max_retries = server[0] + "/v1", 300.0, 0
    client = EndpointClient(spec, server[1])
    client.complete([{"role": "user", "content": "warm up"}], seed=0)
    slowest = 0.0
    for seed in (1, 2):
        start = time.monotonic()
        client.complete([{"role": "user", "content": "time me"}], seed=seed)
        slowest = max(slowest, time.monotonic() - start)
    return max(4.0, 5 * slowest)


def test_a_flaky_endpoint_loses_no_record_and_a_rerun_asks_only_what_is_missing(
    server_process, pools, server, proxies, tmp_path, monkeypatch
):
    from cudal1.augment.collect import run_augment_job
    from cudal1.augment.dataset import load_dataset

    monkeypatch.setenv(KEY_ENV, server[1])
    suite = load_tasks("builtin")
    tasks = [find_task(suite, t) for t in TASK_IDS]
    seeds = seeds_for(tasks, "cpu")
    correct = {t.task_id: {seeds[t.task_id].strip(), reference_as_candidate(t.source).strip()} for t in tasks}
    answers = [sft_response(code) for code in sorted(correct[TASK_IDS[0]])]  # right for the first task only
    cfg = job_config(tmp_path, proxies, answers, teacher_timeout(job_config(tmp_path, proxies, answers), server))
    flaky, clean = proxies

    # Run 1. The teacher (attempts 0 and 2 of each task, one request at a time) first meets 429,
    # 500 and a timeout: with 2 retries its first attempt fails for good and is not recorded;
    # its next attempt meets truncated JSON, then an answer.
    first = run_augment_job(cfg, pools=pools)
    assert (first.asked, first.failed, first.recorded) == (8, 1, 7)
    assert first.retries == 2 + 1
    seen = flaky.requests()
    assert [r["action"] for r in seen[:5]] == ["429", "500", "timeout", "badjson", "ok"]
    assert seen[0]["seed"] == seen[1]["seed"] == seen[2]["seed"] != seen[3]["seed"] == seen[4]["seed"]
    assert len(seen) == 3 + 2 + 2  # 3 tries of the failed attempt, 2 of the next, 1 each for the other 2
    ds = load_dataset(tmp_path / "ds")
    assert len(ds.records) == 7 and ds.manifest["counts"]["records"] == 7
    assert ds.manifest["runs"][-1]["status"] == "incomplete" and ds.manifest["runs"][-1]["failed"] == 1
    assert {e["name"] for e in ds.manifest["endpoints"]} == {"teacher", "free"}
    assert {t["task_id"] for t in ds.manifest["tasks"]} == set(TASK_IDS)
    assert "key" not in json.dumps(ds.manifest["endpoints"]).lower()
    check_records(ds.records, correct)

    # Run 2 asks for exactly the attempt that failed, once.
    flaky_before, clean_before = len(flaky.requests()), len(clean.requests())
    second = run_augment_job(cfg, pools=pools)
    assert (second.asked, second.failed, second.recorded, second.retries) == (1, 0, 1, 0)
    assert len(flaky.requests()) == flaky_before + 1 and len(clean.requests()) == clean_before
    assert flaky.requests()[-1]["seed"] == seen[0]["seed"]
    ds = load_dataset(tmp_path / "ds")
    assert sorted((r.task_id, r.attempt) for r in ds.records) == sorted((t, i) for t in TASK_IDS for i in range(4))
    check_records(ds.records, correct)
    assert ds.manifest["runs"][-1]["status"] == "finished" and len(ds.manifest["runs"]) == 2

    # A crash that tore the last line: the torn attempt is asked again, nothing else.
    path = tmp_path / "ds" / "records.jsonl"
    lines = path.read_text().splitlines(keepends=True)
    torn = json.loads(lines[-1])
    path.write_text("".join(lines[:-1]) + lines[-1][: len(lines[-1]) // 2])
    before = len(flaky.requests()) + len(clean.requests())
    third = run_augment_job(cfg, pools=pools)
    assert (third.asked, third.recorded, third.failed) == (1, 1, 0)
    assert len(flaky.requests()) + len(clean.requests()) == before + 1
    ds = load_dataset(tmp_path / "ds")
    assert (ds.records[-1].task_id, ds.records[-1].attempt) == (torn["task_id"], torn["attempt"])
    assert len(ds.records) == 8 and ds.skipped_lines == 0
    check_records(ds.records, correct)

    # Nothing left: no request, no pool needed.
    before = len(flaky.requests()) + len(clean.requests())
    assert run_augment_job(cfg).asked == 0
    assert len(flaky.requests()) + len(clean.requests()) == before


def check_records(records, correct):
    """Each record's verdict matches what its code is; kept = the distinct correct codes."""
    kept = {}
    for r in records:
        if r.endpoint == "free":
            assert r.status == "parse_error" and r.labels and r.labels[0].startswith("parse_error:"), r
            continue
        assert r.code is not None and r.analysis and r.design
        if r.code.strip() in correct[r.task_id]:
            assert r.status == "ok" and r.speedup > 0, (r.task_id, r.status, r.message)
        else:  # the other task's answer: the evaluator's verdict, with its message
            assert r.status in ("incorrect", "runtime_error", "hack") and r.message, (r.task_id, r.status)
        if r.kept:
            kept.setdefault(r.task_id, set()).add(r.code_hash)
        assert r.kept == (r.status == "ok" and r.duplicate_of is None)
    correct_codes = {t: {r.code_hash for r in records if r.task_id == t and r.status == "ok"} for t in correct}
    assert kept == {t: c for t, c in correct_codes.items() if c}
    assert any(r.status == "ok" for r in records), "no correct answer at all: the test would prove little"


def test_a_wrong_key_is_fatal_and_not_retried(server):
    from cudal1.augment.endpoint import EndpointClient, EndpointError, EndpointSpec

    client = EndpointClient(EndpointSpec("x", server[0] + "/v1", "small", max_retries=3), api_key="wrong")
    with pytest.raises(EndpointError, match="HTTP 401") as e:
        client.complete([{"role": "user", "content": "hi"}])
    assert e.value.fatal and e.value.retries == 0
    client.close()
