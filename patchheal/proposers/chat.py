"""A minimal OpenAI-compatible chat-completions client on the standard library.

Works with hosted providers and with local servers (vLLM, Ollama, llama.cpp,
a LiteLLM proxy): POST `{base_url}/chat/completions`. Transient faults
(timeouts, connection errors, 408, 429, 5xx) raise `TransientProposerError`
with `retry_after` from a Retry-After header and are retried through the one
tenacity factory; everything else (400, 401, 403, 404, a malformed reply)
raises `ProposerError` at once. Messages name the provider, model and HTTP
status and never contain the API key.
"""

from __future__ import annotations

import email.utils
import http.client
import json
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

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
        request = urllib.request.Request(
            self.base_url + "/chat/completions", data=body, headers=headers, method="POST"
        )
        self.requests_sent += 1
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                raw = response.read()
        except urllib.error.HTTPError as exc:
            raise self._http_error(exc) from None
        except TimeoutError as exc:
            raise TransientProposerError(
                f"{self._where()}: no answer within {self.timeout:g} s ({exc})"
            ) from None
        except (urllib.error.URLError, ConnectionError, http.client.HTTPException, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise TransientProposerError(
                f"{self._where()}: connection failed: {self._clean(str(reason))}"
            ) from None
        return self._parse(raw)

    def _http_error(self, exc: urllib.error.HTTPError) -> ProposerError:
        try:
            detail = exc.read().decode("utf-8", "replace")
        except OSError:
            detail = ""
        detail = self._clean(" ".join(detail.split()))[:_BODY_SHOWN]
        message = f"{self._where()} answered HTTP {exc.code}" + (f": {detail}" if detail else "")
        if exc.code in {408, 429} or exc.code >= 500:
            error = TransientProposerError(message)
            error.retry_after = parse_retry_after(exc.headers.get("Retry-After"))  # type: ignore[attr-defined]
            return error
        if exc.code in {401, 403}:
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
