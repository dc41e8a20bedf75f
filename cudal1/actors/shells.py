"""One generic thin actor shell for the plain classes: `remote_class`, `ActorShell`, `ShellHandle`.

The rollout generator, the exemplar buffer and the learner are plain Python classes, tested
without Ray. `remote_class(Class, **actor_options)` makes any of them an actor: the class is
constructed *inside* the actor (the driver imports its module, which imports its engine, vLLM or
DeepSpeed, only when an object is built), and method calls are forwarded by name:

    Buffer = remote_class(ExemplarBuffer, num_cpus=0)
    buffer = Buffer.remote(root="runs/x/buffer")      # a ShellHandle
    ref = buffer.add.remote(exemplar)                  # ObjectRef, like any actor method
    n = buffer.size()                                  # blocking: ray.get of .remote()
    refs = generator.generate_stream.stream(prompts)   # a generator method: an ObjectRefGenerator,
                                                       # one ObjectRef per item, as each is yielded

In a job whose runtime_env names a log directory (`cudal1.engines.logs.engine_env`), the shell
routes the engines' log records to its own log file there before the object is built
(`cudal1.engines.logs.route_engine_logs`). An exception raised by the plain method reaches the driver as a `ray.exceptions.RayTaskError` that
is also an instance of the original exception type (`except ValueError` still catches it). Shells
default to `max_restarts=0`: their objects hold state, and a restarted actor would rerun the
constructor with the same arguments (which is right for a class that restores itself from disk,
such as the buffer: pass `max_restarts=-1` there). A call in flight or submitted while the
actor restarts fails with `ray.exceptions.ActorUnavailableError` unless `max_task_retries` > 0,
which reruns it: only for methods that are safe to run twice.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import ray

from cudal1.actors.health import ActorLost, ActorStalled
from cudal1.rl.buffer import ExemplarBuffer


class ActorShell:
    """The body of every shell actor: builds `target(*args, **kwargs)` here and forwards calls."""

    def __init__(self, target: type, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        from cudal1.engines.logs import route_engine_logs

        # With the job's $CUDAL1_LOG_DIR: engine logs to this actor's log file, before the object
        # imports its engine, and again after (a library may add its own handler on import).
        route_engine_logs(process=target.__name__)
        self.obj = target(*args, **kwargs)
        route_engine_logs(process=target.__name__)

    def call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        """`obj.method(*args, **kwargs)`. Raises AttributeError for a missing or private method."""
        if method.startswith("_"):
            raise AttributeError(f"{type(self.obj).__name__}.{method} is private: not callable through a shell")
        return getattr(self.obj, method)(*args, **kwargs)

    def stream(self, method: str, *args: Any, **kwargs: Any) -> Any:
        """Yield each item of the generator `obj.method(*args, **kwargs)`; called with
        num_returns="streaming", so each item reaches the caller as it is yielded. Raises
        AttributeError for a missing or private method (when the stream is first read)."""
        if method.startswith("_"):
            raise AttributeError(f"{type(self.obj).__name__}.{method} is private: not callable through a shell")
        yield from getattr(self.obj, method)(*args, **kwargs)

    def get(self, attribute: str) -> Any:
        """The value of a public attribute of the object."""
        if attribute.startswith("_"):
            raise AttributeError(f"{type(self.obj).__name__}.{attribute} is private")
        return getattr(self.obj, attribute)

    def ready(self) -> str:
        """The wrapped class's name, once the constructor has run (use to wait for start-up)."""
        return type(self.obj).__name__

    def pid(self) -> int:
        """This actor's process id (for the tools and tests that kill it)."""
        import os

        return os.getpid()

    def endpoint(self) -> tuple[str, int]:
        """(IP address of this actor's node, a TCP port free there): where a process group that this
        actor serves (e.g. the learner's weight-broadcast group) can listen."""
        import socket

        with socket.socket() as s:
            s.bind(("", 0))
            port = s.getsockname()[1]
        return ray.util.get_node_ip_address(), port

    def storage_probe(self, probe: str, token: str, role: str) -> dict[str, Any]:
        """Whether this actor's process sees the driver's probe file and can write beside it
        (`cudal1.actors.storage.answer_probe`)."""
        from cudal1.actors.storage import answer_probe

        return answer_probe(probe, token, role)


