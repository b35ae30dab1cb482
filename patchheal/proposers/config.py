"""Each proposer's typed config, discriminated by `kind`.

Kept free of heavy imports so that loading a job spec never loads an HTTP
client or the agent runner.
"""

from __future__ import annotations

import urllib.parse
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

_EXAMPLE_URL = "http://127.0.0.1:8000/v1"


class _ProposerConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    after_failures: int = Field(
        0,
        ge=0,
        le=1000,
        description="use this proposer only once the step has this many failed attempts "
        "(chains a cheap proposer before a stronger one)",
    )


class PatchfilesConfig(_ProposerConfig):
    """Candidates from patch files, tried in name order."""

    kind: Literal["patchfiles"] = "patchfiles"
    dir: Path | None = Field(None, description="directory of *.patch / *.diff files")
    paths: tuple[Path, ...] = Field((), description="explicit list of patch files")

    @model_validator(mode="after")
    def _one_source(self) -> PatchfilesConfig:
        if (self.dir is None) == (not self.paths):
            raise ValueError("patchfiles proposer: set exactly one of `dir` and `paths`")
        return self


class LLMConfig(_ProposerConfig):
    """A chat-completions endpoint (OpenAI-compatible)."""

    kind: Literal["llm"] = "llm"
    base_url: str = Field(description="e.g. http://127.0.0.1:8000/v1")
    model: str = Field(description="model name sent in each request")
    api_key_env: str | None = Field(None, description="environment variable holding the API key")
    temperature: float = Field(0.2, ge=0.0, le=2.0, description="sampling temperature")
    max_tokens: int = Field(2048, gt=0, le=1_000_000, description="max tokens in one reply")
    timeout_seconds: float = Field(120.0, gt=0, le=86400.0, description="per request")
    retry_attempts: int = Field(3, ge=1, le=20, description="tries per request on transient faults")
    context_tokens: int = Field(
        6000, gt=0, le=1_000_000, description="token budget of the retry context"
    )

    @field_validator("base_url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")):
            raise ValueError(
                f"must start with http:// or https:// (e.g. {_EXAMPLE_URL}), got {value!r}"
            )
        try:  # `http://[::1` and `http://h:99999` raise only when the URL is used
            parts = urllib.parse.urlsplit(value)
            _ = parts.port
        except ValueError as exc:
            raise ValueError(f"not a usable URL ({exc}): {value[:200]!r}") from None
        if not parts.hostname:
            raise ValueError(f"names no host: {value[:200]!r}")
        return value.rstrip("/")


class AgentConfig(_ProposerConfig):
    """A coding-agent command run inside the attempt worktree."""

    kind: Literal["agent"] = "agent"
    command: str = Field(
        description="shell command; {context} is replaced by the context file path"
    )
    timeout_seconds: float = Field(
        900.0, gt=0, le=7 * 86400.0, description="wall-clock limit of one run"
    )
    idle_timeout_seconds: float = Field(
        300.0, gt=0, le=7 * 86400.0, description="limit without any output"
    )
    env: tuple[str, ...] = Field((), description="variables passed through by name")
    strategy: str = Field("agent", description="strategy tag recorded for its candidates")
    context_tokens: int = Field(
        12000, gt=0, le=1_000_000, description="token budget of the context file"
    )


class ScriptedConfig(_ProposerConfig):
    """Deterministic candidates given inline (tests, demos, dry runs)."""

    kind: Literal["scripted"] = "scripted"
    diffs: tuple[str, ...] = Field(description="unified diffs, proposed in order")
    strategy: str = Field("scripted", description="strategy tag for every candidate")


ProposerConfig = Annotated[
    PatchfilesConfig | LLMConfig | AgentConfig | ScriptedConfig, Field(discriminator="kind")
]
