"""The Proposer Protocol: what writes a candidate patch."""

from __future__ import annotations

from pathlib import Path
from typing import Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict

from patchheal.models import Candidate, RetryContext


class ProposalRequest(BaseModel):
    """Everything a proposer gets for one attempt."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    context: RetryContext
    worktree: Path
    """A pristine worktree at the step's starting point; a proposer may edit it."""
    attempt_number: int
    token_allowance: int | None = None
    """Model tokens the job has left (prompt and reply together); None: no token budget.
    A proposer that calls a model must not make a call that could spend more."""


@runtime_checkable
class Proposer(Protocol):
    """Proposes one candidate per call; None means it has nothing more to offer."""

    name: str

    def propose(self, request: ProposalRequest) -> Candidate | None: ...


@runtime_checkable
class StaticProposer(Proposer, Protocol):
    """A proposer with a fixed list (patch files): it can be screened against memory."""

    def peek_all(self) -> list[Candidate]:
        """Every candidate not proposed yet, without consuming them."""
        ...

    def drop(self, labels: set[str]) -> None:
        """Never propose the candidates with these labels."""
        ...
