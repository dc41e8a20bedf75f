"""The one module that touches Ray Serve (and FastAPI): the `PolicyServer` deployment and the
application builders. Request handling lives in plain classes (`cudal1.serve.service`,
`cudal1.serve.jobs`); this file routes HTTP to them.

Routes (every one needs `Authorization: Bearer <token>`; errors are OpenAI-style JSON bodies):
    GET  /v1/models                  the served model (OpenAI list)
    POST /v1/chat/completions        OpenAI chat.completions (no streaming)
    POST /v1/optimize                {"program", "rounds"?, "samples"?, "pool"?, "start"?} -> {"id", "status"}
    GET  /v1/optimize/{id}           status, progress events, and the result when done

Start it with either
    serve run cudal1.serve.app:build_app serve.token=SECRET rounds=1     (key=value: Hydra overrides of conf/serve.yaml)
    python jobs/serve.py serve.port=8000                                  (also under `ray job submit`)

Each replica holds the policy's vLLM engine in-process (`RolloutGenerator`, the project's adapter;
Ray Serve's `ray.serve.llm` is not used: docs/serve.md says why) and its own benchmark pool
actors, in which every submitted program and candidate runs; the replica never executes them.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from ray import serve

from cudal1.serve.service import ApiError, ChatService, LockedGenerator, check_bearer

log = logging.getLogger(__name__)

api = FastAPI(title="cudal1", docs_url=None, redoc_url=None, openapi_url=None)


@api.exception_handler(ApiError)
async def _api_error(request: Request, exc: ApiError) -> JSONResponse:
    return JSONResponse(exc.body(), status_code=exc.status)


@api.exception_handler(Exception)
async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
    log.exception("unexpected error on %s", request.url.path)
    return JSONResponse(ApiError(500, f"internal error: {type(exc).__name__}", "server_error").body(), status_code=500)


async def _json(request: Request) -> Any:
    try:
        return await request.json()
    except Exception:  # noqa: BLE001 - any undecodable body is the client's error
        raise ApiError(400, "the body is not valid JSON") from None


# Module-level helpers the deployment calls are defined above it: Serve serializes the class when
# it is decorated, and a global defined later would be missing in the replica (NameError).
@serve.deployment(name="PolicyServer")
@serve.ingress(api)
class PolicyServer:
    """One replica: the policy's generator, the benchmark pools, the chat and optimize services.

    Args:
        cfg: the validated serve config as a plain dict (`cudal1.config.load_serve_config`).
        model_path: the policy checkpoint directory (built or fetched by the builder).
    """

    def __init__(self, cfg: dict[str, Any], model_path: str) -> None:
        from omegaconf import OmegaConf

        from cudal1.actors.bench_pool import BenchmarkPool
        from cudal1.actors.pool_spec import pool_specs
        from cudal1.config import load_serve_config
        from cudal1.engines.logs import route_engine_logs
        from cudal1.launch import engine_kwargs
        from cudal1.pipeline.optimize import OptimizeSettings
        from cudal1.policy.model import load_tokenizer
        from cudal1.serve.jobs import JobStore, OptimizeRunner, OptimizeService

        c = load_serve_config(OmegaConf.create(cfg))
        # The engines' lines to <model_dir>/logs/serve-replica-<pid>.log (errors still to stderr), set
        # before vLLM is imported (its spawned processes read the switch then) and again after.
        log_dir = Path(c.model_dir) / "logs"
        route_engine_logs(log_dir, "serve-replica")
        from cudal1.rollout import RolloutGenerator

        self.token = c.serve.token or os.environ.get(c.serve.token_env, "")
        tokenizer = load_tokenizer(model_path)
        extra = engine_kwargs(c)
        self.generator = RolloutGenerator(
            model_path,
            c.rollout.backend,
            max_model_len=c.rollout.max_model_len,
            dtype=c.model.dtype,
            seed=c.seed,
            **extra,
        )
        route_engine_logs(log_dir, "serve-replica")
        shared = LockedGenerator(self.generator)
        # The pools load the small builtin suite: their own suite is never looked up, since every
        # candidate carries its task (`Candidate.task`).
        self.pools = {name: BenchmarkPool(spec) for name, spec in pool_specs(c.bench.pools, tasks="builtin").items()}
        for pool in self.pools.values():  # each measures its jobs' rewards: a lost one fails them, never quietly
            pool.computes_rewards = True
        self.chat = ChatService(
            shared,
            tokenizer,
            c.serve.model_name,
            c.rollout.max_model_len,
            c.serve.max_chat_tokens,
            min(c.rollout.max_tokens, c.serve.max_chat_tokens),
        )
        settings = OptimizeSettings.from_config(c)
        names = [c.bench.primary, *(n for n in self.pools if n != c.bench.primary)]
        limits = {
            "default_rounds": c.rounds,
            "default_samples": c.samples,
            "max_rounds": c.serve.max_rounds,
            "max_samples": c.serve.max_samples,
            "max_program_chars": c.serve.max_program_chars,
            "pools": {n: self.pools[n] for n in names},
        }
        self.jobs = OptimizeService(
            JobStore(c.serve.jobs_dir, c.serve.stale_after_s),
            OptimizeRunner(shared, self.pools, tokenizer, settings),
            limits,
            c.serve.max_pending_jobs,
        )
        log.info(
            "PolicyServer ready: model %s, pools %s, jobs in %s", model_path, ", ".join(self.pools), c.serve.jobs_dir
        )

    def _auth(self, request: Request) -> None:
        check_bearer(request.headers.get("authorization"), self.token)

    @api.get("/v1/models")
    async def models(self, request: Request) -> Any:
        self._auth(request)
        return self.chat.models()

    @api.post("/v1/chat/completions")
    async def chat_completions(self, request: Request) -> Any:
        self._auth(request)
        payload = await _json(request)
        return await asyncio.to_thread(self.chat.complete, payload)

    @api.post("/v1/optimize", status_code=202)
    async def optimize(self, request: Request) -> Any:
        self._auth(request)
        payload = await _json(request)
        return self.jobs.submit(payload)  # validation and one small file write: not queued behind chat threads

    @api.get("/v1/optimize/{job_id}")
    async def optimize_status(self, job_id: str, request: Request) -> Any:
        self._auth(request)
        return self.jobs.get(job_id)

    def __del__(self) -> None:
        for pool in getattr(self, "pools", {}).values():
            try:
                pool.shutdown()
            except Exception:  # noqa: BLE001 - best effort at teardown
                pass


def deployment_options(cfg: Any) -> dict[str, Any]:
    """Serve deployment options from the validated config: replicas (fixed, or autoscaling between
    `min_replicas` and `max_replicas` at `target_ongoing_requests`), `max_ongoing_requests`, the
    replica's logical CPUs, and PYTHONPATH so replicas import this checkout (none in a submitted
    job, whose working directory reaches every node: `cudal1.actors.cluster.code_runtime_env`)."""
    from cudal1.actors.cluster import code_runtime_env

    s = cfg.serve
    env = dict(code_runtime_env(Path(__file__).resolve().parents[2]).get("env_vars", {}))
    if s.token is None and os.environ.get(s.token_env):
        env[s.token_env] = os.environ[s.token_env]
    opts: dict[str, Any] = {
        "max_ongoing_requests": s.max_ongoing_requests,
        "ray_actor_options": {
            "num_cpus": s.replica_cpus,
            "num_gpus": cfg.rollout.num_gpus,
            "runtime_env": {"env_vars": env},
        },
    }
    if s.autoscaling:
        opts["autoscaling_config"] = {
            "min_replicas": s.min_replicas,
            "max_replicas": s.max_replicas,
            "target_ongoing_requests": s.target_ongoing_requests,
        }
    else:
        opts["num_replicas"] = s.num_replicas
    return opts


def application(cfg: Any) -> Any:
    """The Serve application for a validated config (`load_serve_config`): builds or fetches the
    policy checkpoint under `model_dir`, then binds `PolicyServer`. Raises what `ensure_model` raises."""
    from omegaconf import OmegaConf

    from cudal1.launch import ensure_model

    model_dir = Path(cfg.model_dir).expanduser().resolve()
    model_dir.mkdir(parents=True, exist_ok=True)
    model_path = ensure_model(cfg, model_dir)
    plain = OmegaConf.to_container(cfg, resolve=True)
    plain["serve"]["jobs_dir"] = str(Path(cfg.serve.jobs_dir).expanduser().resolve())
    return PolicyServer.options(**deployment_options(cfg)).bind(plain, str(model_path.resolve()))


def compose_config(overrides: list[str] | None = None) -> Any:
    """conf/serve.yaml with Hydra `overrides` ("key=value"), typed and validated
    (`load_serve_config`). Raises ConfigError / OmegaConf errors naming the bad key."""
    from cudal1.config import load_serve_config
    from cudal1.launch import compose

    return load_serve_config(compose("serve", overrides or []))


def build_app(args: dict[str, str]) -> Any:
    """The builder `serve run cudal1.serve.app:build_app key=value ...` calls: each key=value is a
    Hydra override of conf/serve.yaml. (With `serve run`, Serve's own HTTP options apply: port 8000
    unless set; `serve.host`/`serve.port` are used by jobs/serve.py.)"""
    return application(compose_config([f"{k}={v}" for k, v in (args or {}).items()]))


def _serve_logs() -> str:
    """The directory of Ray Serve's log files in this Ray session (on the head node)."""
    import ray

    try:
        return str(Path(ray._private.worker._global_node.get_logs_dir_path()) / "serve")
    except AttributeError:  # a private API: another Ray version may not have it
        return "the serve/ folder of Ray's session logs"


