"""Start or join a Ray cluster: `ClusterConfig`, `init_ray`, `shutdown_ray`.

Where the cluster comes from, first match wins:
1. `ClusterConfig.address` (from the Hydra config): "local" starts a fresh local cluster,
   "auto" joins the one `ray start` runs on this machine, "ray://host:10001" or "host:6379" joins
   a remote one.
2. The RAY_ADDRESS environment variable, which `ray job submit` sets for the driver it runs.
3. Otherwise a local cluster in this process, sized by `num_cpus` / `num_gpus` / `resources`.

Node sizes (`num_cpus`, `resources`, `object_store_mb`) only apply to a cluster started here:
when joining an existing one the nodes already have their resources, so they are left out
(Ray refuses them there).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import socket
from typing import Any

import ray

from cudal1.actors.preflight import RayStartError

log = logging.getLogger(__name__)


@dataclasses.dataclass
class ClusterConfig:
    """How the driver reaches Ray."""

    address: str | None = None
    """None: RAY_ADDRESS if set, else a local cluster; "local", "auto", "host:port", "ray://host:port"."""
    num_cpus: int | None = None
    """Logical CPUs of a local cluster (None: Ray counts the machine's cores)."""
    num_gpus: int | None = None
    resources: dict[str, float] = dataclasses.field(default_factory=dict)
    """Custom resources of a local cluster's node, e.g. {"bench_test": 2} in tests."""
    object_store_mb: int | None = None
    """Object store size of a local cluster in MiB (None: Ray's default, 30% of RAM)."""
    namespace: str | None = None
    runtime_env: dict[str, Any] = dataclasses.field(default_factory=dict)
    """Ray runtime_env for every worker of this job (env_vars, working_dir, py_modules)."""
    include_dashboard: bool = False
    log_to_driver: bool = True


def in_submitted_job() -> bool:
    """True in the driver that `ray job submit` started (Ray hands it the job's runtime_env)."""
    return "RAY_JOB_CONFIG_JSON_ENV_VAR" in os.environ


def code_runtime_env(root: str | os.PathLike) -> dict[str, Any]:
    """The runtime_env that lets workers import this checkout's code from `root`.

    In a submitted job nothing is added: the job's `--working-dir` already reaches every node
    (unpacked at a path of each node's own), and a PYTHONPATH naming the driver's copy would point
    other nodes' workers at a path they do not have. Elsewhere PYTHONPATH points at `root`, which
    other nodes must have at the same path.
    """
    if in_submitted_job():
        return {}
    path = os.pathsep.join(p for p in (str(root), os.environ.get("PYTHONPATH")) if p)
    return {"env_vars": {"PYTHONPATH": path}}


def resolved_address(config: ClusterConfig) -> str | None:
    """The address `init_ray` will use: the config's, else $RAY_ADDRESS, else None (local)."""
    address = config.address or os.environ.get("RAY_ADDRESS") or None
    return None if address == "local" else address


def init_ray(config: ClusterConfig | None = None, **overrides: Any) -> dict[str, Any]:
    """Connect this process to Ray (once; later calls return the running connection's facts).

    `overrides` replace fields of `config` (e.g. `init_ray(address="local", num_cpus=2)`).
    Returns {"address", "started_local", "resources"}: the GCS address, whether a new local cluster
    was started, and the cluster's total resources. Raises RayStartError (its message: what was
    tried, Ray's first line, where Ray's logs are) when `ray.init` fails with a ConnectionError,
    TimeoutError, RuntimeError or a bare Exception (Ray's "node timed out during startup"); any
    other exception (a bad argument) as it is.
    """
    config = dataclasses.replace(config or ClusterConfig(), **overrides)
    if ray.is_initialized():
        return _facts(started_local=False)
    address = resolved_address(config)
    kwargs: dict[str, Any] = {
        "namespace": config.namespace,
        "runtime_env": config.runtime_env or None,
        "include_dashboard": config.include_dashboard,
        "log_to_driver": config.log_to_driver,
    }
    if address is None:
        # A fresh local cluster; "local" also stops ray.init from reading RAY_ADDRESS itself.
        kwargs.update(
            address="local",
            num_cpus=config.num_cpus,
            num_gpus=config.num_gpus,
            resources=dict(config.resources) or None,
            object_store_memory=config.object_store_mb * 2**20 if config.object_store_mb else None,
        )
    else:
        ignored = [k for k in ("num_cpus", "num_gpus", "object_store_mb") if getattr(config, k) is not None]
        if config.resources:
            ignored.append("resources")
        if ignored:
            log.warning(
                "joining the Ray cluster at %s: node sizes %s apply only to a local cluster; ignored", address, ignored
            )
        kwargs["address"] = address
        silent = _nothing_answers(address)
        if silent:
            raise RayStartError(
                f"Ray did not start (joining the Ray cluster at {address}): nothing answers there ({silent}); "
                "start the head with `ray start --head` on that node, or correct ray.address / RAY_ADDRESS"
            )
    try:
        ray.init(**kwargs)
    except Exception as e:
        if not isinstance(e, (ConnectionError, TimeoutError, RuntimeError)) and type(e) is not Exception:
            raise
        tried = f"joining the Ray cluster at {address}" if address else "starting a local Ray cluster"
        first = (str(e).strip().splitlines() or [type(e).__name__])[0]
        raise RayStartError(f"Ray did not start ({tried}): {first} (Ray's logs: {_ray_logs()})") from e
    _no_implicit_init()
    return _facts(started_local=address is None)


def _no_implicit_init() -> None:
    """Turn off Ray's implicit `ray.init()` on the first API call in this process: after
    `shutdown_ray`, a call from a thread that outlived its run raises instead of starting a second
    local cluster that nothing shuts down (its GCS client ended a test run with exit code 1, 60 s
    after the first cluster had stopped). Ray reads RAY_ENABLE_AUTO_CONNECT once, at import, into
    a private flag, which is set here; a Ray version without that module keeps its default."""
    try:
        from ray._private import auto_init_hook

        auto_init_hook.enable_auto_connect = False
    except ImportError:
        pass


JOIN_PROBE_S = 5.0
"""Seconds `init_ray` waits for a TCP connection to a host:port it is asked to join, before it
hands the address to `ray.init` (which, where nothing listens, retries for minutes)."""


def _nothing_answers(address: str, timeout_s: float = JOIN_PROBE_S) -> str | None:
    """Why nothing accepts a TCP connection at `address` ("host:port", optionally "ray://host:port"),
    or None when something does or the address is not of that form ("auto" and the like are left
    to `ray.init`). A connection that is accepted proves only that a port listens, not that it is
    Ray's: `ray.init` decides the rest."""
    host, sep, port = address.removeprefix("ray://").rpartition(":")
    if not sep or not host or not port.isdigit():
        return None
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s):
            return None
    except OSError as e:
        return f"{type(e).__name__}: {e.strerror or e}"


