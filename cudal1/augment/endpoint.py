"""One OpenAI-compatible chat endpoint (OpenAI, vLLM's server, any proxy that speaks the API),
asked with retries: the only module of cudal1 that imports `openai`.

`EndpointClient.complete(messages, seed)` sends one chat completion and returns an `Answer`, or
raises `EndpointError` once its retries are spent. The openai client's own retries are turned
off so that every retry is counted and follows one policy:

- retried, with exponential backoff (`backoff_s` × 2^n, at most `backoff_max_s`, times a random
  factor in [0.5, 1] so that concurrent callers spread out; a 429's Retry-After header is
  honoured up to `backoff_max_s`): timeouts, connection errors, 408, 409, 429, every 5xx, and
  malformed answers (a body that is not JSON, JSON without choices or message content);
- not retried: other 4xx (a bad request, key or model stays bad). 401, 403 and 404 mark the
  error `fatal`: the caller stops asking that endpoint.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import random
import threading
import time
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)


@dataclasses.dataclass
class EndpointSpec:
    """Where and how to ask (mirrors `cudal1.config.EndpointConfig`; the key itself is not kept here).

    Attributes:
        name: unique name (records say which endpoint answered).
        base_url: e.g. "https://api.openai.com/v1", "http://127.0.0.1:8000/v1".
        model: the model name the endpoint serves.
        concurrency: requests in flight at once.
        temperature, top_p, max_tokens: sampling of each answer.
        timeout_s: seconds one request may take.
        max_retries: requests repeated after a retryable failure (0: one try).
        backoff_s, backoff_max_s: first and longest wait between tries (seconds).
        send_seed: send a per-attempt seed (reproducible where the server honours it).
        extra_body: extra JSON fields of every request (server-specific options, e.g. vLLM's
            "structured_outputs").
    """

    name: str
    base_url: str
    model: str
    concurrency: int = 4
    temperature: float = 0.7
    top_p: float = 1.0
    max_tokens: int = 4096
    timeout_s: float = 300.0
    max_retries: int = 5
    backoff_s: float = 1.0
    backoff_max_s: float = 60.0
    send_seed: bool = True
    extra_body: dict[str, Any] = dataclasses.field(default_factory=dict)

    def public(self) -> dict[str, Any]:
        """What a dataset manifest records about the endpoint (no key)."""
        return {
            "name": self.name,
            "base_url": self.base_url,
            "model": self.model,
            "temperature": self.temperature,
            "top_p": self.top_p,
            "max_tokens": self.max_tokens,
        }


@dataclasses.dataclass
class Answer:
    """One endpoint's answer: its text, finish reason ("stop" | "length" | ...), token usage,
    how many requests were repeated before it came, the last request's seconds, and the errors
    of the repeated ones (one line each)."""

    text: str
    finish_reason: str
    usage: dict[str, Any]
    retries: int
    latency_s: float
    errors: list[str]


class EndpointError(RuntimeError):
    """A request failed for good: its retries are spent, or the error is not retryable.
    `fatal` is set for errors that every further request would meet too (key, permission, model)."""

    def __init__(self, message: str, *, retries: int, fatal: bool = False, errors: list[str] | None = None) -> None:
        super().__init__(message)
        self.retries = retries
        self.fatal = fatal
        self.errors = errors or []


class MalformedAnswer(ValueError):
    """The endpoint answered 2xx with something that is not a chat completion."""


class EndpointClient:
    """A thread-safe client for one `EndpointSpec`.

    Args:
        spec: the endpoint.
        api_key: the key (None: the placeholder "EMPTY", which servers without auth accept).
        sleep: how to wait between tries (tests may pass a recorder; default time.sleep).
    """

    def __init__(self, spec: EndpointSpec, api_key: str | None, sleep: Callable[[float], None] = time.sleep) -> None:
        import openai

        self.spec = spec
        self._openai = openai
        self._client = openai.OpenAI(
            base_url=spec.base_url, api_key=api_key or "EMPTY", timeout=spec.timeout_s, max_retries=0
        )
        self._sleep = sleep
        self._rng = random.Random()
        self._lock = threading.Lock()

    def close(self) -> None:
        self._client.close()

    def _backoff(self, n: int, exc: BaseException) -> float:
        wait = min(self.spec.backoff_max_s, self.spec.backoff_s * 2**n)
        with self._lock:
            wait *= self._rng.uniform(0.5, 1.0)
        response = getattr(exc, "response", None)
        after = response.headers.get("retry-after") if response is not None else None
        if after is not None:
            try:
                wait = max(wait, min(float(after), self.spec.backoff_max_s))
            except ValueError:
                pass
        return wait

    def _classify(self, exc: BaseException) -> tuple[bool, bool, str]:
        """(retryable, fatal, one-line description) of a failed request."""
        o = self._openai
        if isinstance(exc, o.APITimeoutError):
            return True, False, f"timeout after {self.spec.timeout_s:g} s"
        if isinstance(exc, o.APIConnectionError):
            return True, False, f"connection error: {exc}"
        if isinstance(exc, o.APIStatusError):
            code = exc.status_code
            what = f"HTTP {code}: {str(exc)[:200]}"
            if code in (408, 409, 429) or code >= 500:
                return True, False, what
            return False, code in (401, 403, 404), what
        if isinstance(exc, (MalformedAnswer, o.APIResponseValidationError, json.JSONDecodeError)):
            return True, False, f"malformed answer: {str(exc)[:200]}"
        raise exc  # a bug of ours, not the endpoint's

    def complete(self, messages: list[dict[str, str]], seed: int | None = None) -> Answer:
        """One chat completion for `messages` ([{"role", "content"}]); `seed` is sent when
        `spec.send_seed`. Returns the first choice's text. Raises EndpointError (see the module
        docstring for what is retried)."""
        spec = self.spec
        kwargs: dict[str, Any] = dict(
            model=spec.model,
            messages=messages,
            temperature=spec.temperature,
            top_p=spec.top_p,
            max_tokens=spec.max_tokens,
        )
        if spec.send_seed and seed is not None:
            kwargs["seed"] = seed
        if spec.extra_body:
            kwargs["extra_body"] = dict(spec.extra_body)
        errors: list[str] = []
        for n in range(spec.max_retries + 1):
            t0 = time.perf_counter()
            try:
                completion = self._client.chat.completions.create(**kwargs)
                text, finish = _first_choice(completion)
            except Exception as exc:  # classified below; anything unexpected is re-raised there
                retryable, fatal, what = self._classify(exc)
                errors.append(what)
                if not retryable or n == spec.max_retries:
                    why = "not retryable" if not retryable else f"after {n + 1} tries"
                    raise EndpointError(
                        f"endpoint {spec.name}: {what} ({why})", retries=n, fatal=fatal, errors=errors
                    ) from None
                wait = self._backoff(n, exc)
                log.info(
                    "endpoint %s: %s; retrying in %.1f s (%d of %d)", spec.name, what, wait, n + 1, spec.max_retries
                )
                self._sleep(wait)
                continue
            usage = completion.usage.model_dump() if getattr(completion, "usage", None) is not None else {}
            return Answer(text, finish, usage, n, time.perf_counter() - t0, errors)
        raise AssertionError("unreachable")


def _first_choice(completion: Any) -> tuple[str, str]:
    """(text, finish_reason) of a chat completion's first choice. Raises MalformedAnswer when
    `completion` is not one (the openai client returns a plain string for a non-JSON body and
    builds a model without checking for JSON of another shape)."""
    choices = getattr(completion, "choices", None)
    if not isinstance(choices, list) or not choices:
        raise MalformedAnswer(f"no choices in {str(completion)[:120]!r}")
    message = getattr(choices[0], "message", None)
    content = getattr(message, "content", None)
    if not isinstance(content, str):
        raise MalformedAnswer(f"no message content in {str(choices[0])[:120]!r}")
    return content, str(getattr(choices[0], "finish_reason", None) or "stop")
