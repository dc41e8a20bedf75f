"""Adapters to outside engines, one module each, so an engine upgrade touches one file.

`vllm_engine` is the only module of cudal1 that imports vllm; `hf_engine` is the transformers
fallback with the same interface (`RolloutEngine` below). Import the adapter modules directly:
this package itself imports neither engine.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any, Protocol


@dataclasses.dataclass
class EngineSample:
    """One sampled continuation as an engine returns it.

    Attributes:
        token_ids: sampled tokens (length R, EOS included when sampled).
        logprobs: natural-log probability of each sampled token under the engine's current
            weights, from the unmodified logits (no temperature / top-p), length R.
        text: decoded tokens (special tokens skipped).
        finish_reason: "stop" (EOS) or "length" (hit max_tokens).
    """

    token_ids: list[int]
    logprobs: list[float]
    text: str
    finish_reason: str


class RolloutEngine(Protocol):
    """What `cudal1.rollout.RolloutGenerator` needs from an engine."""

    def generate(
        self, prompts: list[list[int]], n: int, max_tokens: int, temperature: float, top_p: float
    ) -> list[list[EngineSample]]: ...

    def score(self, pairs: list[tuple[list[int], list[int]]]) -> list[list[float]]: ...

    def load_weights(self, named_tensors: Iterable[tuple[str, Any]]) -> None: ...

    def close(self) -> None: ...
