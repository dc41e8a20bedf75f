"""The embedded small policy: built offline, loaded by transformers, code tokenizer, chat template."""

from __future__ import annotations

import json

import pytest
import torch

from cudal1.cli import main as cli_main
from cudal1.policy.model import CheckpointError, chat_prompt_ids, load_policy, load_tokenizer
from cudal1.policy.small import (
    IM_END,
    IM_START,
    SHIPPED_TOKENIZER,
    SPECIAL_TOKENS,
    corpus_files,
    init_small,
    package_root,
)


@pytest.fixture(scope="module")
def small_dir(tmp_path_factory):
    return init_small(tmp_path_factory.mktemp("small") / "ckpt", seed=0)


def test_builds_a_qwen2_checkpoint(small_dir):
    for name in (
        "config.json",
        "model.safetensors",
        "generation_config.json",
        "tokenizer.json",
        "tokenizer_config.json",
    ):
        assert (small_dir / name).is_file(), name
    config = json.loads((small_dir / "config.json").read_text())
    assert config["model_type"] == "qwen2" and config["architectures"] == ["Qwen2ForCausalLM"]
    assert config["max_position_embeddings"] == 8192
    assert config["hidden_size"] // config["num_attention_heads"] in (32, 64, 128)  # vLLM CPU attention head sizes


def test_transformers_loads_it_and_runs(small_dir):
    model, tok = load_policy(small_dir, dtype="float32", device="cpu")
    assert model.config.vocab_size == len(tok)
    eos = model.generation_config.eos_token_id
    assert tok.convert_tokens_to_ids(IM_END) in (eos if isinstance(eos, list) else [eos])
    ids = torch.tensor([tok.encode("def forward(self, x):\n    return x", add_special_tokens=False)])
    with torch.no_grad():
        logits = model(input_ids=ids).logits
    assert logits.shape == (1, ids.shape[1], len(tok)) and torch.isfinite(logits).all()


def test_tokenizer_round_trips_code(small_dir):
    tok = load_tokenizer(small_dir)
    builtin = package_root() / "tasks" / "builtin"
    samples = [p.read_text(encoding="utf-8") for p in sorted(builtin.rglob("*.py"))[:8]]
    samples.append("__global__ void k(float* y) { y[threadIdx.x] = 1.0f; }  // λ → ✓\n\t\r\n")
    for text in samples:
        ids = tok.encode(text, add_special_tokens=False)
        assert tok.decode(ids) == text
    # Trained on this code: it compresses (bytes per token well above 1).
    code = samples[0]
    assert len(code.encode()) / len(tok.encode(code, add_special_tokens=False)) > 2.0


def test_special_tokens_and_chat_template(small_dir):
    tok = load_tokenizer(small_dir)
    for special in SPECIAL_TOKENS:
        assert len(tok.encode(special, add_special_tokens=False)) == 1
    messages = [{"role": "system", "content": "You write kernels."}, {"role": "user", "content": "x = a @ b"}]
    ids = chat_prompt_ids(tok, messages)
    assert tok.decode(ids) == (
        f"{IM_START}system\nYou write kernels.{IM_END}\n{IM_START}user\nx = a @ b{IM_END}\n{IM_START}assistant\n"
    )
    assert ids.count(tok.convert_tokens_to_ids(IM_START)) == 3


def test_chat_prompt_ids_needs_a_template(small_dir):
    tok = load_tokenizer(small_dir)
    tok.chat_template = None
    with pytest.raises(ValueError, match="no chat template"):
        chat_prompt_ids(tok, [{"role": "user", "content": "hi"}])


def test_deterministic_from_seed(small_dir, tmp_path):
    again = init_small(tmp_path / "again", seed=0)
    assert (again / "model.safetensors").read_bytes() == (small_dir / "model.safetensors").read_bytes()
    assert (again / "tokenizer.json").read_text() == (small_dir / "tokenizer.json").read_text()
    other = init_small(tmp_path / "other", seed=1)
    assert (other / "model.safetensors").read_bytes() != (small_dir / "model.safetensors").read_bytes()


