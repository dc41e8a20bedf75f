"""Model updates: the GRPO / SFT learner on DeepSpeed (a plain class; `cudal1.actors` wraps it for Ray)
and its config (`cudal1.training.config.LearnerConfig`, torch-free)."""

from typing import Any

__all__ = ["GRPOLearner"]


def __getattr__(name: str) -> Any:
    # GRPOLearner imports torch and DeepSpeed: only when asked for, so that the config (imported by
    # the driver's validation) stays light.
    if name == "GRPOLearner":
        from .learner import GRPOLearner

        return GRPOLearner
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
