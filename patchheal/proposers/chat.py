"""A minimal OpenAI-compatible chat-completions client on httpx.

Works with hosted providers and with local servers (vLLM, Ollama, llama.cpp,
a LiteLLM proxy): POST `{base_url}/chat/completions`. Transient faults
(timeouts, connection errors, 408, 429, 5xx) raise `TransientProposerError`
with `retry_after` from a Retry-After header and are retried through the one
tenacity factory; everything else (400, 401, 403, 404, a malformed reply)
raises `ProposerError` at once. Messages name the provider, model and HTTP
status and never contain the API key.

httpx is the transport only: it does not retry (our tenacity factory does,
so one retry budget holds) and does not read Retry-After, which is parsed
here with the standard library's HTTP-date parser.
"""

from __future__ import annotations

import email.utils
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import httpx

from patchheal.errors import ProposerError, TransientProposerError
from patchheal.retry import retrying
from patchheal.scrub.scrubber import scrub

_BODY_SHOWN = 300


@dataclass(frozen=True)
class ChatReply:
    """The assistant message and the usage the provider reported (None when absent)."""

    content: str
    total_tokens: int | None
    prompt_tokens: int | None
    completion_tokens: int | None
    model: str
    finish_reason: str | None


def parse_retry_after(value: str | None, *, now: float | None = None) -> float | None:
    """Seconds to wait from a Retry-After header (delta-seconds or an HTTP date)."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


class ChatClient:
    """One provider endpoint and model; `complete` sends one conversation."""

    def __init__(
        self,
        *,
        base_url: str,
        model: str,
        api_key: str | None = None,
        temperature: float = 0.2,
        max_tokens: int = 2048,
        timeout: float = 120.0,
        attempts: int = 3,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise ProposerError(
                f"llm proposer: base_url must start with http:// or https://, got {base_url!r}"
            )
        self.base_url = base_url.rstrip("/")
        self.model = model
        self._api_key = api_key
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.timeout = timeout
        self.attempts = attempts
        self._sleep = sleep
        self.requests_sent = 0

    def _where(self) -> str:
        return f"provider {self.base_url} (model {self.model})"

    def _clean(self, text: str) -> str:
        if self._api_key:
            text = text.replace(self._api_key, "[REDACTED]")
        return scrub(text)

    def complete(
        self, messages: Sequence[dict[str, str]], *, max_tokens: int | None = None
    ) -> ChatReply:
        """Send the messages; retries transient faults, raises ProposerError otherwise.

        `max_tokens` lowers the reply's cap for this call (a token budget nearly spent)."""
        body = json.dumps(
            {
                "model": self.model,
                "messages": list(messages),
                "temperature": self.temperature,
                "max_tokens": self.max_tokens if max_tokens is None else max_tokens,
                "stream": False,
            }
        ).encode("utf-8")
        retryer = retrying(
            lambda exc: isinstance(exc, TransientProposerError),
            attempts=self.attempts,
            sleep=self._sleep,
        )
        reply: ChatReply = retryer(self._post_once, body)
        return reply

    def _post_once(self, body: bytes) -> ChatReply:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        self.requests_sent += 1
        try:
            # A timeout per operation (connect, each read, each write), as a socket timeout was;
            # redirects are not followed: a provider that redirects a POST is misconfigured.
            response = httpx.post(
                self.base_url + "/chat/completions",
                content=body,
                headers=headers,
                timeout=self.timeout,
            )
        except httpx.TimeoutException as exc:
            raise TransientProposerError(
                f"{self._where()}: no answer within {self.timeout:g} s ({exc})"
            ) from None
        except httpx.HTTPError as exc:  # refused, reset, DNS, a broken HTTP reply
            raise TransientProposerError(
                f"{self._where()}: connection failed: {self._clean(str(exc))}"
            ) from None
        if not response.is_success:
            raise self._http_error(response)
        return self._parse(response.content)

    def _http_error(self, response: httpx.Response) -> ProposerError:
        code = response.status_code
        detail = self._clean(" ".join(response.text.split()))[:_BODY_SHOWN]
        message = f"{self._where()} answered HTTP {code}" + (f": {detail}" if detail else "")
        if code in {408, 429} or code >= 500:
            error = TransientProposerError(message)
            error.retry_after = parse_retry_after(response.headers.get("Retry-After"))  # type: ignore[attr-defined]
            return error
        if code in {401, 403}:
            message += " (check the API key variable and the account's access to the model)"
        return ProposerError(message)

    def _parse(self, raw: bytes) -> ChatReply:
        try:
            data: Any = json.loads(raw)
            choice = data["choices"][0]
            content = choice["message"]["content"]
        except (ValueError, KeyError, IndexError, TypeError):
            shown = self._clean(raw[:_BODY_SHOWN].decode("utf-8", "replace"))
            raise ProposerError(
                f"{self._where()} sent a malformed chat-completions reply: {shown!r}"
            ) from None
        if content is None:
            content = ""  # e.g. a refusal or a tool call: no edit to apply
        if not isinstance(content, str):
            raise ProposerError(f"{self._where()} sent non-text message content")
        usage = data.get("usage") if isinstance(data.get("usage"), dict) else {}
        return ChatReply(
            content=content,
            total_tokens=_int_or_none(usage.get("total_tokens")),
            prompt_tokens=_int_or_none(usage.get("prompt_tokens")),
            completion_tokens=_int_or_none(usage.get("completion_tokens")),
            model=str(data.get("model") or self.model),
            finish_reason=choice.get("finish_reason") if isinstance(choice, dict) else None,
        )


def _int_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None
