"""How a learner group splits one call's examples between its ranks (pure functions).

`by_minibatch` keeps the optimizer-step structure of `GRPOLearner` intact under data parallelism:
the learner cuts its examples into mini-batches of `micro_batch * grad_accum` (one optimizer step
each), so the group cuts the global list into mini-batches of `per_rank * num_ranks` and deals each
one round-robin. Rank r's i-th local mini-batch is then exactly its part of the i-th global one
(`GRPOLearner._plan` all-reduces the counts that normalise the loss), and one rank given the whole
list with `micro_batch * grad_accum = per_rank * num_ranks` takes the same optimizer steps.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

T = TypeVar("T")


def by_minibatch(items: Sequence[T], num_ranks: int, per_rank: int) -> list[list[T]]:
    """Split `items` for `num_ranks` ranks that each take mini-batches of `per_rank` items.

    Global mini-batch i is items[i*G : (i+1)*G] with G = per_rank * num_ranks; rank r gets its
    elements r, r + num_ranks, ... So every rank's share of a full global mini-batch is exactly
    `per_rank` items, and of the last, shorter one at most `per_rank` (possibly none).

    Returns:
        num_ranks lists (rank order), together holding every item once.

    Raises:
        ValueError: num_ranks or per_rank < 1.
    """
    if num_ranks < 1 or per_rank < 1:
        raise ValueError(f"num_ranks and per_rank must be >= 1, got {num_ranks}, {per_rank}")
    size = per_rank * num_ranks
    shards: list[list[T]] = [[] for _ in range(num_ranks)]
    for start in range(0, len(items), size):
        chunk = items[start : start + size]
        for r in range(num_ranks):
            shards[r].extend(chunk[r::num_ranks])
    return shards


def contiguous_bounds(count: int, shards: int) -> list[tuple[int, int]]:
    """[start, end) of `shards` consecutive blocks of `count` items whose sizes differ by at most
    one, longer ones first: contiguous_bounds(5, 2) == [(0, 3), (3, 5)]. Raises ValueError if
    shards < 1. (Also how the generator group splits prompts over its engines.)"""
    if shards < 1:
        raise ValueError(f"shards must be at least 1, not {shards}")
    base, extra = divmod(count, shards)
    bounds, start = [], 0
    for i in range(shards):
        end = start + base + (1 if i < extra else 0)
        bounds.append((start, end))
        start = end
    return bounds


def contiguous(items: Sequence[T], num_ranks: int) -> list[list[T]]:
    """`items` in num_ranks consecutive blocks whose sizes differ by at most one (the first blocks
    are the longer ones); concatenating the blocks in rank order gives `items` back. For calls
    whose per-item results the group joins again (scoring). Raises ValueError for num_ranks < 1."""
    return [list(items[a:b]) for a, b in contiguous_bounds(len(items), num_ranks)]