def logging_config(cfg: Any) -> dict[str, Any]:
    """Serve's logging config for the proxy, the controller and the application's replicas:
    per-request access-log lines only with `serve.access_log`."""
    return {"enable_access_log": bool(cfg.serve.access_log)}


def run(cfg: Any, blocking: bool = True) -> None:
    """Start Serve's HTTP proxy on `serve.host:serve.port` and deploy the application as
    `serve.app_name` at `serve.route_prefix` (jobs/serve.py; tests call it with blocking=False).
    Ray must be initialised."""
    serve.start(http_options={"host": cfg.serve.host, "port": cfg.serve.port}, logging_config=logging_config(cfg))
    serve.run(
        application(cfg),
        name=cfg.serve.app_name,
        route_prefix=cfg.serve.route_prefix,
        blocking=blocking,
        logging_config=logging_config(cfg),
    )


class NotAnswering(RuntimeError):
    """The application reached RUNNING but its HTTP route did not answer 200 within
    `serve.answer_timeout_s` (another process on the port, or Serve already running on the
    cluster with other HTTP options)."""


class _Stop(KeyboardInterrupt):
    """SIGTERM or SIGINT reached jobs/serve.py; `signame` says which."""

    def __init__(self, signame: str) -> None:
        super().__init__(signame)
        self.signame = signame


