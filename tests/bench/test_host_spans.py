"""The candidate host's memory-overlap index (`cudal1.bench.host._Spans`) against brute force."""

import random

import torch

from cudal1.bench.host import _Spans


def _piece(buffer: bytearray, start: int, length: int) -> torch.Tensor:
    """A tensor whose storage is exactly buffer[start:start + length]."""
    return torch.frombuffer(memoryview(buffer)[start : start + length], dtype=torch.uint8)


def test_overlaps_agree_with_brute_force_on_random_ranges():
    rng = random.Random(0)
    buffer = bytearray(4096)
    base = _piece(buffer, 0, 1).untyped_storage().data_ptr()
    for _ in range(200):
        spans, held = _Spans(), []
        for _ in range(rng.randint(0, 10)):
            a = rng.randrange(0, 4000)
            n = rng.randint(1, 96)
            spans.add(_piece(buffer, a, n))
            held.append((a, a + n))
        a = rng.randrange(0, 4000)
        n = rng.randint(1, 96)
        expected = any(a < e and s < a + n for s, e in held)
        assert spans.overlaps(_piece(buffer, a, n)) is expected, (held, (a, a + n))
        # The held ranges are merged into disjoint sorted ones covering exactly the same bytes.
        covered = {b for s, e in held for b in range(s, e)}
        merged = {b - base for s, e in zip(spans.starts, spans.ends) for b in range(s, e)}
        assert merged == covered


def test_empty_tensors_overlap_nothing():
    buffer = bytearray(64)
    spans = _Spans([_piece(buffer, 0, 64)])
    assert not spans.overlaps(torch.empty(0))
    assert spans.overlaps(_piece(buffer, 10, 1))
