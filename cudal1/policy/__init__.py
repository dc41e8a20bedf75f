"""The policy: model and tokenizer loading, the embedded small default, prompts and response parsing.

Importing this package is cheap: transformers and torch load on first use.
"""

from cudal1.policy.model import CheckpointError, chat_prompt_ids, load_policy, load_tokenizer
from cudal1.policy.small import init_small

__all__ = ["CheckpointError", "chat_prompt_ids", "init_small", "load_policy", "load_tokenizer"]
