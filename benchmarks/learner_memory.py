"""Measured learner memory on one GPU, beside `benchmarks/memory_plan.py`'s computed figure.

Builds a random-initialised Qwen2.5-shaped policy (no download: the shape's published config
values, bf16 weights written locally), starts the real `GRPOLearner` (DeepSpeed ZeRO-3, bf16) on
this process's GPU, and runs `--steps` GRPO steps on one sequence of `--prompt` + `--response`
random tokens. Prints one JSON line per configuration: peak allocated and reserved GPU memory
(GiB), seconds per step, and the plan's figure for the same setting.

    python benchmarks/learner_memory.py --shape 1.5B --response 8192 --prompt 2048
    python benchmarks/learner_memory.py --shape 7B --offload-optimizer

Needs a CUDA GPU (one rank; a single-process world is set up by the learner).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from memory_plan import MODELS, plan  # noqa: E402

GIB = 2**30


def build(shape, out: Path) -> Path:
    """Write a random-initialised Qwen2 checkpoint of `shape` (bf16) to `out`."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    config = Qwen2Config(
        hidden_size=shape.hidden,
        num_hidden_layers=shape.layers,
        num_attention_heads=shape.heads,
        num_key_value_heads=shape.kv_heads,
        intermediate_size=shape.intermediate,
        vocab_size=shape.vocab,
        tie_word_embeddings=shape.tied,
        max_position_embeddings=32768,
        torch_dtype="bfloat16",
    )
    with torch.device("cuda"):
        model = Qwen2ForCausalLM(config).to(torch.bfloat16)
    model.save_pretrained(out, safe_serialization=True)
    del model
    torch.cuda.empty_cache()
    return out


def measure(model_dir: Path, shape, args: argparse.Namespace) -> dict:
    from cudal1.records import PolicyExample
    from cudal1.training import GRPOLearner

    learner = GRPOLearner(
        model_dir,
        zero_stage=3,
        precision="bf16",
        device="cuda",
        lr=1e-6,
        micro_batch=1,
        grad_accum=1,
        kl_beta=args.kl_beta,
        gradient_checkpointing=not args.no_checkpointing,
        offload_optimizer=args.offload_optimizer,
        max_response_len=args.response,
        recompute_old_logprobs=True,
    )
    rng = random.Random(0)
    seconds = []
    torch.cuda.reset_peak_memory_stats()
    for step in range(args.steps):
        prompt = [rng.randrange(3, shape.vocab) for _ in range(args.prompt)]
        examples = [
            PolicyExample(prompt, [rng.randrange(3, shape.vocab) for _ in range(args.response)], advantage=a)
            for a in (1.0, -1.0)
        ]
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        learner.grpo_step(examples)
        torch.cuda.synchronize()
        seconds.append(time.perf_counter() - t0)
    setting = "+offload_opt" if args.offload_optimizer else "zero3+ckpt"
    planned, host = plan(
        shape,
        1,
        setting,
        prompt=args.prompt,
        response=args.response,
        kl=args.kl_beta > 0,
        checkpointing=not args.no_checkpointing,
    )
    return {
        "shape": shape.name,
        "params_b": round(shape.params / 1e9, 3),
        "setting": setting,
        "kl": args.kl_beta > 0,
        "checkpointing": not args.no_checkpointing,
        "prompt": args.prompt,
        "response": args.response,
        "sequences_per_step": 2,
        "peak_allocated_gib": round(torch.cuda.max_memory_allocated() / GIB, 2),
        "peak_reserved_gib": round(torch.cuda.max_memory_reserved() / GIB, 2),
        "planned_gpu_gib": round(planned, 2),
        "planned_host_gib": round(host, 1),
        "seconds_per_step": [round(s, 2) for s in seconds],
        "gpu": torch.cuda.get_device_name(0),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shape", default="1.5B", choices=[m.name for m in MODELS])
    ap.add_argument("--prompt", type=int, default=2048)
    ap.add_argument("--response", type=int, default=8192)
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--kl-beta", type=float, default=0.0)
    ap.add_argument("--offload-optimizer", action="store_true")
    ap.add_argument("--no-checkpointing", action="store_true")
    args = ap.parse_args()
    shape = next(m for m in MODELS if m.name == args.shape)
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        model_dir = build(shape, Path(tmp) / shape.name)
        print(f"built {shape.name} in {time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)
        print(json.dumps(measure(model_dir, shape, args)), flush=True)


if __name__ == "__main__":
    main()
