"""Model updates: the GRPO / SFT learner on DeepSpeed (a plain class; `cudal1.actors` wraps it for Ray)."""

from .learner import GRPOLearner

__all__ = ["GRPOLearner"]
