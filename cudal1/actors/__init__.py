"""The Ray adapter: every `import ray` in cudal1 lives in this package (and in tests).

- `cluster`: start a local Ray cluster or join one (`ray job submit`, RAY_ADDRESS), shut down.
- `bench_pool`: benchmark actors around `cudal1.bench.evaluate`, one pool per architecture.
- `health`: what stops a run when its infrastructure is gone (`RewardSourceLost`; Ray-free).
- `shells`: one generic thin actor shell for plain classes (rollout generator, exemplar buffer,
  learner), built inside the actor so the driver never imports their engines.

Submodules are imported on use (`from cudal1.actors.bench_pool import BenchmarkPool`) so that
`import cudal1.actors` costs nothing where Ray is not installed.
"""
