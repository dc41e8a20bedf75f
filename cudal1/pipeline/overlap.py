"""The contrastive RL stage's schedule: sample each step then train it (`pipeline.mode=sync`), or
sample step t+1 while the learner trains step t (`async`, one step off-policy).

`OneStepAhead` owns the schedule and nothing else: what a step samples (`sample(step)`: prompts
from the exemplar buffer, generation, evaluation, rewards) and how weights reach the generator
(`sync()`) are the caller's functions, so the same object drives the real stage
(`cudal1.pipeline.stages.run_contrastive_rl`) and a test with plain callables.

The async timeline, for steps t = 0, 1, ...:

    take(t)   wait for step t's rollouts (sampled inline for the first step)
              ... the caller stores step t's successes in the buffer ...
    ahead(t+1)  sync the learner's current weights (no generate call is in flight now), then
              start sampling step t+1 in a background thread with them
              ... the caller trains on step t's rollouts while step t+1 is sampled ...

so step t+1's rollouts come from the weights the learner had when it started training step t,
one update behind the weights that train on them. Weights are synced only between generate
calls: `ahead` refuses to sync while a sample is in flight.

Limits: one sample in flight at most (one step off-policy, never more); the background thread
cannot be cancelled, so a stage that stops early (an error, Ctrl-C) drops the step in flight
(`drop`): it was never recorded, and a resumed run samples it again from its checkpoint. The
dropped thread ends once the run's actors are stopped (its calls on them fail); the run waits for
that (`cudal1.pipeline.context.RunContext.close`), so no sampling thread outlives its run.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any, Callable, Generic, TypeVar

log = logging.getLogger(__name__)

T = TypeVar("T")
MODES = ("sync", "async")


class Background(Generic[T]):
    """`fn()` running in a daemon thread (a daemon, so an interrupted driver can exit while it
    runs); `result()` waits for it and returns its value or raises its exception."""

    def __init__(self, fn: Callable[[], T], name: str = "cudal1-sample") -> None:
        self._value: Any = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(fn,), name=name, daemon=True)
        self._thread.start()

    def _run(self, fn: Callable[[], T]) -> None:
        try:
            self._value = fn()
        except BaseException as exc:  # handed to the caller of result()
            self._error = exc

    def done(self) -> bool:
        return not self._thread.is_alive()

    @property
    def name(self) -> str:
        return self._thread.name

    def join(self, timeout_s: float) -> bool:
        """Wait up to `timeout_s` seconds for `fn` to end, its value or error left unread; returns
        whether it ended."""
        self._thread.join(timeout_s)
        return not self._thread.is_alive()

    def result(self, timeout_s: float | None = None) -> T:
        """The value of fn(). Raises fn's exception, or TimeoutError after `timeout_s`."""
        self._thread.join(timeout_s)
        if self._thread.is_alive():
            raise TimeoutError(f"{self._thread.name} still running after {timeout_s} s")
        if self._error is not None:
            raise self._error
        return self._value


class OneStepAhead(Generic[T]):
    """The schedule of the module docstring.

    Args:
        mode: "sync" (`ahead` does nothing: each `take` samples its step inline, and the caller
            syncs after training as before) or "async".
        sample: step -> that step's sample (called inline, or in the background thread in async
            mode; it must not share unsynchronized state with what the caller does meanwhile).
        sync: pushes the learner's current weights to the generator; returns seconds.

    Raises:
        ValueError: an unknown mode.
    """

    def __init__(self, mode: str, sample: Callable[[int], T], sync: Callable[[], float]) -> None:
        if mode not in MODES:
            raise ValueError(f"pipeline mode {mode!r} is not one of {MODES}")
        self.mode, self._sample, self._sync = mode, sample, sync
        self._pending: tuple[int, Background[T]] | None = None
        self.waited_s = 0.0
        """Seconds the last `take` waited for its sample (in async mode: the part of sampling the
        previous step's training did not hide)."""

    @property
    def in_flight(self) -> int | None:
        """The step being sampled in the background, or None."""
        return self._pending[0] if self._pending is not None else None

    def take(self, step: int) -> T:
        """Step `step`'s sample: the one started by `ahead(step)`, or sampled now.

        Raises:
            RuntimeError: a different step is in flight (the caller lost track of its steps).
        """
        t0 = time.perf_counter()
        if self._pending is None:
            value = self._sample(step)
        else:
            pending_step, job = self._pending
            if pending_step != step:
                raise RuntimeError(f"step {pending_step} is being sampled, not step {step}")
            self._pending = None
            value = job.result()
        self.waited_s = time.perf_counter() - t0
        return value

    def ahead(self, step: int) -> float:
        """Async mode: sync the weights, then start sampling `step` in the background; returns the
        sync's seconds. Sync mode: nothing (0.0).

        Raises:
            RuntimeError: a sample is already in flight (a weight sync now could reach an engine
                in the middle of a generate call).
        """
        if self.mode == "sync":
            return 0.0
        if self._pending is not None:
            raise RuntimeError(f"step {self._pending[0]} is still being sampled: no weight sync during a generate call")
        seconds = self._sync()
        self._pending = (step, Background(lambda: self._sample(step), name=f"cudal1-sample-step{step}"))
        return seconds

    def drop(self) -> Background[T] | None:
        """Forget the sample in flight, if any (an interrupted stage; it was never recorded).
        Returns its still running `Background` (None when nothing was in flight), for the caller
        to wait for once it has stopped the actors the sample uses."""
        if self._pending is None:
            return None
        step, job = self._pending
        log.info("dropping the sampling of step %d in flight (not recorded; a resumed run samples it again)", step)
        self._pending = None
        return job
