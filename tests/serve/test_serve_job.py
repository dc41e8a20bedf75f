"""`python jobs/serve.py` as a user starts it (a subprocess on its own local Ray cluster), issue 24:
it says "ready" only when it answers, its requests print no access-log lines, Ray Serve's own lines
go to Serve's log files (named on its start line), and SIGTERM shuts it down quietly with exit
code 0.

One start for the module (30-60 s on a shared 2-core machine): the transformers backend (the
engine does not matter here, and vLLM's start would double the time), one benchmark actor.
"""

from __future__ import annotations

import os
import queue
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import requests

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "job-test-token"

pytestmark = pytest.mark.timeout(600)

ACCESS_LOG = re.compile(r"\b(GET|POST) /v1/\S* (200|401)\b")
"""Serve's per-request access-log line (method, route, status), as its replica and proxy write it."""

SERVE_OWN = re.compile(r"\((ServeController|ProxyActor|ServeReplica)\b")
"""A line Ray forwards from one of Serve's own actors (its prefix names the actor class)."""

CRASH_LIKE = re.compile(r"Traceback|\*\*\* SIG|logging\.cc|PC: @|Aborted|core dumped")
"""What a crash looks like in a terminal: a Python traceback, Ray's C++ signal handler's stack."""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_ready_is_printed_only_when_it_answers_and_sigterm_shuts_down_quietly(tmp_path, small_model_dir):
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}  # its own local cluster, as a user's
    env["CUDAL1_SERVE_TOKEN"] = TOKEN
    proc = subprocess.Popen(
        [
            sys.executable,
            "jobs/serve.py",
            "rollout=hf",
            f"model_dir={tmp_path}",
            f"model.path={small_model_dir}",  # the session's small model: no build in the job (5 s)
            f"serve.jobs_dir={tmp_path / 'jobs'}",
            f"serve.port={port}",
            "serve.progress_s=2",
            "bench.pools.cpu.num_actors=1",
            "ray.num_cpus=4",
            "ray.object_store_mb=256",
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines: queue.Queue[str | None] = queue.Queue()

    def read() -> None:
        for line in proc.stdout:
            lines.put(line.rstrip("\n"))
        lines.put(None)

    threading.Thread(target=read, daemon=True).start()
    seen: list[str] = []
    url = f"http://127.0.0.1:{port}/v1/models"
    try:
        deadline = time.monotonic() + 420
        while True:
            line = lines.get(timeout=max(1.0, deadline - time.monotonic()))
            assert line is not None, "the job ended before it was ready:\n" + "\n".join(seen[-40:])
            seen.append(line)
            if line.startswith("serve: ready") or line.startswith("serving "):
                break
        # The instant it says ready, a request is answered (the old line came minutes too early).
        r = requests.get(url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=10)
        assert r.status_code == 200, r.text
        assert re.match(rf"serve: ready after \d+ s: cudal1-policy at http://127.0.0.1:{port}/v1 ", seen[-1]), seen[-1]
        waits = [ln for ln in seen if ln.startswith("serve: waiting for ")]
        assert waits and not [ln for ln in waits if not re.search(r"\(\d+ s\)$", ln)], [
            ln for ln in waits if not re.search(r"\(\d+ s\)$", ln)
        ] or seen[-20:]
        assert "unreadable" not in "\n".join(waits), waits  # each says what it waits for in Serve's words
        assert any("the application 'cudal1' to run: " in ln for ln in waits), waits
        for _ in range(3):  # answered and refused requests, none of them a line on the terminal
            assert requests.get(url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=10).status_code == 200
            assert requests.get(url, timeout=10).status_code == 401
        time.sleep(3)  # Ray forwards a worker's lines to the driver within about a second

        started = len(seen)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=120) == 0, "\n".join(seen[-40:])
    finally:
        if proc.poll() is None:  # a failed check: let it stop its cluster, then make sure
            proc.terminate()
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    while (line := lines.get(timeout=10)) is not None:
        seen.append(line)
    after = seen[started:]
    text = "\n".join(after)
    assert "serve: SIGTERM: shutting down the application 'cudal1' and the local Ray cluster ..." in after, text
    assert re.fullmatch(r"serve: shut down in \d+ s: done", [ln for ln in after if ln.startswith("serve: ")][-1]), text
    assert not CRASH_LIKE.search(text), text
    assert not [ln for ln in seen if ACCESS_LOG.search(ln)], [ln for ln in seen if ACCESS_LOG.search(ln)]
    # Serve's own lines (deployment, shutdown) go to its log files, which the start line names.
    assert not [ln for ln in seen if SERVE_OWN.search(ln)], [ln for ln in seen if SERVE_OWN.search(ln)]
    starting = next(ln for ln in seen if ln.startswith("serve: starting "))
    named = re.search(r"Ray Serve's own log lines: (\S+/serve)$", starting)
    assert named, starting
    logs = Path(named.group(1))
    assert any("controller" in p.name for p in logs.iterdir()), sorted(p.name for p in logs.iterdir())
    with pytest.raises(requests.ConnectionError):  # the proxy went with the cluster
        requests.get(url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=5)
