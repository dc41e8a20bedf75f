"""Multi-GPU figures of issue 4: learner → generator weight sync through a NCCL group, and the
learner with ZeRO-3 across GPUs. Runs on CPUs too (gloo), which is how it is checked before a GPU.

    # 1. sync: the learner (GRPOLearner, DeepSpeed) on device 0 and a transformers rollout engine on
    #    device 1 in two processes; after one SFT step and a broadcast, the engine's logprobs must equal
    #    the learner's. Then broadcast timing for random-weight models of growing size (bf16).
    python benchmarks/multigpu.py sync --out sync.json [--sizes small 1.5b 7b 14b]
    # 2. zero3: the same GRPO steps with ZeRO-3 on 2 GPUs and on 1; the losses must agree.
    torchrun --nproc_per_node 2 benchmarks/multigpu.py zero3 --out z3_2.json
    torchrun --nproc_per_node 1 benchmarks/multigpu.py zero3 --out z3_1.json
    python benchmarks/multigpu.py compare z3_1.json z3_2.json

Results go into docs/benchmarks.md with the command (scripts/gpu_multi.sh runs all of it).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

# Qwen2-architecture shapes (hidden, layers, intermediate, heads, kv heads, vocab) of public sizes;
# the weights are random (only the shapes matter for a sync).
SHAPES = {
    "0.5b": (896, 24, 4864, 14, 2, 151936),
    "1.5b": (1536, 28, 8960, 12, 2, 151936),
    "7b": (3584, 28, 18944, 28, 4, 152064),
    "14b": (5120, 48, 13824, 40, 8, 152064),
    "32b": (5120, 64, 27648, 40, 8, 152064),
}


def devices() -> tuple[str, str, str]:
    if torch.cuda.is_available() and torch.cuda.device_count() >= 2:
        return "cuda:0", "cuda:1", "nccl"
    return "cpu", "cpu", "gloo"


def qwen2(size: str, dtype: torch.dtype, device: str):
    from transformers import Qwen2Config, Qwen2ForCausalLM

    h, layers, inter, heads, kv, vocab = SHAPES[size]
    cfg = Qwen2Config(
        hidden_size=h,
        num_hidden_layers=layers,
        intermediate_size=inter,
        num_attention_heads=heads,
        num_key_value_heads=kv,
        vocab_size=vocab,
        tie_word_embeddings=False,
        max_position_embeddings=4096,
    )
    old = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        with torch.device(device):
            return Qwen2ForCausalLM(cfg).eval().requires_grad_(False)
    finally:
        torch.set_default_dtype(old)


# ----- sync: two processes, rank 0 = learner side, rank 1 = engine side


def _sync_rank(rank: int, port: int, model_dir: str, sizes: list[str], out_q) -> None:
    from cudal1.engines.weight_sync import manifest
    from cudal1.records import PolicyExample

    dev0, dev1, backend = devices()
    report: dict = {"rank": rank}
    try:
        prompt, response = [5, 17, 99, 3, 250, 11], [42, 7, 300, 8, 9, 1000, 12]
        if rank == 0:
            from cudal1.training import GRPOLearner

            learner = GRPOLearner(
                model_dir,
                zero_stage=2,
                precision="fp32",
                lr=1e-2,
                micro_batch=2,
                device="cuda" if backend == "nccl" else "cpu",
            )
            learner.sft_step([PolicyExample(prompt, response)] * 2)
            learner.init_weight_group("127.0.0.1", port, world_size=2, backend=backend)
            specs = learner.weight_manifest()
            out_q.put(("specs", specs))
            times = [learner.broadcast_weights() for _ in range(3)]
            report["small"] = {"expected": learner.logprobs(prompt, response), "send": times}
            channel = learner.channel
        else:
            from cudal1.rollout import RolloutGenerator

            gen = RolloutGenerator(model_dir, backend="hf", dtype="float32", device=dev1)
            before = gen.score(prompt, response)
            gen.init_weight_group("127.0.0.1", port, 1, 2, backend)
            specs = out_q.get_specs()
            for _ in range(3):
                gen.receive_weights(specs, version=1)
            report["small"] = {
                "before": before,
                "after": gen.score(prompt, response),
                "receive_s": gen.last_sync_seconds,
            }
            channel = gen.engine.channel
        # Larger random models: the same channel, weights only (what a sync costs at that size).
        for size in sizes:
            dtype = torch.bfloat16
            try:
                model = qwen2(size, dtype, dev0 if rank == 0 else dev1)
            except torch.OutOfMemoryError as e:
                report[size] = {"error": f"out of memory: {e}"[:300]}
                break
            named = list(model.named_parameters())
            specs = manifest(named)
            if rank == 0:
                runs = [channel.send(named, specs) for _ in range(3)]
                report[size] = {
                    "params": sum(p.numel() for _, p in named),
                    "bytes": runs[0]["bytes"],
                    "seconds": [r["seconds"] for r in runs],
                    "median_s": statistics.median(r["seconds"] for r in runs),
                    "gb_per_s": runs[0]["bytes"] / statistics.median(r["seconds"] for r in runs) / 1e9,
                }
            else:
                own = dict(named)
                t = []
                for _ in range(3):
                    t0 = time.perf_counter()
                    for name, tensor in channel.receive(specs):
                        own[name].copy_(tensor)
                    if dev1.startswith("cuda"):
                        torch.cuda.synchronize(dev1)
                    t.append(time.perf_counter() - t0)
                report[size] = {"receive_and_load_s": t}
            del model, named
            if torch.cuda.is_available():
                torch.cuda.empty_cache()
    except BaseException as e:  # reported, so the other side's failure is visible too
        report["error"] = f"{type(e).__name__}: {e}"[:2000]
    out_q.put(("report", report))


class _Queues:
    """Rank 0 → rank 1 manifest hand-off and both ranks' reports, over two mp queues."""

    def __init__(self, ctx) -> None:
        self.specs, self.reports = ctx.Queue(), ctx.Queue()

    def put(self, item) -> None:
        (self.specs if item[0] == "specs" else self.reports).put(item)

    def get_specs(self):
        return self.specs.get(timeout=600)[1]


