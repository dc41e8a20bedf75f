"""cudal1: train an LLM to write faster GPU kernels by RL, rewarded by a trustworthy benchmark.

Parts: `cudal1.tasks` (KernelBench-format reference programs and the builtin suite),
`cudal1.bench` (isolated evaluation of untrusted candidates: correctness, timing, hack guards),
`cudal1.cli` (the `cudal1` command).
"""

__version__ = "0.1.0"
