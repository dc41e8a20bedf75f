"""The learner group: N `GRPOLearner` ranks (DeepSpeed data parallel, ZeRO 1-3) as Ray actors.

`LearnerGroup.start(...)` reserves one placement-group bundle per rank (its CPUs and GPU; strategy
PACK, which fills a node before it spills onto the next), finds a free port on rank 0's node, and
starts each rank as a `LearnerActor` in its bundle with its
`cudal1.engines.deepspeed_engine.Rendezvous`: rank 0 serves the torch.distributed store, the
others join it (gloo on the CPU, nccl on GPUs). One rank is started exactly like a single learner
actor (no placement group).

The driver uses a `LearnerGroup` like one learner's `ShellHandle`: `group.grpo_step(examples)`
blocks and returns the metrics, `group.broadcast_weights.remote()` gives one ObjectRef,
`group.attribute("version")`, `group.endpoint()`, `group.ready()`, `group.kill()`. Every call
reaches every rank, in the same order on each (the ranks' collectives line up), and answers with
rank 0's value:
- `sft_step`, `grpo_step`: each rank gets its share of the examples (`cudal1.training.shards.by_minibatch`);
  the ranks all-reduce their metrics, so rank 0's are the group's.
- `score`: consecutive blocks (`shards.contiguous`), the rows joined again in order.
- `logprobs(prompt, response)`: rank 0 scores it, the others take part with nothing to score.
- anything else (save, load, export, set_lr, reset_reference, named_weights, weight_manifest,
  init_weight_group, broadcast_weights, ...): the same arguments to every rank.

A blocking call fails as soon as any rank fails, without waiting for the others (which may be
blocked in a collective with it): a rank that died raises `cudal1.actors.health.LearnerRankLost`
naming the rank and its actor, a call still unanswered after `learner.timeout_s` raises
`ActorStalled` naming the silent ranks. The group cannot go on without the rank (its collectives
would wait for it): the driver stops the run, `kill()` ends the other ranks at once, and
`resume=true` continues from the last checkpoint. The ranks' own collectives time out after
`learner.timeout_s` too (the process group's timeout, `LearnerConfig.timeout_s`).

All of cudal1's Ray calls for the learner group are in this module.
"""

from __future__ import annotations

import logging
from typing import Any

import ray

from cudal1.actors.health import LearnerRankLost
from cudal1.actors.shells import ShellHandle, remote_class, wait_named
from cudal1.training import shards
from cudal1.training.config import LearnerConfig
from cudal1.training.learner import GRPOLearner

log = logging.getLogger(__name__)

LearnerActor = remote_class(GRPOLearner)
"""The GRPO learner's shell (DeepSpeed); give it GPUs with `.options(num_gpus=...)`."""

_BY_MINIBATCH = ("sft_step", "grpo_step")


@ray.remote(num_cpus=0)
def _endpoint() -> tuple[str, int]:
    """(this node's IP, a TCP port free on it): where rank 0 serves the rendezvous."""
    from cudal1.engines.weight_sync import free_port

    return ray.util.get_node_ip_address(), free_port("")


@ray.remote(num_cpus=0)
def _first(*values: Any) -> Any:
    """Rank 0's value, once every rank's call has finished (an error of any rank is raised)."""
    return values[0]


def _wait(calls: list[tuple[str, Any]], what: str, timeout_s: float | None = None) -> list[Any]:
    """The values of one call per rank (`calls`: (label, ObjectRef)), raising as soon as any call
    fails (not after the others, which may be blocked in a collective waiting for the failed rank):
    `LearnerRankLost` for a rank that died, the rank's own error, or `ActorStalled` after `timeout_s`."""
    return wait_named(calls, what, timeout_s, lost=LearnerRankLost)


def rank_calls(learner: Any, name: str, *args: Any, **kwargs: Any) -> list[tuple[str, Any]]:
    """(label, ObjectRef) of the call `name(*args, **kwargs)` on every rank of `learner` (a
    `LearnerGroup`, or one learner's `ShellHandle`), rank 0 first: what `wait_named` waits for."""
    if isinstance(learner, LearnerGroup):
        return learner.calls(name, *args, **kwargs)
    return [(learner.label("learner"), learner.method(name).remote(*args, **kwargs))]


