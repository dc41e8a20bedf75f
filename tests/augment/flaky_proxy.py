"""A real HTTP proxy in front of an OpenAI-compatible server that fails on a schedule (for tests).

    python tests/augment/flaky_proxy.py --upstream http://127.0.0.1:8000 --log requests.jsonl \\
        --schedule 429,500,timeout,badjson

Listens on 127.0.0.1 (a free port, printed as the first line of stdout). Each POST takes the next
action of the schedule, then "ok" once the schedule is spent:

    ok        forward the request to the upstream and pass its answer back
    429       answer 429 Too Many Requests (Retry-After: 0) without forwarding
    500       answer 500 without forwarding
    timeout   hold the connection for --hold-s seconds, then close it without an answer
    badjson   answer 200 with Content-Type application/json and a truncated JSON body

GETs are always forwarded. `POST /_schedule` with a JSON list replaces the schedule. Every
request is appended to --log as one JSON line: {"n", "action", "path", "model", "seed"}.
"""

from __future__ import annotations

import argparse
import json
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ACTIONS = ("ok", "429", "500", "timeout", "badjson")


class Proxy(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, upstream: str, schedule: list[str], log_path: str, hold_s: float) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.upstream, self.schedule, self.log_path, self.hold_s = (
            upstream.rstrip("/"),
            list(schedule),
            log_path,
            hold_s,
        )
        self.lock = threading.Lock()
        self.count = 0

    def next_action(self, body: bytes, path: str) -> str:
        with self.lock:
            action = self.schedule.pop(0) if self.schedule else "ok"
            self.count += 1
            try:
                request = json.loads(body or b"{}")
            except ValueError:
                request = {}
            with open(self.log_path, "a") as f:
                f.write(
                    json.dumps(
                        {
                            "n": self.count,
                            "action": action,
                            "path": path,
                            "model": request.get("model"),
                            "seed": request.get("seed"),
                        }
                    )
                    + "\n"
                )
            return action


class Handler(BaseHTTPRequestHandler):
    server: Proxy

    def log_message(self, *args: object) -> None:  # quiet
        pass

    def _reply(
        self, code: int, body: bytes, content_type: str = "application/json", headers: dict | None = None
    ) -> None:
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def _forward(self, body: bytes | None) -> None:
        headers = {k: v for k, v in self.headers.items() if k.lower() in ("authorization", "content-type")}
        request = urllib.request.Request(
            self.server.upstream + self.path, data=body, headers=headers, method=self.command
        )
        try:
            with urllib.request.urlopen(request, timeout=600) as r:
                self._reply(r.status, r.read(), r.headers.get("Content-Type", "application/json"))
        except urllib.error.HTTPError as e:
            self._reply(e.code, e.read(), e.headers.get("Content-Type", "application/json"))

    def do_GET(self) -> None:
        self._forward(None)

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        if self.path == "/_schedule":
            with self.server.lock:
                self.server.schedule = list(json.loads(body))
            self._reply(200, b"{}")
            return
        action = self.server.next_action(body, self.path)
        if action == "ok":
            self._forward(body)
        elif action == "429":
            self._reply(
                429, b'{"error": {"message": "rate limited (injected)", "code": 429}}', headers={"Retry-After": "0"}
            )
        elif action == "500":
            self._reply(500, b'{"error": {"message": "server error (injected)", "code": 500}}')
        elif action == "timeout":
            time.sleep(self.server.hold_s)
            self.close_connection = True
        elif action == "badjson":
            self._reply(200, b'{"id": "chatcmpl-injected", "object": "chat.completion", "choices": [{"index": 0, "mess')
        else:
            self._reply(400, json.dumps({"error": {"message": f"unknown action {action}"}}).encode())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--upstream", required=True)
    parser.add_argument("--log", required=True)
    parser.add_argument("--schedule", default="")
    parser.add_argument("--hold-s", type=float, default=10.0)
    args = parser.parse_args()
    schedule = [a for a in args.schedule.split(",") if a]
    bad = [a for a in schedule if a not in ACTIONS]
    if bad:
        parser.error(f"unknown actions {bad}; known: {ACTIONS}")
    proxy = Proxy(args.upstream, schedule, args.log, args.hold_s)
    print(proxy.server_address[1], flush=True)
    proxy.serve_forever()


if __name__ == "__main__":
    main()
