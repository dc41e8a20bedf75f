"""Weight sync by broadcast (the multi-GPU path, `cudal1.engines.weight_sync`), run here on gloo:
the real GRPOLearner (DeepSpeed, CPU) is rank 0 and sends; the vLLM engine's worker (rank 1) and
the transformers engine (rank 2) receive. Afterwards both engines' logprobs of fixed tokens equal
the learner's. On GPUs the same code runs on NCCL (docs/benchmarks.md)."""

from __future__ import annotations

import threading


from cudal1.engines.weight_sync import TensorSpec, free_port, plan_buckets
from cudal1.policy.model import load_policy
from cudal1.records import PolicyExample

TOL = 1e-4


def test_plan_buckets_groups_by_dtype_and_size():
    specs = [
        TensorSpec("a", (256,), "float32"),
        TensorSpec("b", (8,), "bfloat16"),
        TensorSpec("c", (256,), "float32"),
        TensorSpec("d", (1024,), "float32"),
        TensorSpec("e", (8,), "bfloat16"),
    ]
    plan = plan_buckets(specs, bucket_mb=2048 / 2**20)  # 2 KiB: two 1 KiB float32 tensors per bucket
    assert plan == [[0, 2], [3], [1, 4]]
    assert sorted(i for b in plan for i in b) == list(range(len(specs)))
    for bucket in plan:
        assert len({specs[i].dtype for i in bucket}) == 1


def test_broadcast_from_the_learner_reaches_both_engines(small_model_dir, vllm_generator, hf_generator):
    from cudal1.training import GRPOLearner

    learner = GRPOLearner(small_model_dir, zero_stage=2, lr=1e-2, micro_batch=2)
    prompt, response = [5, 17, 99, 3, 250], [42, 7, 300, 8, 9, 1000]
    before = vllm_generator.score(prompt, response)
    learner.sft_step([PolicyExample(prompt, response)] * 2)  # move the weights away from the checkpoint
    expected = learner.logprobs(prompt, response)
    assert max(abs(a - b) for a, b in zip(before, expected)) > 10 * TOL

    port, errors = free_port(), []

    def learner_side(fn):
        def run():
            try:
                fn()
            except BaseException as e:  # surfaced in the main thread
                errors.append(e)

        t = threading.Thread(target=run)
        t.start()
        return t

    t = learner_side(lambda: learner.init_weight_group("127.0.0.1", port, world_size=3, backend="gloo", timeout_s=120))
    joined = threading.Thread(target=hf_generator.init_weight_group, args=("127.0.0.1", port, 2, 3, "gloo", 120))
    joined.start()
    vllm_generator.init_weight_group("127.0.0.1", port, 1, 3, "gloo", 120)
    joined.join()
    t.join()
    assert not errors, errors

    specs, stats = learner.weight_manifest(), {}
    t = learner_side(lambda: stats.update(learner.broadcast_weights(bucket_mb=1)))
    receiver = threading.Thread(target=hf_generator.receive_weights, args=(specs, learner.version, 1))
    receiver.start()
    try:
        vllm_generator.receive_weights(specs, learner.version, bucket_mb=1)
        receiver.join()
        t.join()
        assert not errors, errors
        assert stats["bytes"] == sum(s.nbytes for s in specs) and stats["buckets"] >= 2
        for gen in (vllm_generator, hf_generator):
            assert gen.model_version == learner.version
            assert max(abs(a - b) for a, b in zip(gen.score(prompt, response), expected)) < TOL
    finally:
        model, _ = load_policy(small_model_dir, dtype="float32", device="cpu")
        for gen in (vllm_generator, hf_generator):  # the checkpoint's weights back for other tests
            gen.update_weights(model.named_parameters(), version=0)
    assert max(abs(a - b) for a, b in zip(vllm_generator.score(prompt, response), before)) < TOL
