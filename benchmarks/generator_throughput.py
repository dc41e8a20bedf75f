"""Tokens/s of the generator group (`cudal1.actors.generator_group`) against raw vLLM.

The same model, prompts and sampling settings, one after the other in one run: first vLLM's own
`LLM.generate` in this process (the baseline), then a `GeneratorGroup` of `--engines` Ray actors
(with one engine its overhead is the Ray hop and the record conversion; with more, the split).
Each side is warmed up with one call, then timed over `--repeats` calls; tokens counted are the
sampled response tokens.

    python benchmarks/generator_throughput.py                      # the small local model, CPU
    python benchmarks/generator_throughput.py --model /ckpt --engines 2 --num-gpus 1

Prints one JSON line per side and the group's overhead in percent of the baseline's time.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path


def _prompts(count: int, length: int) -> list[list[int]]:
    return [[(7 * i + 13 * j) % 500 + 3 for j in range(length)] for i in range(count)]


def raw_vllm(model: str, prompts: list[list[int]], args: argparse.Namespace) -> dict:
    """vLLM's LLM.generate, no cudal1 code on the path (the baseline)."""
    from vllm import LLM, SamplingParams

    llm = LLM(model=model, dtype=args.dtype, max_model_len=args.max_model_len, seed=0, enforce_eager=True,
              kv_cache_memory_bytes=int(args.kv_cache_gib * (1 << 30)), enable_prefix_caching=True)
    params = SamplingParams(n=args.n, max_tokens=args.max_tokens, temperature=1.0, top_p=1.0, logprobs=0)
    batch = [{"prompt_token_ids": p} for p in prompts]
    llm.generate(batch, params, use_tqdm=False)  # warm-up
    tokens, t0 = 0, time.perf_counter()
    for _ in range(args.repeats):
        for out in llm.generate(batch, params, use_tqdm=False):
            tokens += sum(len(c.token_ids) for c in out.outputs)
    seconds = time.perf_counter() - t0
    llm.llm_engine.engine_core.shutdown()
    return {"side": "raw vLLM", "tokens": tokens, "seconds": round(seconds, 3), "tokens_per_s": round(tokens / seconds, 1)}


def group(model: str, prompts: list[list[int]], args: argparse.Namespace) -> dict:
    """The same calls through a GeneratorGroup of `args.engines` Ray actors."""
    from cudal1.actors.cluster import init_ray, shutdown_ray
    from cudal1.actors.generator_group import GeneratorGroup

    init_ray(address="local", num_cpus=max(2, args.engines), include_dashboard=False)
    gen = GeneratorGroup.start(model, "vllm", num_engines=args.engines, num_cpus=1, num_gpus=args.num_gpus,
                               max_model_len=args.max_model_len, dtype=args.dtype, seed=0,
                               kv_cache_gib=args.kv_cache_gib)
    try:
        gen.ready(timeout_s=1800)
        sampling = dict(n=args.n, max_tokens=args.max_tokens, temperature=1.0, top_p=1.0)
        gen.generate(prompts, **sampling)  # warm-up
        tokens, t0 = 0, time.perf_counter()
        for _ in range(args.repeats):
            tokens += sum(len(g.response_ids) for samples in gen.generate(prompts, **sampling) for g in samples)
        seconds = time.perf_counter() - t0
    finally:
        gen.kill()
        shutdown_ray()
    return {"side": f"group of {args.engines}", "tokens": tokens, "seconds": round(seconds, 3),
            "tokens_per_s": round(tokens / seconds, 1)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", help="checkpoint directory (default: build the small local model)")
    ap.add_argument("--engines", type=int, default=1)
    ap.add_argument("--num-gpus", type=float, default=0.0, help="GPUs per engine")
    ap.add_argument("--prompts", type=int, default=16)
    ap.add_argument("--prompt-len", type=int, default=64)
    ap.add_argument("--n", type=int, default=4)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--max-model-len", type=int, default=1024)
    ap.add_argument("--kv-cache-gib", type=float, default=0.25)
    args = ap.parse_args()
    model = args.model
    if model is None:
        from cudal1.policy.small import init_small

        model = str(init_small(Path(tempfile.mkdtemp()) / "small", seed=0))
    prompts = _prompts(args.prompts, args.prompt_len)
    base = raw_vllm(model, prompts, args)
    print(json.dumps(base), flush=True)
    ours = group(model, prompts, args)
    print(json.dumps(ours), flush=True)
    overhead = 100.0 * (ours["seconds"] / ours["tokens"] - base["seconds"] / base["tokens"]) / (base["seconds"] / base["tokens"])
    print(json.dumps({"group_overhead_percent": round(overhead, 1)}))


if __name__ == "__main__":
    main()
