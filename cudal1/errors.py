"""`ConfigError`: the one error a bad configuration value raises, wherever it is checked.

A leaf module, so that each part's own config dataclass (`cudal1.rl.rewards.RewardConfig`,
`cudal1.pipeline.optimize.OptimizeSettings`, `cudal1.training.config.LearnerConfig`,
`cudal1.serve.settings.ServeSettings`) can raise it from its `__post_init__` naming the full key, and `cudal1.config` (which composes those parts and
checks the rules between them) raises the same type.
"""

from __future__ import annotations


class ConfigError(ValueError):
    """A configuration value is out of range, not one of its choices, or refers to nothing."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(f"config error at {key}: {message}")
        self.key = key