class _GroupMethod:
    """`group.name`: `.remote(...)` → one ObjectRef (rank 0's value); calling it blocks for it."""

    def __init__(self, group: "LearnerGroup", name: str) -> None:
        self._group, self._name = group, name

    def _refs(self, args: tuple, kwargs: dict) -> list[Any]:
        g, n = self._group, len(self._group.ranks)
        if n == 1:
            return [g.ranks[0].method(self._name).remote(*args, **kwargs)]
        if self._name in _BY_MINIBATCH:
            parts = shards.by_minibatch(list(args[0]), n, g.per_rank)
            return [h.method(self._name).remote(part, *args[1:], **kwargs) for h, part in zip(g.ranks, parts)]
        if self._name == "score":
            parts = shards.contiguous(list(args[0]), n)
            return [h.method("score").remote(part, *args[1:], **kwargs) for h, part in zip(g.ranks, parts)]
        if self._name == "logprobs":
            return [g.ranks[0].method("logprobs").remote(*args, **kwargs)] + [
                h.method("score").remote([]) for h in g.ranks[1:]
            ]
        return [h.method(self._name).remote(*args, **kwargs) for h in g.ranks]

    def remote(self, *args: Any, **kwargs: Any) -> Any:
        refs = self._refs(args, kwargs)
        if len(refs) == 1:
            return refs[0]
        if self._name == "score":
            raise TypeError(
                "score.remote() on a group of several ranks: call group.score(...) (it joins the ranks' rows)"
            )
        if self._name == "named_weights":
            # Rank 0's full weights go straight to the caller (a `_first` task would deserialise and
            # re-serialise them); the other ranks only take part in the gathers and return [].
            return refs[0]
        return _first.remote(*refs)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        values = _wait(self._group.calls(self._name, *args, **kwargs), self._name, self._group.timeout_s)
        if self._name == "score":
            return [row for part in values for row in part]
        return values[0]


