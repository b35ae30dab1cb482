"""A deterministic proposer with inline diffs: tests and dry runs use the real loop with it."""

from __future__ import annotations

import time
from collections.abc import Callable

from patchheal.config import JobSpec
from patchheal.models import Candidate
from patchheal.proposers.base import ProposalRequest
from patchheal.proposers.config import ScriptedConfig


class ScriptedProposer:
    """Proposes `config.diffs` in order, then nothing."""

    name = "scripted"

    def __init__(
        self, config: ScriptedConfig, *, job: JobSpec, sleep: Callable[[float], None] = time.sleep
    ) -> None:
        del job, sleep
        self._diffs = list(config.diffs)
        self._strategy = config.strategy
        self.requests: list[ProposalRequest] = []

    def propose(self, request: ProposalRequest) -> Candidate | None:
        self.requests.append(request)
        if not self._diffs:
            return None
        index = len(self.requests)
        return Candidate(
            diff=self._diffs.pop(0),
            strategy=self._strategy,
            proposer=self.name,
            label=f"scripted-{index}",
        )