_ActorShell = ray.remote(ActorShell)


class _Method:
    """`handle.name`: `.remote(...)` gives an ObjectRef; calling it blocks for the value."""

    def __init__(self, actor: Any, name: str) -> None:
        self._actor, self._name = actor, name

    def remote(self, *args: Any, **kwargs: Any) -> Any:
        return self._actor.call.remote(self._name, *args, **kwargs)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return ray.get(self.remote(*args, **kwargs))

    def stream(self, *args: Any, **kwargs: Any) -> Any:
        """For a generator method: a `ray.ObjectRefGenerator` whose refs are its items, each ready
        as soon as the method yields it (Ray's streaming generator). After an error, the items
        yielded before it are still delivered; the next ref then raises it (RayTaskError for an
        exception, RayActorError when the actor died)."""
        return self._actor.stream.options(num_returns="streaming").remote(self._name, *args, **kwargs)


class ShellHandle:
    """Driver-side handle on one shell actor. Picklable: pass it to other actors and tasks.

    `handle.m.remote(...)` → ObjectRef of `obj.m(...)`; `handle.m(...)` → its value (blocking);
    `handle.m.stream(...)` → an ObjectRefGenerator over the items of the generator `obj.m(...)`;
    `handle.attribute("a")` → an attribute's value; `handle.actor` is the raw Ray actor handle.
    A plain method whose name this class uses itself (ready, kill, method, attribute) is reached
    with `handle.method("ready")`.
    """

    def __init__(self, actor: Any, class_name: str) -> None:
        self.actor, self.class_name = actor, class_name

    def __getattr__(self, name: str) -> _Method:
        if name.startswith("_"):  # keeps pickling and copy from probing the remote object
            raise AttributeError(name)
        return _Method(self.actor, name)

    def method(self, name: str) -> _Method:
        """The remote method `name` (for names this class uses itself)."""
        return _Method(self.actor, name)

    def attribute(self, name: str) -> Any:
        """The value of the object's public attribute `name` (blocking)."""
        return ray.get(self.actor.get.remote(name))

    def ready(self, timeout_s: float | None = None) -> str:
        """Wait until the constructor has run; re-raises its error. Raises GetTimeoutError on timeout."""
        return ray.get(self.actor.ready.remote(), timeout=timeout_s)

    def kill(self, no_restart: bool = True) -> None:
        ray.kill(self.actor, no_restart=no_restart)

    def endpoint(self) -> tuple[str, int]:
        """(node IP, free port) on this actor's node (see `ActorShell.endpoint`)."""
        return ray.get(self.actor.endpoint.remote())

    def pid(self, timeout_s: float | None = None) -> int:
        """The actor's process id. Raises GetTimeoutError after `timeout_s`."""
        return ray.get(self.actor.pid.remote(), timeout=timeout_s)

    def label(self, role: str) -> str:
        """`role` and the first 8 hex digits of the actor's id, e.g. "rollout engine 1 (actor 3f2a9c01)":
        how messages name this actor."""
        return f"{role} (actor {self.actor._actor_id.hex()[:8]})"

    def storage_probe(self, probe: str, token: str, role: str) -> Any:
        """ObjectRef of `ActorShell.storage_probe` (the driver gathers several at once)."""
        return self.actor.storage_probe.remote(probe, token, role)

    def __repr__(self) -> str:
        return f"ShellHandle({self.class_name}, {self.actor})"


class RemoteClass:
    """A plain class made remote: `.remote(*args, **kwargs)` starts an actor → `ShellHandle`."""

    def __init__(self, target: type, actor_options: dict[str, Any]) -> None:
        self.target, self.actor_options = target, dict(actor_options)

    @property
    def class_name(self) -> str:
        return self.target.__name__

    def options(self, **actor_options: Any) -> "RemoteClass":
        """A copy with more Ray actor options (num_gpus, resources, max_restarts, name, ...)."""
        return RemoteClass(self.target, {**self.actor_options, **actor_options})

    def remote(self, *args: Any, **kwargs: Any) -> ShellHandle:
        """Start the actor (asynchronously; call `.ready()` to wait for the constructor)."""
        actor = _ActorShell.options(**self.actor_options).remote(self.target, args, kwargs)
        return ShellHandle(actor, self.class_name)


