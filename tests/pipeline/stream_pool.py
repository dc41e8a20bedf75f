"""`BenchmarkPool.stream()`'s interface in the test's own process, for tests of what the stage does
with results (not of the pool): every submitted candidate is recorded, and `results()` gives each
candidate of the current stream the result `result_of(candidate)` makes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


class StreamPool:
    """A pool stand-in: `stream()` opens a stream (indices from 0 within it), `submit` records,
    `results()` calls `result_of` on the stream's candidates in submission order."""

    def __init__(self, result_of: Callable[[Any], Any]):
        self.result_of = result_of
        self.submitted: list[Any] = []
        self.started: float | None = None
        self._start = 0

    def stream(self, progress=True):
        self._start = len(self.submitted)
        return self

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def submit(self, candidates):
        start = len(self.submitted)
        self.submitted.extend(candidates)
        self.started = self.started or 0.0
        return range(start - self._start, len(self.submitted) - self._start)

    def results(self):
        return [self.result_of(c) for c in self.submitted[self._start :]]
