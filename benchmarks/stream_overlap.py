"""Wall time of one `sample_rollouts` round with generation and evaluation overlapped (the
training job's path) against the old order (generate everything, then evaluate everything).

Real parts: a generator group of one transformers engine on the embedded small policy (one
batch of `batch_size` sequences per prompt, so groups finish one after another), a CPU benchmark
pool of one actor, the builtin tasks of the smoke config. The one substitution: the small model
writes no code, so each sampled response keeps its tokens and timing but its text is replaced by
the task's seed solution in the three-section format, so that every response is a candidate the
pool times. Both orders alternate, `--reps` times each.

    PYTHONPATH=. .venv/bin/python benchmarks/stream_overlap.py --reps 2 --max-tokens 384
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import time
from types import SimpleNamespace


def response(code: str) -> str:
    return (
        f"## Performance analysis\nOne pass over the input.\n\n## Algorithm design\nKeep it in one kernel.\n\n"
        f"## Code\n```python\n{code.rstrip()}\n```\n"
    )


class SeedTexts:
    """The group's samples with their text replaced by the prompt's task seed solution."""

    def __init__(self, group, texts):
        self.group, self.texts = group, texts

    def _swap(self, i, gens):
        return [dataclasses.replace(g, text=self.texts[i], finish_reason="stop") for g in gens]

    def generate_stream(self, prompts, **kw):
        for i, gens in self.group.generate_stream(prompts, **kw):
            yield i, self._swap(i, gens)

    def generate(self, prompts, **kw):
        return [self._swap(i, gens) for i, gens in enumerate(self.group.generate(prompts, **kw))]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--max-tokens", type=int, default=384)
    ap.add_argument("--prompts", type=int, default=4)
    args = ap.parse_args()

    from cudal1.actors.bench_pool import BenchmarkPool, PoolSpec
    from cudal1.actors.cluster import init_ray, shutdown_ray
    from cudal1.actors.generator_group import GeneratorGroup
    from cudal1.rl.rewards import RewardConfig
    from cudal1.pipeline.rollouts import sample_rollouts
    from cudal1.policy.model import load_policy
    from cudal1.policy.prompts import plain_prompt
    from cudal1.policy.small import init_small
    from cudal1.tasks import load_tasks, seed_solutions

    model = init_small("/tmp/cudal1-stream-overlap-model", seed=0, overwrite=True)
    tokenizer = load_policy(model, dtype="float32", device="cpu")[1]
    by_id = {t.task_id: t for t in load_tasks("builtin", levels=[1])}
    tasks = [by_id[("level1/5", "level1/13")[i % 2]] for i in range(args.prompts)]
    seeds = seed_solutions("cpu")
    texts = [response(seeds[t.task_id].read_text()) for t in tasks]
    init_ray(address="local", num_cpus=3, object_store_mb=256, include_dashboard=False, log_to_driver=False)
    try:
        group = GeneratorGroup.start(
            str(model), "hf", num_engines=1, num_cpus=1, max_model_len=4096, dtype="float32", seed=0, batch_size=2
        )
        group.ready(timeout_s=600)
        pool = BenchmarkPool(
            PoolSpec(
                name="cpu",
                num_actors=1,
                num_cpus=1,
                start_timeout_s=300,
                settings={
                    "rounds": 1,
                    "calls_per_round": 1,
                    "warmup_calls": 0,
                    "correctness_trials": 2,
                    "shifted_trials": 0,
                },
            )
        )
        generator = SeedTexts(group, texts)
        rollout = SimpleNamespace(max_model_len=4096, max_tokens=args.max_tokens, temperature=1.0, top_p=1.0)
        cfg = SimpleNamespace(rollout=rollout, reward=RewardConfig())
        walls: dict[str, list[float]] = {"overlapped": [], "old order": []}
        prompts = [plain_prompt(t.source) for t in tasks]
        for rep in range(args.reps):
            for name in ["overlapped", "old order"] if rep % 2 == 0 else ["old order", "overlapped"]:
                if name == "overlapped":
                    ctx_gen, ctx_pool = generator, pool
                else:  # no generate_stream: everything generated, then everything evaluated
                    ctx_gen, ctx_pool = SimpleNamespace(generate=generator.generate), pool
                ctx = SimpleNamespace(
                    cfg=cfg,
                    tokenizer=tokenizer,
                    generator=ctx_gen,
                    pools=SimpleNamespace(primary=ctx_pool),
                    buffer=None,
                )
                timings: dict[str, float] = {}
                load = os.getloadavg()[0]
                t0 = time.perf_counter()
                rollouts = sample_rollouts(ctx, tasks, prompts, 2, step=rep, timings=timings)
                wall = time.perf_counter() - t0
                walls[name].append(wall)
                statuses = [r.result.status.value if r.result else None for r in rollouts]
                print(
                    f"rep {rep} {name:10s}: wall {wall:6.1f} s  generate {timings['generate_s']:5.1f}  evaluate "
                    f"{timings['evaluate_s']:5.1f}  overlap {timings['overlap_s']:5.1f}  evaluations "
                    f"{int(timings['evaluations'])} ({statuses.count('ok')} ok)  load {load:.1f}",
                    flush=True,
                )
        for name, values in walls.items():
            print(f"{name}: median wall {statistics.median(values):.1f} s over {len(values)}")
        pool.shutdown()
        group.kill()
    finally:
        shutdown_ray()


if __name__ == "__main__":
    main()
