"""One exception root; each subclass is also a builtin category.

The CLI maps these to the exit codes of DESIGN.md:
0 fixed, 1 not fixed, 2 bad input or usage, 3 harness or infrastructure
unavailable, 130 interrupted.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pydantic import ValidationError

EXIT_FIXED = 0
EXIT_NOT_FIXED = 1
EXIT_BAD_INPUT = 2
EXIT_INFRA = 3
EXIT_INTERRUPTED = 130


class PatchhealError(Exception):
    """Root of every error patchheal raises on purpose."""

    exit_code = EXIT_NOT_FIXED


class BadInput(PatchhealError, ValueError):
    """A spec, a flag, a file or a patch that patchheal cannot use."""

    exit_code = EXIT_BAD_INPUT


class SpecError(BadInput):
    """A job spec or harness definition failed validation."""


class NotAGitRepository(BadInput):
    """The job's repository is not a git repository."""


class UnknownRef(BadInput):
    """The job's base ref does not resolve to a commit."""


class PatchApplyError(PatchhealError, ValueError):
    """A candidate diff does not apply to the worktree."""


class NotADiff(BadInput):
    """Text that should be a unified diff is not one."""


class InfraUnavailable(PatchhealError, RuntimeError):
    """The harness or infrastructure (e.g. the Docker engine) is not there."""

    exit_code = EXIT_INFRA


class HarnessError(PatchhealError, RuntimeError):
    """The harness failed for a reason that is not the step's own failure."""

    exit_code = EXIT_INFRA


class DependencySetupError(HarnessError):
    """A job's dependencies could not be had: a requirement no index or wheelhouse has,
    a setup command that failed. The environment's failure, never the code's: the
    step is classified `dependency_issue` and not patched."""

    # pip's words for a requirement it cannot find (download on the host or install offline).
    _MISSING = re.compile(
        r"(?:No matching distribution found for|Could not find a version that satisfies "
        r"the requirement) ([^\s(]+)"
    )

    def __init__(self, message: str, missing: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.missing = missing

    @classmethod
    def from_pip(cls, what: str, output: str) -> DependencySetupError:
        """`what` failed with pip's `output`; the message names what could not be had."""
        missing = tuple(dict.fromkeys(cls._MISSING.findall(output)))
        named = f": cannot get {', '.join(missing)}" if missing else ""
        tail = "\n".join("    " + line for line in output.rstrip().splitlines()[-40:])
        return cls(f"{what}{named}\n{tail}", missing)


class ImageBuildError(HarnessError):
    """A harness image could not be built."""


class StepTimeout(PatchhealError, TimeoutError):
    """A step exceeded its wall-clock or idle timeout."""


class ProposerError(PatchhealError, RuntimeError):
    """A proposer failed in a way that retrying will not fix (e.g. HTTP 401)."""


class TransientProposerError(ProposerError):
    """A proposer failed in a way that a retry may fix (timeouts, 429, 5xx)."""


class TokenBudgetReached(ProposerError):
    """The next model call could overshoot the job's token budget, so it was not made."""


class LockHeld(PatchhealError, RuntimeError):
    """Another live run holds the job's lock."""

    exit_code = EXIT_BAD_INPUT


class Interrupted(PatchhealError, KeyboardInterrupt):
    """The run was interrupted; state is saved and the job can resume."""

    exit_code = EXIT_INTERRUPTED
    result: object | None = None
    """What the run had done before the stop (a loop.HealResult), for a summary."""


class StoreIntegrityError(PatchhealError, RuntimeError):
    """The attempt store or an event log is inconsistent."""


class ReplayError(PatchhealError, RuntimeError):
    """A checkpoint replay did not reproduce the recorded files."""


def validation_problems(error: ValidationError, *, top: str = "(top level)") -> list[str]:
    """One `where: what` line per problem pydantic found, `where` a dotted path of the input."""
    return [
        f"{'.'.join(str(part) for part in item['loc']) or top}: {item['msg']}"
        for item in error.errors()
    ]
