"""`ServeSettings`: the `serve` section of the serve job's config (`cudal1.config.ServeJobConfig`),
consumed by the Ray Serve application (`cudal1.serve.app`). Ray-free, so the driver validates it
before Serve starts."""

from __future__ import annotations

import dataclasses
from typing import Any, Optional

from cudal1.errors import ConfigError


@dataclasses.dataclass
class ServeSettings:
    """The Ray Serve application (`cudal1.serve.app`): HTTP, auth, replicas and the optimize jobs'
    limits; the `serve` section of the serve job's config. Validated on construction: raises
    `cudal1.errors.ConfigError` naming the key (`serve.<field>`). The bearer token's presence is
    checked where the config is loaded (`cudal1.config.load_serve_config`: it reads the environment)."""

    host: str = "127.0.0.1"
    """Address Serve's HTTP proxy binds (0.0.0.0 to listen on every interface)."""
    port: int = 8000
    route_prefix: str = "/"
    app_name: str = "cudal1"
    model_name: str = "cudal1-policy"
    """The model id `GET /v1/models` lists and chat requests name."""
    token: Optional[str] = None
    """The bearer token every request must carry; None: read from the `token_env` variable."""
    token_env: str = "CUDAL1_SERVE_TOKEN"
    num_replicas: int = 1
    """Fixed replica count (ignored when `autoscaling` is on)."""
    autoscaling: bool = False
    min_replicas: int = 1
    max_replicas: int = 2
    target_ongoing_requests: float = 2.0
    max_ongoing_requests: int = 16
    """Requests one replica holds at once; Serve queues the rest."""
    replica_cpus: float = 1.0
    """Logical CPUs of a replica (it holds the vLLM engine in-process)."""
    jobs_dir: str = "runs/serve/jobs"
    """Where each optimize job's state is persisted (one JSON per job); every replica must see it."""
    max_pending_jobs: int = 8
    """Optimize jobs queued or running per replica; more get 429."""
    stale_after_s: float = 60.0
    """A queued or running job whose file was not refreshed for this long belongs to a replica that
    died: it reads as "interrupted"."""
    max_rounds: int = 4
    max_samples: int = 8
    max_program_chars: int = 100000
    max_chat_tokens: int = 1024
    """Largest `max_tokens` of a chat request."""
    access_log: bool = False
    """Serve's access-log line per request (method, route, status, milliseconds: Serve's
    `LoggingConfig.enable_access_log`, for the replicas and the HTTP proxy). False: none; with a
    local cluster they would reach the job's terminal, one per request."""
    serve_logs_to_terminal: bool = False
    """jobs/serve.py: whether Ray Serve's own log lines (its controller, HTTP proxy and replicas:
    deployment, scaling and shutdown INFO lines, its warnings) reach the job's terminal. False: they
    go only to Serve's log files (`<Ray's session logs>/serve/`, which the start-up line names;
    Serve's `RAY_SERVE_LOG_TO_STDERR=0`), the replicas' output with them."""
    progress_s: float = 10.0
    """jobs/serve.py: seconds between its start-up lines (what it waits for, elapsed) until the
    application answers."""
    answer_timeout_s: float = 300.0
    """jobs/serve.py: seconds it waits, once Serve reports the application RUNNING, for its first
    answer over HTTP (`GET /v1/models`: 200) before it gives up."""

    def __post_init__(self) -> None:
        for name in (
            "port",
            "num_replicas",
            "min_replicas",
            "max_replicas",
            "target_ongoing_requests",
            "max_ongoing_requests",
            "max_pending_jobs",
            "stale_after_s",
            "max_rounds",
            "max_samples",
            "max_program_chars",
            "max_chat_tokens",
            "progress_s",
            "answer_timeout_s",
        ):
            if not getattr(self, name) > 0:
                raise ConfigError(f"serve.{name}", f"must be > 0, got {getattr(self, name)!r}")
        if not self.replica_cpus >= 0:
            raise ConfigError("serve.replica_cpus", f"must be >= 0, got {self.replica_cpus!r}")
        if self.port > 65535:
            raise ConfigError("serve.port", f"must be <= 65535; got {self.port}")
        if self.min_replicas > self.max_replicas:
            raise ConfigError("serve.min_replicas", f"{self.min_replicas} > serve.max_replicas={self.max_replicas}")
        if not str(self.route_prefix).startswith("/"):
            raise ConfigError("serve.route_prefix", f"must start with '/'; got {self.route_prefix!r}")

    @classmethod
    def from_config(cls, node: Any) -> "ServeSettings":
        """The `serve` section as `ServeSettings`: one already built, its DictConfig node, or a mapping
        of its fields. Raises ConfigError as the constructor does."""
        return node if isinstance(node, cls) else cls(**dict(node.items()))
