"""Single-turn against multi-turn contrastive RL at the same evaluation budget, in one run.

One SFT stage (the config's: by default the embedded default's, `conf/config.yaml`), then two RL
stages that each start from its exported checkpoint, with the same config, seed, tasks and steps:

- "single": `stage.contrastive_rl.turns=1`, `group_size = G × T` responses per prompt;
- "multi": `turns=T`, `group_size = G` episodes per prompt (no early stop unless the overrides
  set `stop_margin`),

so both may evaluate `tasks_per_step × G × T` responses per step (one evaluation per distinct
program per step in both: `sample_rollouts`' dedup). Each stage is the training job's own code
(`cudal1.pipeline.driver.train`: Ray actors, vLLM, the benchmark pool, DeepSpeed); the figures
are read back from the run directories' rollout records (`cudal1.review`):

- responses and evaluations (distinct programs per step that reached the evaluator, as
  `sample_rollouts` submits them; second opinions on outliers not counted);
- per turn: pass rate (share of the turn's responses paid as correct, `metrics.PASSING`) and mean
  paid speedup (×) of those;
- per episode (a single-turn response is an episode of one turn): pass rate (some turn passed)
  and mean best paid speedup (×) of the passing episodes;
- the same over the last step alone (what the policy does after the stage's updates).

    python benchmarks/turns_at_equal_evaluations.py --work-dir /tmp/turns --steps 4 --out /tmp/turns/table.json
    python benchmarks/turns_at_equal_evaluations.py --work-dir W --reuse-sft -- tasks=builtin_small
    python benchmarks/turns_at_equal_evaluations.py --work-dir W --equal-evaluations   # multi capped at single's

`--equal-evaluations` runs the single arm first and gives the multi arm
`stage.contrastive_rl.max_evaluations` = the most programs the single arm evaluated in a step, so
the multi arm evaluates at most that many a step (turn 1 always runs whole; later turns stop at
the budget: `cudal1.pipeline.episodes.within_evaluations`).

The SFT stage runs with `stage.contrastive_rl.turns=T`, so it also trains the second-turn
refinement pairs (`stage.sft.refinement_prompts`, `cudal1.pipeline.sft_data.refinement_pairs`:
the plain prompt, a slower variant as the first answer, the evaluator's report on it, the fastest
variant as the answer); `--no-refinement-sft` trains the plain prompt only, as the job's default
does for single-turn runs (then the small embedded model never saw a turn-2 prompt, and its turn
2 fails to parse: docs/training.md). Both arms start from that one checkpoint.

Extra arguments after `--` are Hydra overrides for all three stages (e.g. `model=local
model.path=... bench=h100` on a GPU node). Limits: one seed, one run of each arm.
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a checkout without installing

log = logging.getLogger("turns_at_equal_evaluations")


def compose(overrides: list[str]) -> Any:
    """The job's validated config (conf/config.yaml) with `overrides`."""
    from hydra import compose as hydra_compose, initialize_config_dir

    from cudal1.config import load_config, register_schema

    register_schema()
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base=None):
        return load_config(hydra_compose(config_name="config", overrides=overrides))


def run_stage(overrides: list[str]) -> None:
    """One training job (`cudal1.pipeline.driver.train`) with `overrides`."""
    from cudal1.pipeline.driver import train

    train(compose(overrides))


def records(run_dir: Path) -> list[dict[str, Any]]:
    """Every RL rollout record of a run (rollouts/rl_step*.jsonl), in step order."""
    files = sorted((run_dir / "rollouts").glob("rl_step*.jsonl"), key=lambda p: int(p.stem.removeprefix("rl_step")))
    return [json.loads(line) for f in files for line in f.read_text().splitlines() if line.strip()]


