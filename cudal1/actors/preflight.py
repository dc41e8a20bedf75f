"""Does a job fit the cluster? Checked before any actor starts: `ActorNeed`, `check_cluster`;
and `RayStartError`, raised when Ray itself did not start or could not be joined (`init_ray`).

Ray queues an actor that no node can host and waits; a job that asks for more than the cluster
has would sit silent until some start timeout. `check_cluster` packs every actor the job will ask
for onto the alive nodes (first fit, largest first, each actor on one node as Ray places it) and
raises `InsufficientResources` naming what each role needs and what each node offers.

Limits: it compares against the nodes' *total* resources, so a job that fits an idle cluster
passes even while other jobs hold those resources (then Ray queues it, as usual), and it cannot
know about nodes an autoscaler would add (`ray.preflight=false` turns the check off there).
First fit can in rare cases call a packing impossible that a cleverer order would find; the
message then still shows the figures to judge by.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any


class InsufficientResources(RuntimeError):
    """The job's actors cannot all be placed on the cluster's nodes (message: needs vs nodes)."""


class RayStartError(RuntimeError):
    """Ray did not start here (a local cluster whose processes did not come up within Ray's own
    timeouts: the GCS's port file, the raylet's registration) or could not be joined (`ray.init`
    raised ConnectionError, as for address "auto" with no cluster running). A start error, not a
    bug in cudal1: jobs print it in one line and exit 2 (`cudal1.launch.user_errors`). A host:port
    where nothing accepts a connection is refused before `ray.init` (which would retry there for
    minutes), within `cluster.JOIN_PROBE_S`."""


@dataclasses.dataclass(frozen=True)
class ActorNeed:
    """`count` actors of one role, each needing `resources` on a single node.

    `resources` uses Ray's node resource names: "CPU", "GPU", "accelerator_type:H100" (Ray's
    marker resource, 0.001 per actor), custom resources. Zero amounts are dropped.
    """

    role: str
    count: int
    resources: Mapping[str, float]

    @classmethod
    def of(
        cls,
        role: str,
        count: int = 1,
        num_cpus: float = 1.0,
        num_gpus: float = 0.0,
        accelerator_type: str | None = None,
        resources: Mapping[str, float] | None = None,
    ) -> "ActorNeed":
        """An ActorNeed from Ray's actor options (num_cpus, num_gpus, accelerator_type, resources)."""
        need = {"CPU": float(num_cpus), "GPU": float(num_gpus)}
        if accelerator_type:
            need[f"accelerator_type:{accelerator_type}"] = 0.001
        need.update({k: float(v) for k, v in (resources or {}).items()})
        return cls(role, int(count), {k: v for k, v in need.items() if v > 0})

    def describe(self) -> str:
        each = ", ".join(f"{k} {_num(v)}" for k, v in self.resources.items()) or "nothing"
        return f"{self.role}: {self.count} × ({each})"


def total_need(needs: Sequence[ActorNeed]) -> dict[str, float]:
    """The sum of every actor's resources, by resource name."""
    total: dict[str, float] = {}
    for need in needs:
        for k, v in need.resources.items():
            total[k] = total.get(k, 0.0) + v * need.count
    return total


def unplaced(needs: Sequence[ActorNeed], nodes: Sequence[Mapping[str, float]]) -> list[str]:
    """The roles (one entry per actor) that first-fit packing cannot place on `nodes`.

    `nodes` are the nodes' resources ({"CPU": 4, "GPU": 1, ...}). Actors are placed largest first
    (GPUs, then custom resources, then CPUs), each on the first node with room. Empty when all fit.
    """
    free = [dict(n) for n in nodes]
    actors = [n for n in needs for _ in range(n.count)]
    actors.sort(
        key=lambda n: (n.resources.get("GPU", 0.0), len(n.resources), n.resources.get("CPU", 0.0)), reverse=True
    )
    missing = []
    for actor in actors:
        for node in free:
            if all(node.get(k, 0.0) + 1e-9 >= v for k, v in actor.resources.items()):
                for k, v in actor.resources.items():
                    node[k] = node.get(k, 0.0) - v
                break
        else:
            missing.append(actor.role)
    return missing