def start(cfg: Any) -> None:
    """jobs/serve.py: join or start Ray as `cfg.ray` says (a local cluster unless RAY_ADDRESS, which
    `ray job submit` sets), check with `ray.preflight` that the nodes can hold the pools and the
    replicas (`replica_needs`), deploy the application, and block until SIGTERM or SIGINT.

    Prints (stdout) what it waits for and the seconds elapsed every `serve.progress_s` while it
    starts, then `serve: ready ...` with the URL only once `GET /v1/models` answered 200 (the
    replica has loaded the engine and the pools, and the proxy routes to it). On SIGTERM or SIGINT
    it deletes the application (the replica's pools shut down), stops the local cluster if it
    started one, prints `serve: ... done` and returns: the caller exits 0, a requested stop being a
    server's normal end. Raises InsufficientResources naming each role, NotAnswering, and what
    `serve.run` raises for an application that fails to deploy (after the same clean-up)."""
    import signal

    from cudal1.launch import start_ray

    s = cfg.serve
    quiet = {} if s.serve_logs_to_terminal else {"RAY_SERVE_LOG_TO_STDERR": "0"}
    if quiet:  # this process's own Serve client lines too ("Started Serve", "Deleting app")
        logging.getLogger("ray.serve").setLevel(logging.WARNING)
    facts = start_ray(cfg, needs=replica_needs(cfg), env_vars=quiet)
    url = f"http://{s.host}:{s.port}{s.route_prefix.rstrip('/')}/v1"
    t0 = time.monotonic()

    def stop(signum: int, frame: Any) -> None:
        raise _Stop(signal.Signals(signum).name)

    # After Ray's start-up, whose handler in the driver prints a C++ stack and aborts on SIGTERM.
    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGINT)}
    _say(
        f"serve: starting {s.model_name} at {url}: the policy checkpoint, then the replica (the engine and the "
        f"benchmark pools load in it); a line every {s.progress_s:.0f} s until it answers"
        + ("" if s.serve_logs_to_terminal else f"; Ray Serve's own log lines: {_serve_logs()}")
    )
    why = "stopping after an error"
    try:
        with _Progress(t0, s.progress_s) as progress:
            progress.what = lambda: f"the policy checkpoint under {cfg.model_dir}"
            serve.start(http_options={"host": s.host, "port": s.port}, logging_config=logging_config(cfg))
            target = application(cfg)
            progress.what = lambda: _app_state(s.app_name)
            serve.run(  # returns once RUNNING
                target,
                name=s.app_name,
                route_prefix=s.route_prefix,
                blocking=False,
                logging_config=logging_config(cfg),
            )
            _wait_answering(cfg, progress)
        _say(
            f"serve: ready after {time.monotonic() - t0:.0f} s: {s.model_name} at {url} (bearer token required); "
            "Ctrl-C or SIGTERM stops it"
        )
        while True:
            time.sleep(3600)
    except _Stop as e:
        why = e.signame
    finally:
        for sig in previous:  # a second signal must not interrupt the clean-up
            signal.signal(sig, lambda signum, frame: _say("serve: already shutting down"))
        clean = _shut_down(s.app_name, facts["started_local"], why)
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if not clean:
        raise SystemExit(1)