def cmd_sync(args) -> int:
    import torch.multiprocessing as mp

    from cudal1.engines.weight_sync import free_port
    from cudal1.policy.small import init_small

    model_dir = str(init_small(Path(args.workdir) / "small", overwrite=True))
    ctx = mp.get_context("spawn")
    q = _Queues(ctx)
    port = free_port()
    procs = [ctx.Process(target=_sync_rank, args=(r, port, model_dir, args.sizes, q)) for r in (0, 1)]
    for p in procs:
        p.start()
    reports = {}
    for _ in procs:
        _, rep = q.reports.get(timeout=args.timeout)
        reports[rep["rank"]] = rep
    for p in procs:
        p.join(timeout=60)
    r0, r1 = reports.get(0, {}), reports.get(1, {})
    result = {"devices": devices(), "torch": torch.__version__, "ranks": reports}
    if "small" in r0 and "small" in r1:
        exp, after, before = r0["small"]["expected"], r1["small"]["after"], r1["small"]["before"]
        result["small_max_abs_diff_after_sync"] = max(abs(a - b) for a, b in zip(exp, after))
        result["small_max_abs_diff_before_sync"] = max(abs(a - b) for a, b in zip(exp, before))
        result["small_send_s"] = [t["seconds"] for t in r0["small"]["send"]]
        result["small_bytes"] = r0["small"]["send"][0]["bytes"]
    print(json.dumps({k: v for k, v in result.items() if k != "ranks"}, indent=1))
    for size in args.sizes:
        if size in r0:
            print(size, json.dumps(r0[size]), json.dumps(r1.get(size)))
    for rep in (r0, r1):
        if "error" in rep:
            print("rank", rep["rank"], "error:", rep["error"])
    Path(args.out).write_text(json.dumps(result, indent=1))
    ok = (
        result.get("small_max_abs_diff_after_sync", 1.0) < 1e-4
        and result.get("small_max_abs_diff_before_sync", 0) > 1e-3
    )
    print("logprobs equal after sync:", ok)
    return 0 if ok else 1


# ----- zero3: the same GRPO steps on N ranks (torchrun) → losses per step


