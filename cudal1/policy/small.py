"""The embedded default policy: a small Qwen2-architecture model and a code tokenizer, built offline.

`init_small(DIR)` needs no download: it takes a byte-level BPE tokenizer (the `tokenizers`
library) with the Qwen chat special tokens, adds a Qwen-style chat template, and saves a randomly
initialised `Qwen2ForCausalLM` beside it. The directory is an ordinary Hugging Face checkpoint
that transformers, vLLM and DeepSpeed load.

The default tokenizer ships with the package (`SHIPPED_TOKENIZER`, 4096 tokens, trained once by
`scripts/build_small_tokenizer.py` on the project's Python code, builtin reference programs and
seed solutions included), so that the same arguments build the same model whatever else in the
package changes (a tokenizer trained on the code at hand would make every commit's default model
a different one). Another vocabulary size, or an explicit `corpus_root`, trains a tokenizer
afresh.

What it is not: a model that writes kernels. Its weights are random; it exists so that the whole
RL system (rollouts, weight sync, learner, evaluation) runs end to end on a CPU machine in
minutes. Train a real checkpoint (Qwen, DeepSeek) for results.
"""

from __future__ import annotations

import json
from pathlib import Path

IM_START, IM_END, END_OF_TEXT = "<|im_start|>", "<|im_end|>", "<|endoftext|>"
SPECIAL_TOKENS = (END_OF_TEXT, IM_START, IM_END)

CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)
"""Qwen's ChatML layout: `<|im_start|>role\\ncontent<|im_end|>\\n` per message; generation
starts after `<|im_start|>assistant\\n` and ends with `<|im_end|>`."""


SHIPPED_TOKENIZER = Path(__file__).with_name("small_tokenizer.json")
"""The default tokenizer (a `tokenizers` JSON file, 4096 tokens): `init_small` uses it unless
asked for another vocabulary size or corpus; `scripts/build_small_tokenizer.py` writes it."""
SHIPPED_VOCAB = 4096


def package_root() -> Path:
    """The directory of the installed cudal1 package (its .py files are the tokenizer corpus)."""
    return Path(__file__).resolve().parents[1]


def corpus_files(root: Path | None = None) -> list[Path]:
    """Every .py file under `root` (default: the cudal1 package), sorted so training is deterministic.

    Raises:
        FileNotFoundError: no .py file under `root`.
    """
    root = Path(root) if root is not None else package_root()
    files = sorted(p for p in root.rglob("*.py") if "__pycache__" not in p.parts)
    if not files:
        raise FileNotFoundError(f"no .py files under {root} to train the tokenizer on")
    return files


