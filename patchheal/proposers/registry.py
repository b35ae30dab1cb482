"""Name → proposer class, imported lazily so an HTTP client loads only when chosen."""

from __future__ import annotations

import importlib
import time
from collections.abc import Callable

from patchheal.config import JobSpec
from patchheal.errors import SpecError
from patchheal.proposers.base import Proposer
from patchheal.proposers.config import ProposerConfig

_REGISTRY: dict[str, str] = {
    "patchfiles": "patchheal.proposers.patchfiles:PatchfilesProposer",
    "scripted": "patchheal.proposers.scripted:ScriptedProposer",
    "llm": "patchheal.proposers.llm:LLMProposer",
    "agent": "patchheal.proposers.agent:AgentProposer",
}


def create_proposer(
    config: ProposerConfig, *, job: JobSpec, sleep: Callable[[float], None] = time.sleep
) -> Proposer:
    """Instantiate the proposer that `config.kind` names."""
    target = _REGISTRY.get(config.kind)
    if target is None:
        raise SpecError(
            f"unknown proposer kind {config.kind!r}; known: {', '.join(sorted(_REGISTRY))}"
        )
    module_name, _, class_name = target.partition(":")
    cls = getattr(importlib.import_module(module_name), class_name)
    proposer: Proposer = cls(config, job=job, sleep=sleep)
    return proposer
