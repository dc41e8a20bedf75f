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


def run(cfg: Any, blocking: bool = True) -> None:
    """Start Serve's HTTP proxy on `serve.host:serve.port` and deploy the application as
    `serve.app_name` at `serve.route_prefix` (jobs/serve.py; tests call it with blocking=False).
    Ray must be initialised."""
    serve.start(http_options={"host": cfg.serve.host, "port": cfg.serve.port})
    serve.run(application(cfg), name=cfg.serve.app_name, route_prefix=cfg.serve.route_prefix, blocking=blocking)


def start(cfg: Any) -> None:
    """jobs/serve.py: join or start Ray as `cfg.ray` says (a local cluster unless RAY_ADDRESS, which
    `ray job submit` sets), check with `ray.preflight` that the nodes can hold the pools and the
    replicas (`replica_needs`), then `run` the application and block. Raises InsufficientResources
    naming each role."""
    from cudal1.launch import start_ray

    start_ray(cfg, needs=replica_needs(cfg))
    print(
        f"serving {cfg.serve.model_name} at http://{cfg.serve.host}:{cfg.serve.port}{cfg.serve.route_prefix.rstrip('/')}"
        f"/v1 (bearer token required); Ctrl-C stops",
        flush=True,
    )
    run(cfg, blocking=True)


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
