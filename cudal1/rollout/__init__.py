"""Rollout generation: sample responses with token ids and logprobs, and take the learner's weights."""

from cudal1.rollout.generator import BACKENDS, RolloutGenerator

__all__ = ["BACKENDS", "RolloutGenerator"]