def train_tokenizer(files: list[Path], vocab_size: int = 4096):
    """A byte-level BPE `tokenizers.Tokenizer` trained on `files`, with the chat special tokens.

    Byte-level means every string encodes (no unknown token) and decodes back exactly.
    `vocab_size` counts the 256 byte symbols and the special tokens; the result may be smaller
    when the corpus has fewer distinct merges.
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=2,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    texts = [p.read_text(encoding="utf-8", errors="replace") for p in files]
    tok.train_from_iterator(texts, trainer=trainer, length=len(texts))
    return tok


def init_small(
    out_dir: str | Path,
    *,
    vocab_size: int = 4096,
    hidden_size: int = 128,
    intermediate_size: int = 384,
    num_layers: int = 2,
    num_heads: int = 4,
    num_kv_heads: int = 2,
    max_position_embeddings: int = 8192,
    seed: int = 0,
    corpus_root: str | Path | None = None,
    overwrite: bool = False,
) -> Path:
    """Build the embedded default checkpoint in `out_dir` and return its path.

    Args:
        out_dir: directory to write (created). It receives config.json, model.safetensors,
            generation_config.json, tokenizer.json, tokenizer_config.json (with the chat template).
        vocab_size: BPE vocabulary size (bytes + merges + 3 special tokens). At `SHIPPED_VOCAB`
            with no `corpus_root`, the shipped tokenizer; otherwise one trained here on the
            corpus. The model's embedding has exactly the tokenizer's size.
        hidden_size, intermediate_size, num_layers, num_heads, num_kv_heads: Qwen2 shape. The
            head size hidden_size / num_heads must be one vLLM's CPU attention supports
            (32, 64, 80, 96, 112, 128, ...).
        max_position_embeddings: longest sequence (prompt + response) in tokens; prompts hold a
            reference program and two exemplar solutions, a few thousand tokens.
        seed: seeds the weight initialisation; the same arguments give the same files.
        corpus_root: train the tokenizer on the .py files under this directory (default: the
            shipped tokenizer, or the cudal1 package's code for another `vocab_size`).
        overwrite: replace a directory that already holds a config.json.

    Raises:
        FileExistsError: `out_dir` already holds a checkpoint and `overwrite` is False.
        ValueError: a head size vLLM cannot run, or num_heads not divisible by num_kv_heads.
    """
    import torch
    from transformers import GenerationConfig, PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

    out = Path(out_dir)
    if (out / "config.json").exists() and not overwrite:
        raise FileExistsError(
            f"{out} already holds a checkpoint (config.json); pass overwrite=True (--overwrite) to replace it"
        )
    if hidden_size % num_heads or num_heads % num_kv_heads:
        raise ValueError(
            f"hidden_size {hidden_size} / num_heads {num_heads} / num_kv_heads {num_kv_heads} do not divide"
        )
    head_dim = hidden_size // num_heads
    if head_dim not in (32, 64, 80, 96, 112, 128, 160, 192, 224, 256):
        raise ValueError(f"head size {head_dim} (hidden_size / num_heads) is not one vLLM's attention kernels support")
    out.mkdir(parents=True, exist_ok=True)

    shipped = corpus_root is None and vocab_size == SHIPPED_VOCAB
    if shipped:
        from tokenizers import Tokenizer

        raw = Tokenizer.from_file(str(SHIPPED_TOKENIZER))
    else:
        raw = train_tokenizer(corpus_files(Path(corpus_root) if corpus_root else None), vocab_size)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=raw,
        bos_token=None,
        eos_token=IM_END,
        pad_token=END_OF_TEXT,
        unk_token=None,
        model_max_length=max_position_embeddings,
        clean_up_tokenization_spaces=False,
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    ids = {t: raw.token_to_id(t) for t in SPECIAL_TOKENS}

    config = Qwen2Config(
        vocab_size=raw.get_vocab_size(),
        hidden_size=hidden_size,
        intermediate_size=intermediate_size,
        num_hidden_layers=num_layers,
        num_attention_heads=num_heads,
        num_key_value_heads=num_kv_heads,
        max_position_embeddings=max_position_embeddings,
        tie_word_embeddings=True,  # the embedding is most of a small model's parameters
        bos_token_id=ids[END_OF_TEXT],
        eos_token_id=ids[IM_END],
        pad_token_id=ids[END_OF_TEXT],
        dtype="float32",
    )
    # Seed only this build, leaving the caller's global RNG state as it was.
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = Qwen2ForCausalLM(config)
    model.generation_config = GenerationConfig(
        eos_token_id=[ids[IM_END], ids[END_OF_TEXT]],
        pad_token_id=ids[END_OF_TEXT],
        bos_token_id=ids[END_OF_TEXT],
    )
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    (out / "cudal1_small.json").write_text(
        json.dumps(
            {
                "builder": "cudal1.policy.small.init_small",
                "seed": seed,
                "vocab_size": config.vocab_size,
                "tokenizer": "shipped" if shipped else "trained",
                "parameters": sum(p.numel() for p in model.parameters()),
            },
            indent=2,
        )
        + "\n",
        encoding="utf-8",
    )
    return out
