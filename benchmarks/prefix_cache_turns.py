"""Does a refinement episode's second turn reuse the first turn's KV through vLLM's prefix cache?

    python benchmarks/prefix_cache_turns.py [--model CKPT] [--tasks level1/17 level1/12] [--n 4]

With the project's vLLM engine (`cudal1.engines.vllm_engine.VLLMEngine`, prefix caching on, as
the generator group runs it; here with vLLM's stat counters on) and the project's prompts: turn 1
is `contrastive_prompt` of each builtin task (no exemplars), `--n` samples each; turn 2 is
`refinement_turn` of each sample (its text as the assistant message and a fixed report), the
prompt the training job sends next (`cudal1.pipeline.episodes.continue_episodes`), as token ids
two ways: `rendered` (the messages through the chat template, the answer re-tokenized from its
text) and `continued` (`cudal1.policy.model.continued_prompt_ids`: turn 1's prompt ids, the
answer's ids as sampled, then the template's rest; what the job sends). For each it prints
vLLM's prefix-cache counters for turn 2 (`vllm:prefix_cache_queries`, `vllm:prefix_cache_hits`:
prompt tokens looked up and found) and the tokens a turn-2 prompt shares with its turn 1 (the
longest common prefix with turn 1's prompt ids plus the sampled ids: an upper bound, since vLLM
reuses whole blocks only). The arms run in this order on one cache: rendered right after turn 1,
continued after it (its prompts share no block with the rendered ones past the answer's first
tokens), then continued again after `LLM.reset_prefix_cache()` (the control: what the turn-2
prompts share among themselves). One JSON line.

Default model: the embedded default policy (`cudal1.policy.small.init_small`), built on the spot.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path


def common_prefix(a: list[int], b: list[int]) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def counters(llm) -> dict[str, float]:
    """vLLM's prefix-cache counters (name -> value) from `LLM.get_metrics()`."""
    out: dict[str, float] = {}
    for m in llm.get_metrics():
        if m.name in ("vllm:prefix_cache_queries", "vllm:prefix_cache_hits"):
            out[m.name] = out.get(m.name, 0.0) + float(m.value)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", help="checkpoint directory (default: build the small local model)")
    ap.add_argument("--tasks", nargs="+", default=["level1/17", "level1/12"])
    ap.add_argument("--n", type=int, default=4)
    ap.add_argument("--max-tokens", type=int, default=256)
    ap.add_argument("--max-model-len", type=int, default=4096)
    args = ap.parse_args()

    from transformers import AutoTokenizer

    from cudal1.engines.vllm_engine import VLLMEngine
    from cudal1.policy.model import chat_prompt_ids, continued_prompt_ids
    from cudal1.policy.prompts import Feedback, contrastive_prompt, refinement_turn
    from cudal1.tasks import find_task, load_tasks

    model = args.model
    if model is None:
        from cudal1.policy.small import init_small

        model = str(init_small(Path(tempfile.mkdtemp()) / "small", seed=0))
    tok = AutoTokenizer.from_pretrained(model)
    engine = VLLMEngine(
        model, max_model_len=args.max_model_len, dtype="float32", kv_cache_gib=0.25, disable_log_stats=False
    )
    tasks = load_tasks("builtin")
    conversations = [contrastive_prompt(find_task(tasks, t).source, []) for t in args.tasks]
    first = [chat_prompt_ids(tok, m) for m in conversations]
    t0 = time.perf_counter()
    samples = engine.generate(first, args.n, args.max_tokens, 1.0, 1.0)
    turn1_s = time.perf_counter() - t0
    report = Feedback(status="incorrect", message="output mismatch on trial 1 (max abs error 0.31)")
    budget = args.max_model_len - args.max_tokens
    second: dict[str, list[list[int]]] = {"rendered": [], "continued": []}
    shared: dict[str, int] = {"rendered": 0, "continued": 0}
    for messages, ids, group in zip(conversations, first, samples):
        for s in group:
            if not s.text.strip():
                continue
            nxt = refinement_turn(messages, s.text, report, budget, lambda m: len(chat_prompt_ids(tok, m)))
            rendered = chat_prompt_ids(tok, nxt)
            continued = continued_prompt_ids(tok, ids, list(s.token_ids), messages, nxt) or rendered
            for way, nxt_ids in (("rendered", rendered), ("continued", continued)):
                second[way].append(nxt_ids)
                shared[way] += common_prefix(nxt_ids, ids + list(s.token_ids))
    result: dict[str, object] = {
        "model": model,
        "tasks": args.tasks,
        "n": args.n,
        "turn1_prompt_tokens": [len(i) for i in first],
        "turn1_seconds": round(turn1_s, 2),
        "turn2_prompts": len(second["rendered"]),
        "turn2_prompt_tokens": {way: sum(len(i) for i in ids) for way, ids in second.items()},
        "turn2_tokens_shared_with_turn1": shared,
    }
    arms = (
        ("rendered", "rendered", False),
        ("continued", "continued", False),
        ("continued_cache_reset", "continued", True),
    )
    for name, way, reset in arms:
        if reset:
            engine.llm.reset_prefix_cache()
        before = counters(engine.llm)
        t0 = time.perf_counter()
        engine.generate(second[way], 1, args.max_tokens, 1.0, 1.0)
        seconds = time.perf_counter() - t0
        after = counters(engine.llm)
        queries = after.get("vllm:prefix_cache_queries", 0.0) - before.get("vllm:prefix_cache_queries", 0.0)
        hits = after.get("vllm:prefix_cache_hits", 0.0) - before.get("vllm:prefix_cache_hits", 0.0)
        result[name] = {
            "queried_tokens": queries,
            "hit_tokens": hits,
            "hit_share": round(hits / queries, 4) if queries else None,
            "seconds": round(seconds, 2),
        }
    print(json.dumps(result))
    engine.close()


if __name__ == "__main__":
    main()
