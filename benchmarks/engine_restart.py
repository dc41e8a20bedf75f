"""A rollout engine killed mid-sampling on one GPU, replaced, and brought to the learner's weights.

The job's one-GPU layout: the real `GRPOLearner` (DeepSpeed, a `LearnerGroup` of one rank) and a
transformers rollout engine (`GeneratorGroup`) as two Ray actors in one colocated placement-group
bundle (0.5 GPU each, `cudal1.actors.generator_group.colocated_placement_group`), the weights
synced by the transport `rollout.weight_sync` names (`cudal1.actors.weight_transport`). For each
transport given (`--weight-sync`, default ipc then object_store):

1. one SFT step moves the learner's weights, one sync gives them to the engine: the
   engine-vs-learner log-probability gap on fixed tokens (`gap_after_first_sync`, nats: max and
   mean absolute difference) is the two stacks' numerical difference;
2. `GeneratorGroup.generate_stream` samples `--prompts` groups (n=2, up to `--max-tokens` tokens,
   one group per engine batch); after the first group arrives the engine's process gets SIGKILL.
   The group replaces the engine in the colocated bundle and, since no engine holds the current
   weights, calls `catch_up` (the driver's: a sync at the learner's version) before the
   unfinished groups are sampled again. The script's catch_up measures the gap of the replacement
   before the sync (it holds the checkpoint's weights: `gap_replacement_before_sync`) and after it
   (`gap_after_sync`); `recovery` is the group's record (engine_restarts, resampled_groups,
   recovery_s: restart + catch-up sync), `restart_s` the replacement's start alone;
3. one more SFT step and the run's next regular sync: `gap_after_next_sync`.

    python benchmarks/engine_restart.py --out engine_restart.json [--model small|1.5B|7B]

`--model small` (default) is the embedded ~1M-parameter model in fp32 (the gap is exact to the
kernels); 1.5B and 7B are random-weight Qwen2 shapes in bf16 (ZeRO-3), for the restart's and the
sync's time at size. Without a GPU it runs the object-store transport on CPU actors (a Ray GPU
resource declared, no CUDA), which is how it was checked before it ran on a GPU.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

PROMPT, RESPONSE = [5, 17, 99, 3, 250, 11], [42, 7, 300, 8, 9, 1000, 12]


def start_pair(model_dir: str, on_gpu: bool, big: bool) -> tuple[Any, Any]:
    """The learner and the engine in one colocated bundle, as `RunContext.start` does for ipc."""
    from cudal1.actors.cluster import in_bundle
    from cudal1.actors.generator_group import GeneratorGroup, colocated_placement_group
    from cudal1.actors.learner_group import LearnerGroup
    from cudal1.training.config import LearnerConfig

    pg = colocated_placement_group(2.0, timeout_s=120)
    learner_kwargs = (
        dict(zero_stage=3, precision="bf16", lr=1e-3, micro_batch=1)
        if big
        else dict(zero_stage=2, precision="fp32", lr=1e-2, micro_batch=2)
    )
    learner = LearnerGroup.start(
        model_dir,
        LearnerConfig(num_cpus=1, num_gpus=0.5, **learner_kwargs),
        actor_options={"scheduling_strategy": in_bundle(pg)},
        device="cuda" if on_gpu else "cpu",
    )
    generator = GeneratorGroup.start(
        model_dir,
        "hf",
        num_cpus=1,
        num_gpus=0.5,
        colocated=pg,
        dtype="bfloat16" if big else "float32",
        max_model_len=2048,
        device="cuda:0" if on_gpu else "cpu",
        batch_size=2,  # n=2: one group per batch, so groups stream one by one
        timeout_s=900,
    )
    learner.ready(timeout_s=900)
    generator.ready(timeout_s=900)
    return learner, generator


def gap(generator: Any, learner: Any) -> dict[str, float]:
    """Engine vs learner log-probabilities of fixed tokens (nats): max and mean |difference|."""
    engine, mine = generator.engines[0].score(PROMPT, RESPONSE), learner.logprobs(PROMPT, RESPONSE)
    diffs = [abs(a - b) for a, b in zip(engine, mine)]
    return {"max": max(diffs), "mean": statistics.fmean(diffs)}


def one_transport(kind: str, model_dir: str, on_gpu: bool, big: bool, prompts: int, max_tokens: int) -> dict:
    from cudal1.actors.weight_transport import weight_transport
    from cudal1.records import PolicyExample

    t0 = time.perf_counter()
    learner, generator = start_pair(model_dir, on_gpu, big)
    result: dict[str, Any] = {"weight_sync": kind, "start_s": round(time.perf_counter() - t0, 1)}
    try:
        weights = weight_transport(kind, learner, generator, on_gpus=on_gpu)
        learner.sft_step([PolicyExample(PROMPT, RESPONSE)] * 2)
        t0 = time.perf_counter()
        weights.sync(int(learner.attribute("version")))
        result["first_sync_s"] = round(time.perf_counter() - t0, 3)
        result["gap_after_first_sync"] = gap(generator, learner)

        def catch_up() -> None:  # the driver's catch_up, measured around
            result["gap_replacement_before_sync"] = gap(generator, learner)
            t = time.perf_counter()
            weights.sync(int(learner.attribute("version")))
            result["catch_up_sync_s"] = round(time.perf_counter() - t, 3)
            result["gap_after_sync"] = gap(generator, learner)

        generator.catch_up = catch_up
        pid = generator.engines[0].pid(timeout_s=120)
        batch = [[5, 17, 99 + i] for i in range(prompts)]
        got: dict[int, list] = {}
        t0 = time.perf_counter()
        killed_at = None
        for i, gens in generator.generate_stream(batch, n=2, max_tokens=max_tokens):
            got[i] = gens
            if killed_at is None:
                os.kill(pid, signal.SIGKILL)
                killed_at = time.perf_counter() - t0
        result["stream_s"] = round(time.perf_counter() - t0, 2)
        result["killed_after_s"] = round(killed_at or 0.0, 2)
        result["groups"] = {"asked": prompts, "received": len(got), "complete": sorted(got) == list(range(prompts))}
        result["recovery"] = {k: round(v, 2) for k, v in generator.recovery.items()}
        result["new_pid"] = generator.engines[0].pid(timeout_s=120) != pid
        result["versions_of_resampled"] = sorted({g.model_version for gens in got.values() for g in gens})
        # The run's next regular sync, after the next update.
        learner.sft_step([PolicyExample(PROMPT, RESPONSE)] * 2)
        t0 = time.perf_counter()
        weights.sync(int(learner.attribute("version")))
        result["next_sync_s"] = round(time.perf_counter() - t0, 3)
        result["gap_after_next_sync"] = gap(generator, learner)
        result["engine_version"] = generator.model_versions()[0]
        result["learner_version"] = int(learner.attribute("version"))
    except Exception as e:  # noqa: BLE001 - recorded, and the run is marked failed
        result["error"] = f"{type(e).__name__}: {e}"[:1500]
    finally:
        generator.kill()
        learner.kill()
    return result


def main() -> int:
    import ray

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True)
    p.add_argument("--model", default="small", choices=["small", "1.5B", "7B"])
    p.add_argument("--weight-sync", nargs="*", default=None, help="transports to try (default: ipc object_store)")
    p.add_argument("--prompts", type=int, default=6)
    p.add_argument("--max-tokens", type=int, default=256)
    p.add_argument("--workdir", default="/tmp/cudal1-engine-restart")
    args = p.parse_args()
    workdir = Path(args.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    on_gpu = torch.cuda.is_available()
    kinds = args.weight_sync or (["ipc", "object_store"] if on_gpu else ["object_store"])
    big = args.model != "small"
    if big:
        from learner_memory import build  # the random-init Qwen2 checkpoint writer of the memory benchmarks
        from memory_plan import MODELS

        model_dir = str(build(next(m for m in MODELS if m.name == args.model), workdir / args.model))
    else:
        from cudal1.policy.small import init_small

        model_dir = str(init_small(workdir / "small", overwrite=True))
    ray.init(address="local", num_cpus=4, num_gpus=1, include_dashboard=False, log_to_driver=False)
    result: dict[str, Any] = {
        "gpu_name": torch.cuda.get_device_name(0) if on_gpu else None,
        "model": args.model,
        "torch": torch.__version__,
        "ray": ray.__version__,
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "runs": [],
    }
    ok = True
    try:
        for kind in kinds:
            run = one_transport(kind, model_dir, on_gpu, big, args.prompts, args.max_tokens)
            print(json.dumps(run), flush=True)
            result["runs"].append(run)
            tol = 1e-2 if big else 1e-4
            ok &= (
                "error" not in run
                and run["groups"]["complete"]
                and run["recovery"]["engine_restarts"] == 1
                and run["gap_after_sync"]["max"] < tol
                and run["gap_after_next_sync"]["max"] < tol
            )
    finally:
        ray.shutdown()
        Path(args.out).write_text(json.dumps(result, indent=1))
    print("engine restart ok" if ok else "engine restart FAILED", flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