class LearnerGroup:
    """Handle on the N rank actors of one learner (see the module docstring).

    Attributes:
        ranks: the ranks' `ShellHandle`s, rank 0 first.
        placement_group: the group's Ray placement group (None for one rank).
        per_rank: examples per rank and optimizer step (micro_batch * grad_accum).
        timeout_s: the longest the driver waits for one call (`learner.timeout_s`; None: no limit).
    """

    def __init__(
        self, ranks: list[ShellHandle], placement_group: Any, per_rank: int, timeout_s: float | None = None
    ) -> None:
        self.ranks, self.placement_group, self.per_rank = list(ranks), placement_group, per_rank
        self.timeout_s = timeout_s
        self.class_name = "LearnerGroup"

    @classmethod
    def start(
        cls,
        model_path: str,
        config: LearnerConfig,
        *,
        actor_options: dict[str, Any] | None = None,
        bundle_resources: dict[str, float] | None = None,
        strategy: str = "PACK",
        placement_timeout_s: float = 600.0,
        **learner_kwargs: Any,
    ) -> "LearnerGroup":
        """Start `num_ranks` ranks (asynchronously: call `ready()` to wait for their constructors).

        Args:
            model_path: the policy checkpoint every rank loads.
            config: the `learner` config group, given whole to every rank; its `num_ranks` (DeepSpeed
                data-parallel world size; 1 starts one actor, no group), `num_cpus` and `num_gpus`
                (per rank: GPUs 0 or 1, a rank drives one device) place them.
            actor_options: more Ray options for a single rank (e.g. node affinity); with several
                ranks the placement group decides where they run, so node constraints go into
                `bundle_resources` instead (e.g. {"node:10.0.0.5": 0.001}).
            strategy: the placement group's strategy (PACK, SPREAD, STRICT_PACK, STRICT_SPREAD).
            placement_timeout_s: how long to wait for the cluster to grant the bundles.
            learner_kwargs: the rest of `GRPOLearner`'s arguments (max_response_len, device, seed).

        Raises:
            ValueError: several ranks with a node constraint in actor_options.
            TimeoutError: the placement group was not granted in time (the message names the bundles).
        """
        num_ranks, num_cpus, num_gpus = config.num_ranks, config.num_cpus, config.num_gpus
        per_rank = config.micro_batch * config.grad_accum
        if num_ranks == 1:
            rank = LearnerActor.options(num_cpus=num_cpus, num_gpus=num_gpus, **(actor_options or {}))
            return cls([rank.remote(model_path, config, **learner_kwargs)], None, per_rank, config.timeout_s)
        if actor_options and "scheduling_strategy" in actor_options:
            raise ValueError(
                "several learner ranks are placed by their placement group: pass node constraints as bundle_resources"
            )
        from ray.util.placement_group import remove_placement_group

        from cudal1.actors.cluster import in_bundle, reserve
        from cudal1.engines.deepspeed_engine import Rendezvous

        bundle = {k: float(v) for k, v in {"CPU": num_cpus, "GPU": num_gpus, **(bundle_resources or {})}.items() if v}
        pg = reserve(
            [bundle] * num_ranks,
            strategy,
            "",
            placement_timeout_s,
            f"the cluster did not grant {num_ranks} learner bundles of {bundle} ({strategy})",
        )
        try:
            host, port = ray.get(_endpoint.options(scheduling_strategy=in_bundle(pg, 0)).remote())
            ranks = []
            for i in range(num_ranks):
                options = {k: v for k, v in (actor_options or {}).items() if k != "scheduling_strategy"}
                actor = LearnerActor.options(
                    num_cpus=num_cpus, num_gpus=num_gpus, scheduling_strategy=in_bundle(pg, i), **options
                )
                ranks.append(
                    actor.remote(model_path, config, rendezvous=Rendezvous(i, num_ranks, host, port), **learner_kwargs)
                )
        except BaseException:
            remove_placement_group(pg)
            raise
        log.info(
            "learner group: %d ranks, rendezvous at %s:%d, bundles %s (%s)", num_ranks, host, port, bundle, strategy
        )
        return cls(ranks, pg, per_rank, config.timeout_s)

    def __getattr__(self, name: str) -> _GroupMethod:
        if name.startswith("_"):  # keeps pickling and copy from probing
            raise AttributeError(name)
        return _GroupMethod(self, name)

    def method(self, name: str) -> _GroupMethod:
        """The group method `name` (for names this class uses itself)."""
        return _GroupMethod(self, name)

    def label(self, i: int) -> str:
        """How messages name rank i: "learner rank i (actor <id>)"."""
        return self.ranks[i].label(f"learner rank {i}")

    def labels(self) -> list[str]:
        """`label(i)` of every rank, rank 0 first."""
        return [self.label(i) for i in range(len(self.ranks))]

    def calls(self, name: str, *args: Any, **kwargs: Any) -> list[tuple[str, Any]]:
        """Start the group method `name` on its ranks (split as the module docstring says);
        returns (label, ObjectRef) per rank, rank 0 first."""
        refs = _GroupMethod(self, name)._refs(args, kwargs)
        return [(self.label(i), ref) for i, ref in enumerate(refs)]

    def attribute(self, name: str) -> Any:
        """Rank 0's public attribute `name` (blocking)."""
        return _wait([(self.label(0), self.ranks[0].actor.get.remote(name))], f"reading {name}", self.timeout_s)[0]

    def ready(self, timeout_s: float | None = None) -> str:
        """Wait until every rank's constructor has run (re-raises the first error; `timeout_s`
        None: the group's)."""
        calls = [(self.label(i), h.actor.ready.remote()) for i, h in enumerate(self.ranks)]
        return _wait(calls, "start-up", self.timeout_s if timeout_s is None else timeout_s)[0]

    def endpoint(self) -> tuple[str, int]:
        """(IP, free port) on rank 0's node: where the weight-broadcast group is served."""
        return self.ranks[0].endpoint()

    def storage_probe(self, probe: str, token: str, role: str) -> Any:
        """ObjectRef of rank 0's storage probe answer (see `ShellHandle.storage_probe`); check every
        rank with `rank_handles()`."""
        return self.ranks[0].storage_probe(probe, token, role)

    def rank_handles(self, role: str = "learner") -> dict[str, ShellHandle]:
        """{"learner rank i": handle}: each rank by name (for the shared-storage check)."""
        if len(self.ranks) == 1:
            return {role: self.ranks[0]}
        return {f"{role} rank {i}": h for i, h in enumerate(self.ranks)}

    def kill(self, no_restart: bool = True) -> None:
        """Stop every rank and free the placement group."""
        for h in self.ranks:
            try:
                h.kill(no_restart)
            except Exception as e:  # already gone
                log.debug("stopping %s: %s", h, e)
        if self.placement_group is not None:
            from ray.util.placement_group import remove_placement_group

            try:
                remove_placement_group(self.placement_group)
            except Exception as e:  # the cluster is already gone
                log.debug("removing %s: %s", self.placement_group, e)
            self.placement_group = None

    def __repr__(self) -> str:
        return f"LearnerGroup({len(self.ranks)} ranks)"
