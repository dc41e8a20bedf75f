"""Request handling of the Serve application, without Serve: auth, the OpenAI-compatible chat
API, and payload validation. Every error a client can cause is an `ApiError` (HTTP status and a
message); the app turns it into an OpenAI-style error body.

What is checked, and what is not:
- `check_bearer`: the `Authorization: Bearer <token>` header, compared in constant time.
- `ChatService.complete`: the OpenAI `chat.completions` request shape (messages of role/content
  strings, `max_tokens`/`max_completion_tokens`, `temperature`, `top_p`, `n`); `stream`, tools and
  `logprobs` are not supported and get 400 (a limit, said so rather than ignored). The prompt is the
  checkpoint's chat template over the messages; it must fit `max_model_len - max_tokens`.
"""

from __future__ import annotations

import hmac
import threading
import time
import uuid
from collections.abc import Mapping
from typing import Any


class ApiError(Exception):
    """An error the client caused or must see: `status` (HTTP code), `message`, `kind` (OpenAI's
    error "type": invalid_request_error, authentication_error, not_found_error, rate_limit_error)."""

    def __init__(self, status: int, message: str, kind: str = "invalid_request_error") -> None:
        super().__init__(message)
        self.status, self.message, self.kind = status, message, kind

    def body(self) -> dict[str, Any]:
        """The OpenAI-style error body: {"error": {"message", "type", "code"}}."""
        return {"error": {"message": self.message, "type": self.kind, "code": self.status}}


def check_bearer(header: str | None, token: str) -> None:
    """Raise ApiError(401) unless `header` is "Bearer <token>" (constant-time comparison)."""
    if not token:
        raise ApiError(500, "the server has no token configured", "server_error")
    if not header:
        raise ApiError(401, "missing Authorization: Bearer <token> header", "authentication_error")
    scheme, _, given = header.partition(" ")
    if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip().encode(), token.encode()):
        raise ApiError(401, "invalid bearer token", "authentication_error")


def _number(payload: Mapping[str, Any], key: str, default: float, lo: float, hi: float, integer: bool = False) -> Any:
    value = payload.get(key, default)
    if value is None:
        value = default
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (integer and not float(value).is_integer()):
        raise ApiError(400, f"{key} must be {'an integer' if integer else 'a number'}; got {value!r}")
    if not lo <= value <= hi:
        raise ApiError(400, f"{key} must be in [{lo}, {hi}]; got {value!r}")
    return int(value) if integer else float(value)


class LockedGenerator:
    """A generator shared by request threads: one `generate` at a time (vLLM's offline `LLM` is
    not thread-safe). Wraps a `cudal1.rollout.RolloutGenerator` (or anything with `generate`)."""

    def __init__(self, generator: Any) -> None:
        self.inner = generator
        self._lock = threading.Lock()

    def generate(self, *args: Any, **kwargs: Any) -> Any:
        with self._lock:
            return self.inner.generate(*args, **kwargs)


class ChatService:
    """The OpenAI-compatible `GET /v1/models` and `POST /v1/chat/completions` over a generator.

    Args:
        generator: has `generate(prompt_ids, n, max_tokens, temperature, top_p) -> [[Generation]]`.
        tokenizer: the policy's tokenizer (its chat template renders the messages).
        model_name: the id the API lists; a request naming another model gets 404.
        max_model_len: prompt + response tokens the engine holds.
        max_chat_tokens: the largest `max_tokens` a request may ask for.
        default_max_tokens: used when the request gives none.
    """

    def __init__(
        self,
        generator: Any,
        tokenizer: Any,
        model_name: str,
        max_model_len: int,
        max_chat_tokens: int = 1024,
        default_max_tokens: int = 256,
    ) -> None:
        self.generator, self.tokenizer, self.model_name = generator, tokenizer, model_name
        self.max_model_len, self.max_chat_tokens = max_model_len, max_chat_tokens
        self.default_max_tokens = min(default_max_tokens, max_chat_tokens)
        self.created = int(time.time())

    def models(self) -> dict[str, Any]:
        """The OpenAI model list (one model)."""
        return {
            "object": "list",
            "data": [{"id": self.model_name, "object": "model", "created": self.created, "owned_by": "cudal1"}],
        }

    def complete(self, payload: Any) -> dict[str, Any]:
        """Answer one chat.completions request (a decoded JSON body). Returns the OpenAI
        `chat.completion` object: choices (message, finish_reason "stop" | "length"), usage in tokens.
        Raises ApiError(400) for a bad payload, ApiError(404) for an unknown model."""
        if not isinstance(payload, Mapping):
            raise ApiError(400, "the body must be a JSON object")
        model = payload.get("model", self.model_name)
        if model != self.model_name:
            raise ApiError(
                404, f"model {model!r} does not exist; this server serves {self.model_name!r}", "not_found_error"
            )
        for key in ("stream", "tools", "functions", "logprobs"):
            if payload.get(key):
                raise ApiError(400, f"{key} is not supported by this server")
        messages = payload.get("messages")
        if not isinstance(messages, list) or not messages:
            raise ApiError(400, "messages must be a non-empty list of {role, content} objects")
        clean = []
        for i, m in enumerate(messages):
            if (
                not isinstance(m, Mapping)
                or m.get("role") not in ("system", "user", "assistant")
                or not isinstance(m.get("content"), str)
            ):
                raise ApiError(400, f"messages[{i}] must have role system|user|assistant and a string content")
            clean.append({"role": m["role"], "content": m["content"]})
        max_tokens = payload.get("max_completion_tokens", payload.get("max_tokens"))
        max_tokens = _number(
            {"max_tokens": max_tokens}, "max_tokens", self.default_max_tokens, 1, self.max_chat_tokens, integer=True
        )
        temperature = _number(payload, "temperature", 1.0, 0.0, 2.0)
        top_p = _number(payload, "top_p", 1.0, 1e-6, 1.0)
        n = _number(payload, "n", 1, 1, 8, integer=True)
        if n > 1 and temperature == 0:
            raise ApiError(400, f"n={n} needs temperature > 0: greedy sampling gives one answer")
        from cudal1.policy.model import chat_prompt_ids

        ids = chat_prompt_ids(self.tokenizer, clean)
        if len(ids) + max_tokens > self.max_model_len:
            raise ApiError(
                400,
                f"the prompt is {len(ids)} tokens; with max_tokens={max_tokens} it exceeds the "
                f"model's {self.max_model_len}",
            )
        gens = self.generator.generate([ids], n=n, max_tokens=max_tokens, temperature=temperature, top_p=top_p)[0]
        completion = sum(len(g.response_ids) for g in gens)
        return {
            "id": f"chatcmpl-{uuid.uuid4().hex}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.model_name,
            "choices": [
                {
                    "index": i,
                    "message": {"role": "assistant", "content": g.text},
                    "finish_reason": "length" if g.finish_reason == "length" else "stop",
                    "logprobs": None,
                }
                for i, g in enumerate(gens)
            ],
            "usage": {
                "prompt_tokens": len(ids),
                "completion_tokens": completion,
                "total_tokens": len(ids) + completion,
            },
        }
