"""The transformers engine samples from the distribution whose log-probabilities it reports: the raw
model's, shaped only by temperature and top-p, whatever the checkpoint's generation_config.json sets."""

from __future__ import annotations

import json

import pytest
import torch

from cudal1.engines.hf_engine import HFEngine
from cudal1.policy.model import chat_prompt_ids, load_policy
from cudal1.policy.small import init_small

# Processors a checkpoint may carry; each would change the sampled distribution, not the reported one.
CHECKPOINT_SAMPLING = {"repetition_penalty": 1000.0, "no_repeat_ngram_size": 1, "top_k": 1, "temperature": 0.3}


@pytest.fixture(scope="module")
def penalized_dir(tmp_path_factory):
    """The embedded small policy whose generation_config.json asks for a strong repetition penalty."""
    path = init_small(tmp_path_factory.mktemp("policy") / "penalized", seed=0)
    config_file = path / "generation_config.json"
    config = json.loads(config_file.read_text())
    config_file.write_text(json.dumps({**config, **CHECKPOINT_SAMPLING}))
    return path


def raw_logprobs(model, prompt: list[int], response: list[int]) -> torch.Tensor:
    """[len(response), vocab] log-softmax of the raw logits at each response position."""
    ids = torch.tensor([prompt + response])
    with torch.no_grad():
        return model(input_ids=ids).logits[0, len(prompt) - 1 : -1].float().log_softmax(-1)


def test_checkpoint_generation_config_does_not_change_what_is_sampled(penalized_dir):
    model, tok = load_policy(penalized_dir, dtype="float32", device="cpu")
    assert model.generation_config.repetition_penalty == 1000.0  # the checkpoint does ask for it
    engine = HFEngine(str(penalized_dir), dtype="float32", device="cpu", max_model_len=1024)
    assert engine.checkpoint_generation_config.repetition_penalty == 1000.0
    prompt = chat_prompt_ids(tok, [{"role": "user", "content": "def forward(x): return x * 2"}])

    # Greedy: every token is the raw argmax, so a random model repeats itself, which the
    # checkpoint's penalty (and its no_repeat_ngram_size=1) would forbid.
    greedy = engine.generate([prompt], n=1, max_tokens=40, temperature=0.0, top_p=1.0)[0][0]
    tokens = greedy.token_ids
    lp = raw_logprobs(model, prompt, tokens)
    assert tokens == lp.argmax(-1).tolist()
    assert len(set(tokens)) < len(tokens)
    assert torch.allclose(torch.tensor(greedy.logprobs), lp.max(-1).values, atol=1e-4)

    # Sampling at temperature 1: the checkpoint's top_k=1 and temperature 0.3 would make the samples
    # (near) identical; from the near-uniform raw distribution they differ, and every reported
    # log-probability is the raw model's.
    samples = engine.generate([prompt], n=4, max_tokens=12, temperature=1.0, top_p=1.0)[0]
    assert len({tuple(s.token_ids) for s in samples}) == 4
    for s in samples:
        raw = raw_logprobs(model, prompt, s.token_ids).gather(-1, torch.tensor(s.token_ids)[:, None])[:, 0]
        assert torch.allclose(torch.tensor(s.logprobs), raw, atol=1e-4)
    engine.close()