def _say(line: str) -> None:
    """One line on stdout in a single write, its own newlines folded to spaces: `print` writes the
    text and the newline separately, and Ray's log thread, writing the actors' lines to the same
    stdout, can land between them (a progress line then ran into a Ray line in one test run)."""
    sys.stdout.write(" ".join(line.splitlines()) + "\n")
    sys.stdout.flush()


def _shut_down(app_name: str, local_cluster: bool, why: str) -> bool:
    """Delete the application (Serve shuts its replicas down gracefully: `PolicyServer.__del__`
    stops the pools) and, when this process started the cluster, stop it; one line before, one
    after. Returns False when the clean-up failed (the line says how), never raises: an error being
    reported must not be replaced by one of the clean-up."""
    import ray

    t0 = time.monotonic()
    also = " and the local Ray cluster" if local_cluster else ""
    _say(f"serve: {why}: shutting down the application {app_name!r}{also} ...")
    try:
        if ray.is_initialized():
            try:
                deployed = app_name in serve.status().applications
            except Exception:  # noqa: BLE001 - no Serve instance: it failed before Serve started
                deployed = False
            if deployed:
                serve.delete(app_name)
            if local_cluster:
                ray.shutdown()
    except Exception as e:  # noqa: BLE001 - a failed clean-up is reported, not a second traceback
        _say(f"serve: shutting down: {type(e).__name__}: {e}")
        return False
    _say(f"serve: shut down in {time.monotonic() - t0:.0f} s: done")
    return True