def check_cluster(needs: Sequence[ActorNeed], nodes: Sequence[Mapping[str, Any]]) -> None:
    """Raise InsufficientResources unless every actor of `needs` can be placed on `nodes`.

    `nodes`: `cudal1.actors.cluster.alive_nodes()` entries ({"node_id", "address", "resources"})
    or plain resource mappings. The message lists each role's needs, the job's total, each node's
    resources and the roles left without a node.
    """
    named = [
        (n.get("address") or f"node {i}", dict(n["resources"])) if "resources" in n else (f"node {i}", dict(n))
        for i, n in enumerate(nodes)
    ]
    resources = [r for _, r in named]
    missing = unplaced(needs, resources)
    if not missing:
        return
    counts: dict[str, int] = {}
    for role in missing:
        counts[role] = counts.get(role, 0) + 1
    lines = ["the job needs more than the Ray cluster has; nothing was started.", "The job asks for:"]
    lines += [f"  {n.describe()}" for n in needs if n.count]
    lines.append("  total: " + _fmt(total_need(needs)))
    lines.append(f"The cluster has {len(nodes)} alive node(s):")
    for name, res in named:
        lines.append(f"  {name}: " + _fmt({k: v for k, v in res.items() if _shown(k)}))
    lines.append("No node left for: " + ", ".join(f"{r} × {c}" for r, c in counts.items()) + ".")
    lines.append(
        "Give the cluster more (e.g. `ray start --head --num-cpus 6`: logical CPUs are scheduling "
        "tokens), or ask for less (pool num_actors, num_cpus / num_gpus of each role), "
        "or set ray.preflight=false on an autoscaling cluster."
    )
    raise InsufficientResources("\n".join(lines))


def _shown(name: str) -> bool:
    # Ray's bookkeeping resources (node:<ip>, memory in bytes) only clutter the message.
    return not name.startswith("node:") and name not in ("memory", "object_store_memory")


def _fmt(resources: Mapping[str, float]) -> str:
    return ", ".join(f"{k} {_num(v)}" for k, v in sorted(resources.items())) or "nothing"


def _num(v: float) -> str:
    return f"{v:g}"


def job_needs(cfg: Any) -> list[ActorNeed]:
    """The actors a training or optimize job config asks for: every benchmark pool's timing and
    build actors, the rollout engines (`rollout.num_engines`, each with `num_gpus` ×
    `tensor_parallel_size` GPUs), the learner's ranks (`learner.num_ranks`, 1 when the
    config has no such key) and the exemplar buffer (no resources); with rollout.weight_sync=ipc
    the learner and the engine are one bundle of both's CPUs and one GPU. `cfg` is the job's OmegaConf
    config (or anything with the same attributes)."""
    needs = []
    for name, pool in cfg.bench.pools.items():
        needs.append(
            ActorNeed.of(
                f"benchmark pool {name!r}",
                pool.num_actors,
                pool.num_cpus,
                pool.num_gpus,
                pool.accelerator_type,
                dict(pool.resources),
            )
        )
        if pool.build_actors:
            needs.append(
                ActorNeed.of(
                    f"build actors of pool {name!r}",
                    pool.build_actors,
                    pool.build_cpus,
                    resources=dict(getattr(pool, "build_resources", None) or {}),
                )
            )
    if "rollout" in cfg and "learner" in cfg and cfg.rollout.get("weight_sync") == "ipc":
        # one placement-group bundle with one whole GPU for both (`generator_group.colocated_placement_group`)
        needs.append(
            ActorNeed.of(
                "learner + rollout engine (colocated, weight_sync=ipc)",
                1,
                cfg.learner.num_cpus + cfg.rollout.num_cpus,
                1.0,
            )
        )
        return needs
    if "rollout" in cfg:
        tp = int(cfg.rollout.get("tensor_parallel_size", 1) or 1)
        needs.append(
            ActorNeed.of(
                "rollout engine",
                int(cfg.rollout.get("num_engines", 1) or 1),
                cfg.rollout.num_cpus,
                cfg.rollout.num_gpus * tp,
            )
        )
    if "learner" in cfg:
        ranks = int(cfg.learner.get("num_ranks", 1) or 1)
        needs.append(ActorNeed.of("learner", ranks, cfg.learner.num_cpus, cfg.learner.num_gpus))
    return needs
