"""The transformers fallback engine: same interface as `vllm_engine.VLLMEngine`, no vLLM needed.

Used where vLLM is not installed (the lent GPU machine's image, minimal CPU installs). It is
slower (no paged KV cache, no continuous batching) but its logprobs are exact: the weights it
samples with are the tensors it was given.

Sampling: only `temperature` and `top_p` shape the distribution sampled from, as in vLLM with
explicit sampling parameters. The checkpoint's `generation_config.json` may set other logits
processors (a repetition penalty, top-k, min-p, a minimum length, banned words, ...) that
`transformers` would otherwise apply from it; the reported log-probabilities are the raw
model's, so the engine samples with a generation config of its own that holds only the
checkpoint's stop and pad ids (the checkpoint's stays readable as `checkpoint_generation_config`).

Streaming: it samples `batch_size` sequences at a time, in prompt order, and `generate_stream`
hands out each prompt's group once the batch holding its last sample is done. With everything in
one batch (the default for small calls) every group arrives at the end; it never reorders.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from typing import Any

import torch

from cudal1.engines import EngineSample, MaxTokens, collect_groups, per_prompt_limits
from cudal1.policy.model import load_policy

log = logging.getLogger(__name__)


class HFEngine:
    """A transformers causal LM that samples, scores and takes new weights in place.

    Args:
        model_path: local Hugging Face checkpoint directory.
        max_model_len: longest prompt + response, in tokens (responses are cut to fit).
        dtype: parameter dtype name ("float32", "bfloat16", ...); "auto" means float32.
        seed: base seed; call k of `generate` samples with seed + k.
        device: "cpu" or "cuda:N" (default: cuda:0 when available).
        batch_size: most sequences (prompts × n) run in one `generate` call.

    Raises:
        cudal1.policy.model.CheckpointError: missing or unloadable checkpoint.
    """

    name = "hf"

    def __init__(
        self,
        model_path: str,
        *,
        max_model_len: int = 8192,
        dtype: str = "float32",
        seed: int = 0,
        device: str | None = None,
        batch_size: int = 64,
        **unused: Any,
    ) -> None:
        from transformers import GenerationConfig

        if unused:
            log.info("hf engine ignores vLLM options %s", sorted(unused))
        device = device or ("cuda:0" if torch.cuda.is_available() else "cpu")
        dtype = "float32" if dtype == "auto" else dtype
        self.model, self.tokenizer = load_policy(model_path, dtype=dtype, device=device)
        self.device = torch.device(device)
        self.max_model_len = max_model_len
        self.seed = seed
        self.batch_size = batch_size
        self._calls = 0
        gen = self.checkpoint_generation_config = self.model.generation_config
        eos = gen.eos_token_id if gen.eos_token_id is not None else self.tokenizer.eos_token_id
        self.eos_ids = set(eos if isinstance(eos, list) else [eos]) - {None}
        pad = gen.pad_token_id if gen.pad_token_id is not None else self.tokenizer.pad_token_id
        self.pad_id = pad if pad is not None else next(iter(self.eos_ids), 0)
        # `generate` fills every option it is not given from the model's generation config, so the
        # checkpoint's processors go: only the stop and pad ids are kept (see the module docstring).
        self.model.generation_config = GenerationConfig(
            eos_token_id=sorted(self.eos_ids), pad_token_id=self.pad_id, bos_token_id=gen.bos_token_id
        )

    def _left_pad(self, seqs: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
        width = max(len(s) for s in seqs)
        ids = torch.full((len(seqs), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(seqs), width), dtype=torch.long)
        for i, s in enumerate(seqs):
            ids[i, width - len(s) :] = torch.tensor(s, dtype=torch.long)
            mask[i, width - len(s) :] = 1
        return ids.to(self.device), mask.to(self.device)

    def generate(
        self, prompts: list[list[int]], n: int, max_tokens: MaxTokens, temperature: float, top_p: float
    ) -> list[list[EngineSample]]:
        """`n` samples per prompt; one list of `EngineSample` per prompt, in order (`generate_stream`
        collected). Logprobs come from the raw logits (before temperature / top-p), like vLLM's default."""
        return collect_groups(self.generate_stream(prompts, n, max_tokens, temperature, top_p), len(prompts))

    def generate_stream(
        self, prompts: list[list[int]], n: int, max_tokens: MaxTokens, temperature: float, top_p: float
    ) -> Iterator[tuple[int, list[EngineSample]]]:
        """Yield (prompt index, its `n` samples) once the batch holding the group's last sample is
        done (see the module docstring). Call k samples from seed + k; the random state is carried
        from batch to batch and kept apart from the caller's between yields, so the samples do not
        depend on how the stream is consumed. `max_tokens`: one limit, or one per prompt (a batch
        samples to its longest limit, and each sample is cut to its own: the same distribution as
        sampling with that limit)."""
        limits = per_prompt_limits(max_tokens, len(prompts))
        seqs = [i for i in range(len(prompts)) for _ in range(n)]
        seed, state = self.seed + self._calls, None
        self._calls += 1
        done: dict[int, list[EngineSample]] = {}
        for start in range(0, len(seqs), self.batch_size):
            owners = seqs[start : start + self.batch_size]
            samples, state = self._batch_with_rng(
                seed, state, [list(prompts[i]) for i in owners], [limits[i] for i in owners], temperature, top_p
            )
            for i, sample in zip(owners, samples):
                done.setdefault(i, []).append(sample)
            for i in sorted(i for i, group in done.items() if len(group) == n):
                yield i, done.pop(i)

    def _batch_with_rng(
        self, seed: int, state: Any, seqs: list[list[int]], limits: list[int], temperature: float, top_p: float
    ) -> tuple[list[EngineSample], Any]:
        """`_generate_batch` under this call's random state (`seed` on the first batch, then `state`),
        leaving the caller's state as it was; returns the samples and the state to continue from."""
        devices = [self.device] if self.device.type == "cuda" else []
        with torch.random.fork_rng(devices=devices):
            if state is None:
                torch.manual_seed(seed)
            else:
                torch.set_rng_state(state[0])
                for d, s in zip(devices, state[1]):
                    torch.cuda.set_rng_state(s, d)
            with torch.no_grad():
                samples = self._generate_batch(seqs, limits, temperature, top_p)
            state = (torch.get_rng_state(), [torch.cuda.get_rng_state(d) for d in devices])
        return samples, state

    def _generate_batch(
        self, seqs: list[list[int]], limits: list[int], temperature: float, top_p: float
    ) -> list[EngineSample]:
        ids, mask = self._left_pad(seqs)
        budget = max(0, min(max(limits), self.max_model_len - ids.shape[1]))
        if budget == 0:
            return [EngineSample([], [], "", "length") for _ in seqs]
        greedy = temperature <= 0
        out = self.model.generate(
            input_ids=ids,
            attention_mask=mask,
            max_new_tokens=budget,
            do_sample=not greedy,
            temperature=None if greedy else temperature,
            top_p=None if greedy else top_p,
            top_k=0,  # no top-k (transformers' own default is 50): only temperature / top-p, as in vLLM
            eos_token_id=sorted(self.eos_ids),
            pad_token_id=self.pad_id,
            output_logits=True,
            return_dict_in_generate=True,
        )
        new = out.sequences[:, ids.shape[1] :]
        logp = torch.stack(out.logits, dim=1).float().log_softmax(-1)  # [B, T, V], raw logits
        tok_lp = logp.gather(-1, new.unsqueeze(-1)).squeeze(-1)
        result = []
        for row, lps, limit in zip(new.tolist(), tok_lp.tolist(), limits):
            row, lps = row[:limit], lps[:limit]  # a sample of a prompt with a lower limit than the batch's
            end = next((i + 1 for i, t in enumerate(row) if t in self.eos_ids), None)
            reason = "stop" if end is not None else "length"
            row, lps = row[:end], lps[:end]
            text = self.tokenizer.decode(row, skip_special_tokens=True)
            result.append(EngineSample(row, [float(x) for x in lps], text, reason))
        return result

    @torch.no_grad()
    def score(self, pairs: list[tuple[list[int], list[int]]]) -> list[list[float]]:
        """Natural-log probability of each response token given prompt + preceding response."""
        result = []
        for prompt, response in pairs:
            ids = torch.tensor([list(prompt) + list(response)], dtype=torch.long, device=self.device)
            logits = self.model(input_ids=ids).logits[0, len(prompt) - 1 : -1].float()
            lp = logits.log_softmax(-1).gather(-1, ids[0, len(prompt) :].unsqueeze(-1)).squeeze(-1)
            result.append([float(x) for x in lp.tolist()])
        return result

    @torch.no_grad()
    def load_weights(self, named_tensors: Iterable[tuple[str, torch.Tensor]]) -> None:
        """Copy HF-named tensors into the model's parameters and buffers in place.

        Raises:
            KeyError: a name the model does not have.
            RuntimeError: a shape mismatch.
        """
        own = dict(self.model.named_parameters())
        own.update(dict(self.model.named_buffers()))
        unknown = []
        for name, tensor in named_tensors:
            target = own.get(name)
            if target is None:
                unknown.append(name)
                continue
            target.copy_(tensor.detach().to(device=target.device, dtype=target.dtype))
        if unknown:
            raise KeyError(
                f"weight sync: the model has no tensors named {unknown[:5]}{'...' if len(unknown) > 5 else ''}"
            )

    def init_weight_group(
        self, host: str, port: int, rank: int, world_size: int, backend: str = "nccl", timeout_s: float = 600.0
    ) -> None:
        """Join the learner's weight-broadcast group as `rank` (`cudal1.engines.weight_sync`),
        dropping an earlier group first. Blocks until every member has joined."""
        from cudal1.engines.weight_sync import WeightChannel

        if getattr(self, "channel", None) is not None:
            self.channel.close()

        device = str(self.device) if backend == "nccl" else "cpu"
        self.channel = WeightChannel(host, port, rank, world_size, backend, device, timeout_s)

    def receive_weights(self, specs: list[Any], bucket_mb: float) -> None:
        """Receive one broadcast of the learner's weights and load it in place."""
        self.load_weights(self.channel.receive(specs, bucket_mb))

    def gpu_uuid(self) -> str:
        """UUID of the engine's GPU (compared with the learner's for rollout.weight_sync=ipc).
        Raises ValueError on the CPU."""
        from cudal1.engines.cuda_ipc import device_uuid

        return device_uuid(self.device)

    def receive_weights_ipc(self, payload: dict[str, Any], specs: list[Any]) -> int:
        """Map the learner's exported buckets (`cudal1.engines.cuda_ipc` payload: CUDA IPC handles
        of buffers on this GPU), copy every tensor into the model in place, wait for the copies and
        drop the mappings, so the learner may free its buffers once this returns. Returns the number
        of tensors loaded.

        Raises:
            NotColocatedError: the learner's GPU is not this engine's.
            ValueError: the payload disagrees with `specs`.
        """
        from cudal1.engines.cuda_ipc import open_payload

        if self.device.type != "cuda":
            raise ValueError("rollout.weight_sync=ipc needs the engine on a GPU (rollout.num_gpus > 0)")
        loaded = [0]

        def counted():
            for item in open_payload(payload, specs):
                loaded[0] += 1
                yield item

        self.load_weights(counted())
        torch.cuda.synchronize(self.device)
        return loaded[0]

    def close(self) -> None:
        """Release the model."""
        self.model = None
