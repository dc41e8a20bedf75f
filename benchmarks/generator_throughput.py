"""Tokens/s of the generator group (`cudal1.actors.generator_group`) against raw vLLM.

The same model, prompts and sampling settings in one run, beside one local Ray cluster: vLLM's own
`LLM.generate` in this process (the baseline) and a `GeneratorGroup` of `--engines` Ray actors
(with one engine its overhead is the Ray hop and the record conversion; with more, the split),
each warmed up once, then called in turn `--repeats` times each; tokens counted are the sampled
response tokens. Each engine actor asks for the machine's cores / engines (`--engine-cpus`): Ray
caps an actor's OpenMP threads at its CPUs, and vLLM's processes inherit the cap.

    python benchmarks/generator_throughput.py                      # the small local model, CPU
    python benchmarks/generator_throughput.py --model /ckpt --engines 2 --num-gpus 1

Prints one JSON line per side and the group's overhead in percent of the baseline's time, in
total and per median call.
"""

from __future__ import annotations

import argparse
import json
import statistics
import os
import tempfile
import time
from pathlib import Path


def _prompts(count: int, length: int) -> list[list[int]]:
    return [[(7 * i + 13 * j) % 500 + 3 for j in range(length)] for i in range(count)]


def _count(groups_of_samples) -> int:
    return sum(len(ids) for samples in groups_of_samples for ids in samples)


def compare(model: str, prompts: list[list[int]], args: argparse.Namespace) -> list[dict]:
    """Both sides in one process, beside one local Ray cluster (so the baseline, too, runs with
    Ray's own processes alive): vLLM's `LLM.generate` in this process (no cudal1 code on its path)
    and a `GeneratorGroup` of `args.engines` Ray actors, each warmed up once, then called in turn,
    `args.repeats` times each (alternating which goes first, so a drift of the machine's load
    weighs on both)."""
    from vllm import LLM, SamplingParams

    from cudal1.actors.cluster import init_ray, shutdown_ray
    from cudal1.actors.generator_group import GeneratorGroup

    cpus = args.engine_cpus or max(1, (os.cpu_count() or 1) // args.engines)
    init_ray(address="local", num_cpus=max(os.cpu_count() or 1, cpus * args.engines), include_dashboard=False)
    llm = LLM(
        model=model,
        dtype=args.dtype,
        max_model_len=args.max_model_len,
        seed=0,
        enforce_eager=True,
        kv_cache_memory_bytes=int(args.kv_cache_gib * (1 << 30)),
        enable_prefix_caching=True,
    )
    params = SamplingParams(n=args.n, max_tokens=args.max_tokens, temperature=1.0, top_p=1.0, logprobs=0)
    batch = [{"prompt_token_ids": p} for p in prompts]
    gen = GeneratorGroup.start(
        model,
        "vllm",
        num_engines=args.engines,
        num_cpus=cpus,
        num_gpus=args.num_gpus,
        max_model_len=args.max_model_len,
        dtype=args.dtype,
        seed=0,
        kv_cache_gib=args.kv_cache_gib,
    )
    sampling = dict(n=args.n, max_tokens=args.max_tokens, temperature=1.0, top_p=1.0)

    def raw() -> int:
        return _count([c.token_ids for c in out.outputs] for out in llm.generate(batch, params, use_tqdm=False))

    def ours() -> int:
        return _count([g.response_ids for g in samples] for samples in gen.generate(prompts, **sampling))

    sides = {"raw vLLM": raw, f"group of {args.engines}": ours}
    totals = {name: [0, 0.0, []] for name in sides}
    try:
        gen.ready(timeout_s=1800)
        raw(), ours()  # warm-up
        for r in range(args.repeats):
            for name in list(sides) if r % 2 == 0 else list(sides)[::-1]:
                t0 = time.perf_counter()
                tokens = sides[name]()
                dt = time.perf_counter() - t0
                totals[name][0] += tokens
                totals[name][1] += dt
                totals[name][2].append(round(dt, 3))
    finally:
        gen.kill()
        llm.llm_engine.engine_core.shutdown()
        shutdown_ray()
    return [
        {"side": name, "tokens": t, "seconds": round(sec, 3), "tokens_per_s": round(t / sec, 1), "calls_s": calls}
        for name, (t, sec, calls) in totals.items()
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", help="checkpoint directory (default: build the small local model)")
    ap.add_argument("--engines", type=int, default=1)
    ap.add_argument(
        "--engine-cpus",
        type=int,
        default=0,
        help="CPUs per engine actor (default: the machine's cores / engines, as many as the baseline"
        " has; Ray caps an actor's OpenMP threads at its CPUs, and vLLM's processes inherit that)",
    )
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
    base, ours = compare(model, prompts, args)
    print(json.dumps(base), flush=True)
    print(json.dumps(ours), flush=True)
    overhead = (
        100.0
        * (ours["seconds"] / ours["tokens"] - base["seconds"] / base["tokens"])
        / (base["seconds"] / base["tokens"])
    )
    # The median call is the figure to quote on a shared machine: one call slowed by another
    # process's burst moves the total, not the median.
    median = 100.0 * (statistics.median(ours["calls_s"]) / statistics.median(base["calls_s"]) - 1.0)
    print(json.dumps({"group_overhead_percent": round(overhead, 1), "median_call_overhead_percent": round(median, 1)}))


if __name__ == "__main__":
    main()