def _ray_logs() -> str:
    """Where Ray writes the latest session's logs on this machine (RAY_TMPDIR, else /tmp)."""
    try:
        from ray._common.utils import get_default_ray_temp_dir

        root = get_default_ray_temp_dir()
    except ImportError:  # a private module: another Ray version may not have it
        root = os.path.join(os.environ.get("RAY_TMPDIR", "/tmp"), "ray")
    return os.path.join(root, "session_latest", "logs")


def _facts(started_local: bool) -> dict[str, Any]:
    ctx = ray.get_runtime_context()
    return {
        "address": ctx.gcs_address,
        "started_local": started_local,
        "resources": ray.cluster_resources(),
    }


def shutdown_ray() -> None:
    """Disconnect from Ray (and stop the local cluster if this process started it). Idempotent."""
    if ray.is_initialized():
        ray.shutdown()


def alive_nodes() -> list[dict[str, Any]]:
    """Each alive node as {"node_id", "address", "resources"} (total resources of the node)."""
    return [
        {"node_id": n["NodeID"], "address": n.get("NodeManagerAddress", ""), "resources": dict(n.get("Resources", {}))}
        for n in ray.nodes()
        if n.get("Alive")
    ]


def reserve(bundles: list[dict[str, float]], strategy: str, name: str, timeout_s: float, refused: str) -> Any:
    """A Ray placement group of `bundles` (`strategy`: "PACK", "STRICT_PACK", ...), once the
    cluster has granted it. Raises TimeoutError "`refused` within `timeout_s` s" when it is not
    granted in time (the request is withdrawn first, so nothing stays reserved)."""
    from ray.util.placement_group import placement_group, remove_placement_group

    pg = placement_group([dict(b) for b in bundles], strategy=strategy, name=name)
    ready, _ = ray.wait([pg.ready()], timeout=timeout_s)
    if not ready:
        remove_placement_group(pg)
        raise TimeoutError(f"{refused} within {timeout_s:g} s")
    return pg


def in_bundle(pg: Any, index: int = 0) -> Any:
    """The Ray scheduling strategy that places an actor or task into bundle `index` of `pg`."""
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    return PlacementGroupSchedulingStrategy(placement_group=pg, placement_group_bundle_index=index)
