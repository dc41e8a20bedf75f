"""Adapters to outside engines, one module each, so an engine upgrade touches one file.

`vllm_engine` is the only module of cudal1 that imports vllm; `hf_engine` is the transformers
fallback with the same interface (`RolloutEngine` below). Import the adapter modules directly:
this package itself imports neither engine.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator, Sequence
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


MaxTokens = int | Sequence[int]
"""One response-token limit for every prompt, or one per prompt."""


def per_prompt_limits(max_tokens: MaxTokens, count: int) -> list[int]:
    """`max_tokens` as one limit per prompt (length `count`).

    Raises:
        ValueError: a sequence of another length, or a limit below 1.
    """
    limits = [int(max_tokens)] * count if isinstance(max_tokens, int) else [int(m) for m in max_tokens]
    if len(limits) != count:
        raise ValueError(f"max_tokens has {len(limits)} limits for {count} prompts")
    if any(m < 1 for m in limits):
        raise ValueError(f"max_tokens must be at least 1, not {min(limits)}")
    return limits


class RolloutEngine(Protocol):
    """What `cudal1.rollout.RolloutGenerator` needs from an engine.

    `generate_stream` yields (prompt index, that prompt's n samples) as each group finishes, in
    the order they finish; `generate` is the same samples collected in prompt order (both
    adapters implement it as exactly that, so the two never differ in what they sample).
    """

    def generate(
        self, prompts: list[list[int]], n: int, max_tokens: MaxTokens, temperature: float, top_p: float
    ) -> list[list[EngineSample]]: ...

    def generate_stream(
        self, prompts: list[list[int]], n: int, max_tokens: MaxTokens, temperature: float, top_p: float
    ) -> Iterator[tuple[int, list[EngineSample]]]: ...

    def score(self, pairs: list[tuple[list[int], list[int]]]) -> list[list[float]]: ...

    def load_weights(self, named_tensors: Iterable[tuple[str, Any]]) -> None: ...

    def close(self) -> None: ...


def collect_groups(stream: Iterable[tuple[int, list[Any]]], count: int) -> list[list[Any]]:
    """The groups of a `generate_stream` in prompt order (`count` prompts).

    Raises:
        RuntimeError: the stream ended without a group for some prompt, or gave one twice.
    """
    groups: list[list[Any] | None] = [None] * count
    for index, group in stream:
        if groups[index] is not None:
            raise RuntimeError(f"the engine answered prompt {index} twice")
        groups[index] = group
    missing = [i for i, g in enumerate(groups) if g is None]
    if missing:
        raise RuntimeError(f"the engine gave no samples for prompts {missing[:10]}")
    return groups  # type: ignore[return-value]
