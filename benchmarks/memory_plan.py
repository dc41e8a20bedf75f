"""What fits: learner memory per GPU for 1.5B, 7B and 32B Qwen2.5-shaped policies on 1, 2 and 8 H200s.

    python benchmarks/memory_plan.py [--response 8192] [--prompt 2048] [--micro-batch 1] [--gpu-gib 140]

A computed plan, not a measurement. It prints, per model and GPU count, the peak GPU memory of one
learner rank (GiB) under three ZeRO-3 settings, and the host memory the offloads need per node,
then the cheapest setting that fits. The formula (bytes; P parameters, N ranks, L layers, h
hidden, I MLP width, V vocabulary, kv the key/value width, S = prompt + response tokens, R the
response tokens, b the micro-batch):

    model states (ZeRO paper, Rajbhandari et al. 2020, eq. for stage 3, K = 12 for Adam):
        bf16 params 2P/N + bf16 grads 2P/N + fp32 master, momentum, variance 12P/N
        offload_optimizer moves the 12P/N to the host, where DeepSpeed also keeps a float32
        gradient partition (4P/N); offload_param moves the params' 2P/N to the host too
    KL reference (its own ZeRO-3 eval engine, bf16):   2P/N   (host with offload_param)
    ZeRO-3 working set: the gathered parameters of about two decoder layers or the embedding
        (whichever is larger), bf16, twice (current + prefetched):  2 * 2 * max(layer, V*h)
    activations, bf16, flash attention (no S*S term), per layer and token c_h*h + c_I*I values
        (c_h = 8: norm output, q, k, v, attention output, projection, two residuals; c_I = 4:
        gate, up, activation, product):
        with activation checkpointing: L * b*S*h * 2 (each layer's input) + one layer's b*S*(8h + 4I) * 2
        without: L * b*S*(8h + 4I) * 2
    logits (only the R response positions, `logits_to_keep`), bf16, and their gradient:
        2 * b*R*V * 2, plus one float32 block of the chunked log-softmax b*chunk*V*4 * 2
    fixed: CUDA context, NCCL and allocator slack, 6 GiB
    host per node: ranks_per_node * (16P/N [+ 2P/N params + 2P/N reference with offload_param]);
        pinned staging buffers are not counted (pin_memory is off in cudal1's config)

Assumptions and limits: Qwen2.5 shapes (from their published configs); bf16 training with fp32
Adam state; micro-batch b of one sequence; the generator's memory is not counted (it runs on its
own GPUs); activation constants are estimates (kernels may keep a little more); fragmentation
beyond the fixed slack is not modelled. Measured figures go to docs/benchmarks.md when a run
backs them.
"""

from __future__ import annotations

import argparse
import dataclasses

GIB = 2**30


@dataclasses.dataclass(frozen=True)
class Shape:
    """A decoder-only transformer's shape (Qwen2.5 naming)."""

    name: str
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    intermediate: int
    vocab: int
    tied: bool

    @property
    def kv_dim(self) -> int:
        return self.hidden // self.heads * self.kv_heads

    @property
    def layer_params(self) -> int:
        h, kv, i = self.hidden, self.kv_dim, self.intermediate
        attention = h * h + 2 * h * kv + h * h + h + 2 * kv  # q, k, v (with biases), o
        return attention + 3 * h * i + 2 * h  # gate, up, down; two norms

    @property
    def params(self) -> int:
        embed = self.vocab * self.hidden
        return self.layers * self.layer_params + embed * (1 if self.tied else 2) + self.hidden


# Qwen2.5-{1.5B,7B,32B}(-Instruct) config.json values.
MODELS = (
    Shape("1.5B", 1536, 28, 12, 2, 8960, 151936, True),
    Shape("7B", 3584, 28, 28, 4, 18944, 152064, False),
    Shape("32B", 5120, 64, 40, 8, 27648, 152064, False),
)
SETTINGS = ("zero3+ckpt", "+offload_opt", "+offload_param")
HOST_GIB = {1: 128, 2: 256, 8: 560}  # the lent machines' host memory (1, 2, 8 H200s on one host)


def plan(
    m: Shape,
    n: int,
    setting: str,
    *,
    prompt: int,
    response: int,
    micro_batch: int = 1,
    chunk: int = 1024,
    kl: bool = True,
    checkpointing: bool = True,
) -> tuple[float, float]:
    """(GPU GiB per rank, host GiB per node) for model `m` on `n` ranks of one node under `setting`."""
    p, s, r, b = m.params, prompt + response, response, micro_batch
    params, grads, optim = 2 * p / n, 2 * p / n, 12 * p / n
    ref = 2 * p / n if kl else 0.0
    host = 0.0
    if setting in ("+offload_opt", "+offload_param"):
        host += (optim + 4 * p / n) * n
        optim = 0.0
    if setting == "+offload_param":
        host += (params + ref) * n
        params, ref = 0.0, 0.0
    working = 2 * 2 * max(m.layer_params, m.vocab * m.hidden)
    layer_act = b * s * (8 * m.hidden + 4 * m.intermediate) * 2
    acts = m.layers * b * s * m.hidden * 2 + layer_act if checkpointing else m.layers * layer_act
    logits = 2 * b * r * m.vocab * 2 + b * chunk * m.vocab * 4 * 2
    gpu = params + grads + optim + ref + working + acts + logits + 6 * GIB
    return gpu / GIB, host / GIB


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--response", type=int, default=8192)
    ap.add_argument("--prompt", type=int, default=2048)
    ap.add_argument("--micro-batch", type=int, default=1)
    ap.add_argument("--gpu-gib", type=float, default=140.0, help="usable memory of one GPU (H200: ~140 GiB)")
    ap.add_argument("--no-kl", action="store_true", help="kl_beta = 0: no reference model")
    args = ap.parse_args()
    print(
        f"tokens per sequence: {args.prompt} prompt + {args.response} response; micro-batch {args.micro_batch}; "
        f"GPU {args.gpu_gib:g} GiB; KL reference {'no' if args.no_kl else 'yes'}; activation checkpointing on"
    )
    head = f"{'model':>5} {'params':>7} {'GPUs':>4} | " + " | ".join(f"{s:>17}" for s in SETTINGS) + " | fits with"
    print(head)
    print("-" * len(head))
    for m in MODELS:
        for n in (1, 2, 8):
            cells, verdict = [], "does not fit"
            for setting in SETTINGS:
                gpu, host = plan(
                    m,
                    n,
                    setting,
                    prompt=args.prompt,
                    response=args.response,
                    micro_batch=args.micro_batch,
                    kl=not args.no_kl,
                )
                ok = gpu <= args.gpu_gib and host <= HOST_GIB[n]
                cells.append(f"{gpu:6.1f} / {host:5.0f}{' ok' if ok else '   '}")
                if ok and verdict == "does not fit":
                    verdict = setting
            print(
                f"{m.name:>5} {m.params / 1e9:6.2f}B {n:>4} | "
                + " | ".join(f"{c:>17}" for c in cells)
                + f" | {verdict}"
            )
    print(
        "cells: GPU GiB per rank / host GiB per node (host available: "
        + ", ".join(f"{n} GPU: {g} GiB" for n, g in HOST_GIB.items())
        + ")"
    )


if __name__ == "__main__":
    main()
