"""Which KernelBench references would an output-scaled absolute tolerance refuse against their own
more exact answer?

`compare_values` allows |cand - ref| <= rtol * |ref| + atol * scale. With scale = max(1, mean |ref|)
(the rule up to 2026-12-04) an output far below 1 in magnitude (a softmax over 4096 columns:
2.4e-4 on average) has an absolute allowance far above its values, so a candidate several percent
off everywhere passes. With scale = mean |ref| the allowance follows the output's own magnitude.
With scale = max(floor, mean |ref|), the floor
from the reference's own rounding noise (`noise_scale_floor`), an output whose magnitude is
cancellation noise keeps an allowance at that noise. The question this answers: does any task's
float32 reference differ from the same model computed in float64 (a more exact answer, which an
honest candidate may give) by more than the rule allows? Each task: its model and one input set
(the judge's seeding: `make_init_inputs`, `make_input_sets`), TF32 off; the floor the judge would
set (the output on `rounding_perturbed` inputs against the output); the float32 output against the
float64 output cast back, with floor 1.0 (old) and the measured floor (new), as the largest share
of the allowance (1 = at the limit).

    python3 scripts/gpu_tolerance_audit.py KERNELBENCH_PATH [--levels 1 2 3] [--budget-s 400]

One line per task, then "AUDIT: n tasks, k refused by the new rule (m by the old)" and the refused
ones. BACKEND=cpu runs on the CPU (small tasks only: KernelBench's sizes are the GPU's).
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time

import torch

from cudal1.bench import inputs as inputs_mod
from cudal1.bench.correctness import EXACT_DTYPES, flatten, noise_scale_floor, share_of_tolerance
from cudal1.tasks.kernelbench import load_suite
from cudal1.tasks.task import load_source_module


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("kernelbench")
    ap.add_argument("--levels", type=int, nargs="*", default=[1, 2, 3])
    ap.add_argument("--budget-s", type=float, default=400.0)
    args = ap.parse_args()
    device = "cuda" if os.environ.get("BACKEND", "cuda") == "cuda" else "cpu"
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    report = load_suite(args.kernelbench, levels=args.levels, profile=None)
    t0 = time.monotonic()
    done, refused_new, refused_old, skipped = 0, [], [], []
    for task in report.tasks:
        if time.monotonic() - t0 > args.budget_s:
            skipped.append(task.task_id)
            continue
        try:
            module = load_source_module(task.source, f"audit_{task.level}_{task.problem_id}")
            torch.manual_seed(0)
            model = module.Model(*inputs_mod.make_init_inputs(module)).to(device).eval()
            x = inputs_mod.make_input_sets(module, 1, device, 1)[0]
            with torch.no_grad():
                out32 = model(*x)
                xp = inputs_mod.rounding_perturbed(x)
                moved = model(*xp) if xp is not None else None
                model64 = model.double()
                x64 = [t.double() if isinstance(t, torch.Tensor) and t.is_floating_point() else t for t in x]
                out64 = model64(*x64)
            worst_old = worst_new = 0.0
            mean = float("nan")
            floor = 1.0
            moved_leaves = flatten(moved) if moved is not None else [(None, None)] * len(flatten(out32))
            for (_, r), (_, c), (_, m) in zip(flatten(out32), flatten(out64), moved_leaves):
                if not isinstance(r, torch.Tensor) or r.dtype in EXACT_DTYPES or not r.is_floating_point():
                    continue
                c = c.to(r.dtype)
                mean = float(r.double().abs().mean())
                floor = noise_scale_floor(m, r) if isinstance(m, torch.Tensor) else 1.0
                worst_old = max(worst_old, share_of_tolerance(c, r))
                worst_new = max(worst_new, share_of_tolerance(c, r, scale_floor=floor))
            done += 1
            flag = "REFUSED" if worst_new > 1 else "ok"
            print(
                f"{flag:7s} {task.task_id:12s} mean|ref| {mean:9.3g} floor {floor:9.3g}  "
                f"share old {worst_old:8.3g} new {worst_new:8.3g}"
            )
            if worst_new > 1:
                refused_new.append(task.task_id)
            if worst_old > 1:
                refused_old.append(task.task_id)
        except Exception as e:  # noqa: BLE001 - a task that cannot run in float64 is reported, not fatal
            print(f"error   {task.task_id:48s} {type(e).__name__}: {str(e)[:100]}")
        finally:
            model = model64 = out32 = out64 = x = x64 = moved = xp = None
            if device == "cuda":
                torch.cuda.empty_cache()
        sys.stdout.flush()
    print(
        f"AUDIT: {done} tasks, {len(refused_new)} refused by the new rule ({len(refused_old)} by the old); "
        f"{len(skipped)} not reached in {args.budget_s:.0f} s"
    )
    for t in refused_new:
        print(f"  refused (new): {t}")
    # The counterexample the rule closes: a softmax with no reduction (exp(x) over the normalizer a
    # randn row of 4096 has on average), off by up to several percent on every value.
    torch.manual_seed(0)
    xs = torch.randn(16, 4096, device=device)
    ref = torch.softmax(xs, dim=1)
    cand = torch.exp(xs) / (xs.shape[1] * math.exp(0.5))
    floor = noise_scale_floor(torch.softmax(inputs_mod.rounding_perturbed([xs])[0], dim=1), ref)
    print(
        f"softmax without its reduction: floor {floor:.3g}, share old {share_of_tolerance(cand, ref):.3g} "
        f"new {share_of_tolerance(cand, ref, scale_floor=floor):.3g} (refused when > 1)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