def test_the_default_tokenizer_is_the_shipped_one_whatever_the_code(small_dir, tmp_path):
    """The default model's tokenizer is the file shipped with the package, not one trained on the
    code at hand: the same arguments build the same model after any code change. Another corpus
    (or another vocabulary size) trains one here, and that one does follow its corpus."""
    shipped = json.loads(SHIPPED_TOKENIZER.read_text())["model"]["vocab"]
    assert json.loads((small_dir / "tokenizer.json").read_text())["model"]["vocab"] == shipped
    assert json.loads((small_dir / "cudal1_small.json").read_text())["tokenizer"] == "shipped"
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "a.py").write_text("def zyxwvut_only_here(q):\n    return q\n" * 50)
    trained = init_small(tmp_path / "trained", corpus_root=corpus, vocab_size=400, num_layers=1)
    assert json.loads((trained / "cudal1_small.json").read_text())["tokenizer"] == "trained"
    vocab = json.loads((trained / "tokenizer.json").read_text())["model"]["vocab"]
    assert "zyxwvut" in "".join(vocab) and vocab != shipped


def test_corpus_is_the_project_code():
    files = corpus_files()
    assert any("tasks/builtin/level1" in str(p) for p in files)
    assert any("solutions" in str(p) for p in files)


def test_errors_for_bad_directories(tmp_path, small_dir):
    with pytest.raises(CheckpointError, match="does not exist"):
        load_policy(tmp_path / "missing")
    with pytest.raises(CheckpointError, match="no config.json"):
        load_tokenizer(tmp_path)
    with pytest.raises(FileExistsError):
        init_small(small_dir)
    with pytest.raises(ValueError, match="head size"):
        init_small(tmp_path / "bad", hidden_size=120, num_heads=8, num_kv_heads=2)


def test_cli_init_small(tmp_path, capsys):
    assert cli_main(["model", "init-small", str(tmp_path / "m"), "--layers", "1"]) == 0
    assert "parameters" in capsys.readouterr().out
    assert json.loads((tmp_path / "m" / "config.json").read_text())["num_hidden_layers"] == 1
    assert cli_main(["model", "init-small", str(tmp_path / "m")]) == 2  # exists: usage error


def test_a_refinement_prompt_continues_the_sampled_ids(small_dir):
    """`continued_prompt_ids`: the next turn's ids are the last turn's prompt, then its answer as
    sampled (here a tokenization the tokenizer would not produce: one token per character), then
    the template's rest; they decode to the rendered prompt. An answer the next messages do not
    hold verbatim (the budget cut it), or messages that do not extend the last turn's, give None."""
    from cudal1.policy.model import continued_prompt_ids
    from cudal1.policy.prompts import Feedback, plain_prompt, refinement_turn

    tok = load_tokenizer(small_dir)
    first = plain_prompt("import torch\n\nclass Model(torch.nn.Module):\n    pass\n")
    first_ids = chat_prompt_ids(tok, first)
    answer = "## Analysis\nOne pass.\n\n## Code\n```python\nclass ModelNew:\n    pass\n```"
    sampled = [i for c in answer for i in tok.encode(c, add_special_tokens=False)] + [tok.eos_token_id]
    assert sampled[:-1] != tok.encode(answer, add_special_tokens=False)  # not the canonical ids
    report = Feedback("incorrect", "output mismatch on trial 1")
    nxt = refinement_turn(
        first, tok.decode(sampled, skip_special_tokens=True), report, 4000, lambda m: len(chat_prompt_ids(tok, m))
    )
    ids = continued_prompt_ids(tok, first_ids, sampled, first, nxt)
    assert ids is not None and ids[: len(first_ids) + len(sampled) - 1] == first_ids + sampled[:-1]
    assert tok.decode(ids) == tok.decode(chat_prompt_ids(tok, nxt))
    cut = [dict(m) for m in nxt]
    cut[len(first)]["content"] = "```python\nclass ModelNew:\n    pass\n```"
    assert continued_prompt_ids(tok, first_ids, sampled, first, cut) is None
    assert continued_prompt_ids(tok, first_ids, sampled, first[:1], nxt) is None