def per_step_evaluations(rows: list[dict[str, Any]]) -> dict[int, int]:
    """Distinct programs that reached the evaluator, per step (as `summarize` counts them)."""
    from cudal1.rl.similarity import normalized_code

    programs = {
        (r["step"], r["task_id"], normalized_code(r["sections"]["code"]))
        for r in rows
        if r.get("result") is not None and r.get("sections", {}).get("code")
    }
    out: dict[int, int] = {}
    for step, _, _ in programs:
        out[step] = out.get(step, 0) + 1
    return out


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The arm's figures (see the module docstring) from its rollout records."""
    from cudal1.pipeline.metrics import PASSING

    def passing(r: dict[str, Any]) -> bool:
        return r.get("reward_reason") in PASSING and r.get("paid_speedup") is not None

    def mean(xs: list[float]) -> float | None:
        return round(statistics.fmean(xs), 3) if xs else None

    out: dict[str, Any] = {"responses": len(rows), "evaluations": sum(per_step_evaluations(rows).values())}
    turns: dict[int, list[dict[str, Any]]] = {}
    episodes: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        turns.setdefault(r.get("turn", 1), []).append(r)
        key = r.get("episode") or f"step{r['step']}/g{r['group']}/s{r['sample']}"
        episodes.setdefault(key, []).append(r)
    for t, rs in sorted(turns.items()):
        paid = [float(r["paid_speedup"]) for r in rs if passing(r)]
        out[f"turn{t}"] = {"responses": len(rs), "pass_rate": round(len(paid) / len(rs), 3), "speedup": mean(paid)}
    best = [
        max(float(r["paid_speedup"]) for r in ep if passing(r)) for ep in episodes.values() if any(map(passing, ep))
    ]
    out["episodes"] = len(episodes)
    out["episode_pass_rate"] = round(len(best) / len(episodes), 3) if episodes else None
    out["episode_best_speedup"] = mean(best)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--work-dir", type=Path, required=True, help="the three run directories go here")
    ap.add_argument("--turns", type=int, default=2)
    ap.add_argument("--group", type=int, default=8, help="episodes per prompt of the multi-turn arm (G)")
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--reuse-sft", action="store_true", help="use WORK_DIR/sft/exports/sft when it exists")
    ap.add_argument("--out", type=Path, default=None, help="write the JSON table here too")
    ap.add_argument(
        "--no-refinement-sft",
        action="store_true",
        help="SFT on the plain prompt only (stage.sft.refinement_prompts=false), not on second-turn prompts too",
    )
    ap.add_argument(
        "--equal-evaluations",
        action="store_true",
        help="cap the multi arm's evaluations per step (stage.contrastive_rl.max_evaluations) at the most the "
        "single arm made in any step, so that the multi arm evaluates no more programs than the single one",
    )
    ap.add_argument("overrides", nargs="*", help="Hydra overrides for every stage (after --)")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    if args.turns < 2:
        ap.error("--turns must be >= 2 (the multi-turn arm)")
    common = ["tracking=none", *args.overrides]
    sft_dir = args.work_dir / "sft"
    checkpoint = sft_dir / "exports" / "sft"
    if not (args.reuse_sft and (checkpoint / "config.json").exists()):
        refine = "false" if args.no_refinement_sft else "true"
        run_stage(
            [
                f"run_dir={sft_dir}",
                "stage=sft",
                f"stage.contrastive_rl.turns={args.turns}",
                f"stage.sft.refinement_prompts={refine}",
                *common,
            ]
        )
    arms = {"single": (1, args.group * args.turns), "multi": (args.turns, args.group)}
    table: dict[str, Any] = {
        "turns": args.turns,
        "group": args.group,
        "steps": args.steps,
        "refinement_sft": not args.no_refinement_sft,
        "overrides": args.overrides,
    }
    budget: list[str] = []
    for name, (turns, group) in arms.items():
        run_dir = args.work_dir / name
        run_stage(
            [
                f"run_dir={run_dir}",
                "stage=contrastive_rl",
                f"model.path={checkpoint}",
                f"stage.contrastive_rl.steps={args.steps}",
                f"stage.contrastive_rl.turns={turns}",
                f"stage.contrastive_rl.group_size={group}",
                *(budget if turns > 1 else []),
                *common,
            ]
        )
        rows = records(run_dir)
        if turns == 1 and args.equal_evaluations:
            most = max(per_step_evaluations(rows).values(), default=0)
            budget = [f"stage.contrastive_rl.max_evaluations={max(most, 1)}"]
            table["multi_max_evaluations"] = max(most, 1)
        last = max(r["step"] for r in rows)
        table[name] = {
            "turns": turns,
            "group_size": group,
            "all": summarize(rows),
            "last_step": summarize([r for r in rows if r["step"] == last]),
        }
        print(json.dumps({name: table[name]}), flush=True)
        if args.out:
            args.out.write_text(json.dumps(table, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