class _Progress:
    """While the block runs, a line every `every_s` seconds on stdout: `serve: waiting for <what>
    (<elapsed> s)`, elapsed from `t0` (`time.monotonic`). `what` is a callable the thread calls
    (it may ask Serve for its status), set by the main thread as the start-up moves on."""

    def __init__(self, t0: float, every_s: float) -> None:
        self.t0, self.every_s = t0, every_s
        self.what: Any = lambda: "the start"
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._beat, name="serve-progress", daemon=True)

    def __enter__(self) -> "_Progress":
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._done.set()
        self._thread.join(timeout=5)

    def _beat(self) -> None:
        while not self._done.wait(self.every_s):
            try:
                what = self.what()
            except Exception as e:  # noqa: BLE001 - a status that cannot be read is still progress to show
                what = f"the application (status unreadable: {type(e).__name__}: {str(e)[:200]})"
            if not self._done.is_set():
                _say(f"serve: waiting for {what} ({time.monotonic() - self.t0:.0f} s)")


def _app_state(app_name: str) -> str:
    """The application's state in Serve's words, e.g. "the application 'cudal1' to run: DEPLOYING,
    PolicyServer UPDATING (replicas: STARTING 1)"."""
    app = serve.status().applications.get(app_name)
    if app is None:
        return f"Serve to deploy the application {app_name!r}"

    def word(x: Any) -> str:  # Serve's enums are str enums; plain strings pass unchanged
        return str(getattr(x, "value", x))

    parts = [word(app.status)]
    for name, d in app.deployments.items():
        replicas = ", ".join(f"{word(state)} {n}" for state, n in d.replica_states.items() if n)
        parts.append(f"{name} {word(d.status)}" + (f" (replicas: {replicas})" if replicas else ""))
    return f"the application {app_name!r} to run: " + ", ".join(parts)


def _wait_answering(cfg: Any, progress: _Progress) -> None:
    """Until `GET <route>/v1/models` with the bearer token answers 200 on this node (127.0.0.1 when
    Serve binds every interface). Raises NotAnswering after `serve.answer_timeout_s` seconds."""
    import urllib.error
    import urllib.request

    s = cfg.serve
    host = "127.0.0.1" if s.host in ("0.0.0.0", "::", "") else s.host
    url = f"http://{host}:{s.port}{s.route_prefix.rstrip('/')}/v1/models"
    token = s.token or os.environ.get(s.token_env, "")
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})
    last = "nothing yet"
    progress.what = lambda: f"GET {url} to answer 200 (last: {last})"
    deadline = time.monotonic() + s.answer_timeout_s
    while True:
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                if response.status == 200:
                    return
                last = f"HTTP {response.status}"
        except urllib.error.HTTPError as e:
            last = f"HTTP {e.code}"
        except (urllib.error.URLError, OSError) as e:
            last = str(getattr(e, "reason", e))
        if time.monotonic() > deadline:
            raise NotAnswering(
                f"the application is RUNNING but GET {url} did not answer 200 within {s.answer_timeout_s:.0f} s "
                f"(last: {last}); another process may hold port {s.port}, or Serve already runs on this cluster "
                "with other HTTP options"
            )
        time.sleep(0.5)


def replica_needs(cfg: Any) -> list[Any]:
    """What the application asks of the cluster at its start: each replica's benchmark pools and the
    replicas themselves (`min_replicas` when autoscaling), as `cudal1.actors.preflight.ActorNeed`s."""
    from cudal1.actors.preflight import ActorNeed

    replicas = cfg.serve.min_replicas if cfg.serve.autoscaling else cfg.serve.num_replicas
    needs = [
        ActorNeed.of(
            f"benchmark pool {name!r} (per replica)",
            p.num_actors * replicas,
            p.num_cpus,
            p.num_gpus,
            p.accelerator_type,
            dict(p.resources),
        )
        for name, p in cfg.bench.pools.items()
    ]
    needs.append(
        ActorNeed.of("serve replica (holds the vLLM engine)", replicas, cfg.serve.replica_cpus, cfg.rollout.num_gpus)
    )
    return needs