def cmd_zero3(args) -> int:
    from cudal1.policy.small import init_small
    from cudal1.records import PolicyExample
    from cudal1.training import GRPOLearner

    rank, world = int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))
    model_dir = Path(args.workdir) / "z3_model"
    if rank == 0 and not (model_dir / "config.json").exists():
        init_small(
            model_dir, hidden_size=256, num_layers=4, num_heads=8, num_kv_heads=4, intermediate_size=768, overwrite=True
        )
    on_gpu = torch.cuda.is_available()
    if on_gpu:
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", 0)))
    # Wait for rank 0's model without a process group yet: poll the file.
    deadline = time.time() + 300
    while not (model_dir / "model.safetensors").exists() and time.time() < deadline:
        time.sleep(0.5)
    g = torch.Generator().manual_seed(0)
    total = 8  # sequences per step, split evenly over the ranks
    examples = [
        PolicyExample(
            torch.randint(10, 4000, (24,), generator=g).tolist(),
            torch.randint(10, 4000, (32,), generator=g).tolist(),
            advantage=float(torch.randn((), generator=g)),
        )
        for _ in range(total * args.steps)
    ]
    per_rank = total // world
    learner = GRPOLearner(
        model_dir,
        zero_stage=3,
        precision="bf16" if on_gpu else "fp32",
        lr=1e-4,
        micro_batch=per_rank,
        grad_accum=1,
        loss_agg="grpo",
        device="cuda" if on_gpu else "cpu",
        seed=0,
    )
    # The GRPO loss at the start of a step is -mean(advantage) whatever the weights (the ratio is
    # 1), so it cannot tell two runs apart: compare the NLL of a fixed probe batch after each step
    # (it depends on every update so far) and the gradient norms.
    probe = examples[:4]
    losses, norms = [], []
    for step in range(args.steps):
        batch = examples[step * total : (step + 1) * total][rank * per_rank : (rank + 1) * per_rank]
        m = learner.grpo_step(batch)
        norms.append(m["grad_norm"])
        nll = -statistics.fmean(x for row in learner.score(probe) for x in row)  # same on every rank
        losses.append(nll)
    if rank == 0:
        out = {
            "world_size": world,
            "losses": losses,
            "grad_norms": norms,
            "precision": "bf16" if on_gpu else "fp32",
            "zero_stage": 3,
            "device": torch.cuda.get_device_name(0) if on_gpu else "cpu",
        }
        Path(args.out).write_text(json.dumps(out))
        print(json.dumps(out))
    return 0


def cmd_compare(args) -> int:
    a, b = (json.loads(Path(p).read_text()) for p in (args.one, args.many))
    diffs = [abs(x - y) / max(abs(x), 1e-6) for x, y in zip(a["losses"], b["losses"])]
    norm_diffs = [abs(x - y) / max(abs(x), 1e-6) for x, y in zip(a["grad_norms"], b["grad_norms"])]
    tol = 2e-2 if a.get("precision") == "bf16" else 1e-4
    print(
        json.dumps(
            {
                "probe_nll_one": a["losses"],
                "probe_nll_many": b["losses"],
                "relative_diffs": diffs,
                "grad_norm_one": a["grad_norms"],
                "grad_norm_many": b["grad_norms"],
                "grad_norm_relative_diffs": norm_diffs,
                "tolerance": tol,
            }
        )
    )
    return 0 if max(diffs) <= tol else 1


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("sync")
    s.add_argument("--sizes", nargs="*", default=["1.5b", "7b", "14b"])
    s.add_argument("--out", default="sync.json")
    s.add_argument("--workdir", default="/tmp/cudal1-multigpu")
    s.add_argument("--timeout", type=float, default=900)
    z = sub.add_parser("zero3")
    z.add_argument("--steps", type=int, default=3)
    z.add_argument("--out", default="zero3.json")
    z.add_argument("--workdir", default="/tmp/cudal1-multigpu")
    c = sub.add_parser("compare")
    c.add_argument("one")
    c.add_argument("many")
    args = ap.parse_args(argv)
    return {"sync": cmd_sync, "zero3": cmd_zero3, "compare": cmd_compare}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
