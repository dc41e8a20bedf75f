"""Loading the policy: any causal LM checkpoint in a local Hugging Face directory, with its chat template.

Works for the embedded default (`cudal1.policy.small.init_small`) and for a user's Qwen or
DeepSeek checkpoint alike; nothing is downloaded (`local_files_only`).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any


class CheckpointError(ValueError):
    """A model directory that is missing, incomplete or not loadable as a causal LM."""


def check_checkpoint_dir(path: str | Path) -> Path:
    """The resolved checkpoint directory.

    Raises:
        CheckpointError: the path does not exist, is not a directory, or has no config.json.
    """
    p = Path(path).expanduser()
    if not p.exists():
        raise CheckpointError(
            f"model directory {str(path)!r} does not exist (build the default with `cudal1 model init-small DIR`)"
        )
    if not p.is_dir():
        raise CheckpointError(f"model path {str(path)!r} is not a directory")
    if not (p / "config.json").is_file():
        raise CheckpointError(f"{str(path)!r} has no config.json: not a Hugging Face checkpoint directory")
    return p.resolve()


def load_tokenizer(path: str | Path) -> Any:
    """The checkpoint's tokenizer (`transformers.AutoTokenizer`, local files only).

    Raises:
        CheckpointError: missing directory or no loadable tokenizer in it.
    """
    from transformers import AutoTokenizer

    p = check_checkpoint_dir(path)
    try:
        return AutoTokenizer.from_pretrained(p, local_files_only=True)
    except (OSError, ValueError, TypeError) as exc:
        raise CheckpointError(f"cannot load a tokenizer from {p}: {exc}") from exc


def resolve_dtype(dtype: Any) -> Any:
    """A `torch.dtype` from a dtype or its name ("float32", "bf16", "fp16", ...).

    Raises:
        ValueError: an unknown name.
    """
    import torch

    if isinstance(dtype, torch.dtype):
        return dtype
    names = {
        "float32": torch.float32,
        "fp32": torch.float32,
        "bfloat16": torch.bfloat16,
        "bf16": torch.bfloat16,
        "float16": torch.float16,
        "fp16": torch.float16,
        "half": torch.float16,
    }
    try:
        return names[str(dtype).removeprefix("torch.")]
    except KeyError:
        raise ValueError(f"unknown dtype {dtype!r}; use one of {sorted(names)}") from None


def load_policy(path: str | Path, dtype: Any = "float32", device: str = "cpu") -> tuple[Any, Any]:
    """(model, tokenizer) from a local checkpoint directory.

    Args:
        path: Hugging Face checkpoint directory (config.json, weights, tokenizer files).
        dtype: parameter dtype, a `torch.dtype` or a name ("float32", "bfloat16", ...).
        device: where the model is placed ("cpu", "cuda:0").

    Returns:
        The `AutoModelForCausalLM` in eval mode and its tokenizer.

    Raises:
        CheckpointError: missing directory, or its files do not load as a causal LM.
    """
    from transformers import AutoModelForCausalLM

    p = check_checkpoint_dir(path)
    tokenizer = load_tokenizer(p)
    try:
        model = AutoModelForCausalLM.from_pretrained(p, dtype=resolve_dtype(dtype), local_files_only=True)
    except (OSError, ValueError, KeyError) as exc:
        raise CheckpointError(f"cannot load a causal LM from {p}: {exc}") from exc
    return model.to(device).eval(), tokenizer


def chat_prompt_ids(tokenizer: Any, messages: list[dict[str, str]]) -> list[int]:
    """Token ids of `messages` ([{"role": ..., "content": ...}]) under the checkpoint's chat
    template, ending with the assistant generation prompt.

    Raises:
        ValueError: the tokenizer has no chat template.
    """
    _require_chat_template(tokenizer)
    # Render to text, then encode without extra special tokens: the template already holds them,
    # and this returns a plain list on every transformers version.
    text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    return list(tokenizer.encode(text, add_special_tokens=False))


def _require_chat_template(tokenizer: Any) -> None:
    """Raises ValueError when `tokenizer` has no chat template."""
    if not getattr(tokenizer, "chat_template", None):
        name = getattr(tokenizer, "name_or_path", "") or type(tokenizer).__name__
        raise ValueError(
            f"tokenizer {name!r} has no chat template: use an instruct/chat checkpoint or set tokenizer.chat_template"
        )


def continued_prompt_ids(
    tokenizer: Any,
    previous_ids: list[int],
    sampled_ids: list[int],
    previous: list[dict[str, str]],
    messages: list[dict[str, str]],
) -> list[int] | None:
    """The next turn's prompt ids as a continuation of the last turn's: `previous_ids` (the ids
    the last turn was sampled from, `chat_prompt_ids` of `previous` or itself such a
    continuation), then `sampled_ids` as the engine sampled them (its trailing special tokens,
    an EOS, left to the template's own), then the ids of whatever the chat template renders after
    the answer (its end marker, the next user message, the generation prompt). The engine then
    finds the whole earlier turn, answer included, in its prefix cache; re-rendered from text,
    the answer's ids may differ from the sampled ones after a few tokens (a model can sample a
    tokenization the tokenizer would not produce), and the cache stops there.

    `messages` must be `previous` plus the model's answer as an assistant message (whose content
    is the decoded `sampled_ids`) and the next user message, as `cudal1.policy.prompts.
    refinement_turn` makes it. None (render `messages` instead) when it is not: the template does
    not render `messages` as `previous` with its generation prompt, then that answer verbatim,
    then the rest (an answer the budget cut, a template that trims or rewrites earlier turns).

    Raises:
        ValueError: the tokenizer has no chat template (`chat_prompt_ids`).
    """
    if len(messages) != len(previous) + 2 or messages[: len(previous)] != previous:
        return None
    answer = messages[len(previous)]
    if answer.get("role") != "assistant":
        return None
    _require_chat_template(tokenizer)
    head = tokenizer.apply_chat_template(previous, tokenize=False, add_generation_prompt=True)
    full = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    special = set(getattr(tokenizer, "all_special_ids", []) or [])
    body = list(sampled_ids)
    while body and body[-1] in special:
        body.pop()
    text = tokenizer.decode(body, skip_special_tokens=True)
    if text != answer["content"] or not full.startswith(head + text):
        return None
    rest = full[len(head) + len(text) :]
    return list(previous_ids) + body + list(tokenizer.encode(rest, add_special_tokens=False))


def chat_token_counter(tokenizer: Any) -> Callable[[list[dict[str, str]]], int]:
    """The `count_tokens` of `cudal1.policy.prompts.refinement_turn` for this tokenizer: a
    message list's length in tokens as `chat_prompt_ids` renders it (generation prompt included).
    One definition for training's refinement episodes and the optimize loop's conversations, so
    both measure a prompt against `max_model_len - max_tokens` alike. The returned function
    raises ValueError as `chat_prompt_ids` does."""

    def count(messages: list[dict[str, str]]) -> int:
        return len(chat_prompt_ids(tokenizer, messages))

    return count
