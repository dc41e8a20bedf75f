"""A bounded load test of the Serve application on loopback: concurrent chat completions and
optimize submissions (each optimize job polled until it ends), a fixed request count and a time
limit. Prints requests/s, p50/p95 latency and errors per kind.

    CUDAL1_SERVE_TOKEN=secret python benchmarks/serve_load.py --url http://127.0.0.1:8000 \
        --chat 40 --optimize 2 --concurrency 4 --time-limit 300

It starts nothing: point it at a running app (jobs/serve.py). Only loopback URLs are accepted.
Latency of a chat request is its HTTP round trip; of an optimize request, submission to the end
of the job (polled every second), reported separately from the submission round trip.
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import json
import os
import statistics
import sys
import time
from urllib.parse import urlparse

import requests

PROGRAM = (
    "import torch\n\nclass Model(torch.nn.Module):\n    def __init__(self):\n        super(Model, self).__init__()\n\n"
    "    def forward(self, x):\n        return torch.relu(x)\n\ndef get_inputs():\n    return [torch.randn(256, 256)]\n\n"
    "def get_init_inputs():\n    return []\n"
)


def percentile(xs: list[float], q: float) -> float | None:
    """The q-quantile (0-1) of xs by linear interpolation (statistics.quantiles' 'inclusive'), None if empty."""
    if not xs:
        return None
    if len(xs) == 1:
        return xs[0]
    return statistics.quantiles(sorted(xs), n=100, method="inclusive")[round(q * 100) - 1]


def chat(url: str, headers: dict[str, str], max_tokens: int) -> tuple[str, float, str | None]:
    t = time.perf_counter()
    try:
        r = requests.post(
            f"{url}/v1/chat/completions",
            headers=headers,
            timeout=120,
            json={
                "model": "cudal1-policy",
                "max_tokens": max_tokens,
                "messages": [{"role": "user", "content": "Write a faster ReLU as ModelNew."}],
            },
        )
        err = None if r.status_code == 200 and r.json()["choices"] else f"HTTP {r.status_code}: {r.text[:120]}"
    except requests.RequestException as e:
        err = f"{type(e).__name__}: {e}"[:160]
    return "chat", time.perf_counter() - t, err


def optimize(
    url: str, headers: dict[str, str], rounds: int, samples: int, deadline: float
) -> tuple[str, float, str | None]:
    t = time.perf_counter()
    try:
        r = requests.post(
            f"{url}/v1/optimize",
            headers=headers,
            timeout=60,
            json={"program": PROGRAM, "rounds": rounds, "samples": samples},
        )
        if r.status_code != 202:
            return "optimize", time.perf_counter() - t, f"HTTP {r.status_code}: {r.text[:120]}"
        job = r.json()["id"]
        while time.time() < deadline:
            s = requests.get(f"{url}/v1/optimize/{job}", headers=headers, timeout=60).json()
            if s["status"] not in ("queued", "running"):
                err = None if s["status"] == "done" else f"job {s['status']}: {s.get('message', '')[:120]}"
                return "optimize", time.perf_counter() - t, err
            time.sleep(1)
        return "optimize", time.perf_counter() - t, "job not finished within the time limit"
    except requests.RequestException as e:
        return "optimize", time.perf_counter() - t, f"{type(e).__name__}: {e}"[:160]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--url", default="http://127.0.0.1:8000")
    p.add_argument("--token", default=os.environ.get("CUDAL1_SERVE_TOKEN"))
    p.add_argument("--chat", type=int, default=40, help="chat requests")
    p.add_argument("--optimize", type=int, default=2, help="optimize jobs")
    p.add_argument("--concurrency", type=int, default=4)
    p.add_argument("--max-tokens", type=int, default=32)
    p.add_argument("--rounds", type=int, default=1)
    p.add_argument("--samples", type=int, default=2)
    p.add_argument("--time-limit", type=float, default=300.0, help="seconds; unfinished requests count as errors")
    p.add_argument("--json", help="also write the figures here")
    a = p.parse_args(argv)
    if urlparse(a.url).hostname not in ("127.0.0.1", "localhost", "::1"):
        p.error("only loopback URLs (127.0.0.1, localhost, ::1)")
    if not a.token:
        p.error("--token or CUDAL1_SERVE_TOKEN is required")
    headers = {"Authorization": f"Bearer {a.token}"}
    t0 = time.perf_counter()
    deadline = time.time() + a.time_limit
    results = []
    with cf.ThreadPoolExecutor(a.concurrency) as ex:
        futures = [ex.submit(optimize, a.url, headers, a.rounds, a.samples, deadline) for _ in range(a.optimize)]
        futures += [ex.submit(chat, a.url, headers, a.max_tokens) for _ in range(a.chat)]
        try:
            for f in cf.as_completed(futures, timeout=a.time_limit + 60):
                results.append(f.result())
        except cf.TimeoutError:
            pass
        for f in futures:
            f.cancel()
    wall = time.perf_counter() - t0
    missing = a.chat + a.optimize - len(results)
    report = {
        "wall_s": round(wall, 2),
        "requests": len(results),
        "not_finished": missing,
        "requests_per_s": round(len(results) / wall, 3),
        "kinds": {},
    }
    for kind in ("chat", "optimize"):
        lat = [t for k, t, e in results if k == kind and e is None]
        errs = [e for k, t, e in results if k == kind and e is not None]
        report["kinds"][kind] = {
            "ok": len(lat),
            "errors": len(errs),
            "first_errors": errs[:3],
            "p50_s": percentile(lat, 0.5),
            "p95_s": percentile(lat, 0.95),
            "ok_per_s": round(len(lat) / wall, 3),
        }
    print(json.dumps(report, indent=1))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(report, f, indent=1)
    return 0 if missing == 0 and all(v["errors"] == 0 for v in report["kinds"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