def wait_all(refs: list[Any], timeout_s: float | None = None) -> list[Any]:
    """The values of several calls started together (e.g. both sides of a collective); re-raises
    the first error. Raises GetTimeoutError after `timeout_s`."""
    return ray.get(list(refs), timeout=timeout_s)


DEATH_GRACE_S = 10.0
"""How long `wait_named`, after a call raised, looks for another of its calls whose actor died."""


def wait_named(
    calls: Sequence[tuple[str, Any]], what: str, timeout_s: float | None, lost: type[ActorLost] = ActorLost
) -> list[Any]:
    """The values of several calls started together (`calls`: (label, ObjectRef) each; the label
    names the role and the actor, `ShellHandle.label`), in order. Fails as soon as one call fails,
    without waiting for the others (which may be blocked in a collective with the failed one).

    Raises:
        `lost` (an `ActorLost`): a call's actor died (RayActorError), naming it and `what`; also
            when a call raised and another call's actor is found dead within `DEATH_GRACE_S`
            (the members of a collective fail when one of them dies).
        the call's own error (RayTaskError, an instance of the exception it raised).
        ActorStalled: calls still unanswered after `timeout_s` (None: no limit), naming each.
    """
    from ray.exceptions import RayActorError

    labels = {ref: label for label, ref in calls}
    pending = [ref for _, ref in calls]
    deadline = None if timeout_s is None else time.monotonic() + timeout_s

    def died(ref: Any, e: RayActorError) -> ActorLost:
        first = str(e).strip().splitlines()
        return lost(labels[ref], what, first[0] if first else type(e).__name__)

    while pending:
        left = None if deadline is None else max(0.0, deadline - time.monotonic())
        done, pending = ray.wait(pending, num_returns=1, timeout=left)
        if not done:
            raise ActorStalled([labels[r] for r in pending], what, float(timeout_s or 0.0))
        try:
            ray.get(done[0])
        except RayActorError as e:
            raise died(done[0], e) from e
        except Exception:
            # A collective's members fail when one of them dies ("connection closed by peer"):
            # the dead one, if any shows within DEATH_GRACE_S, is the cause to name.
            until = time.monotonic() + DEATH_GRACE_S
            while pending:
                ready, pending = ray.wait(pending, num_returns=1, timeout=max(0.0, until - time.monotonic()))
                if not ready:
                    break
                try:
                    ray.get(ready[0])
                except RayActorError as e:
                    raise died(ready[0], e) from e
                except Exception:  # noqa: BLE001 - another survivor's error: the first one is raised
                    pass
            raise
    return ray.get([ref for _, ref in calls])


def remote_class(target: type, **actor_options: Any) -> RemoteClass:
    """Make the plain class `target` constructible as an actor (the actor imports its module by
    name, as unpickling a class does).

    `actor_options` are Ray's actor options (num_cpus, num_gpus, resources, accelerator_type,
    max_restarts, max_concurrency, runtime_env, name, lifetime). Defaults: num_cpus=1,
    max_concurrency=1 (calls run one at a time, in submission order), max_restarts=0.
    """
    return RemoteClass(target, {"num_cpus": 1, "max_concurrency": 1, "max_restarts": 0, **actor_options})


BufferActor = remote_class(ExemplarBuffer, num_cpus=0, max_restarts=-1, max_task_retries=3)
"""The exemplar buffer. A restart rebuilds it from its log (it persists before `add` returns), and
a call caught by the restart is rerun (safe: `add` dedupes by code, the rest only read). The
rollout generator's shell is `cudal1.actors.generator_group.RolloutActor`, the learner's
`cudal1.actors.learner_group.LearnerActor`."""
