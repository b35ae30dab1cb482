"""The `agent` proposer: a user's coding agent run as a command inside the attempt worktree.

The rendered retry context is written to a file in a fresh temp directory
outside the worktree (so it never shows up in the diff) and passed as
`{context}` in the command and as `PATCHHEAL_CONTEXT_FILE`. The command runs
through `proc.run` in the worktree, in its own process group, with the wall
and idle timeouts of the config; on a timeout the whole group is killed and
`StepTimeout` is raised. Its environment is minimal: PATH, HOME, locale and
terminal settings, the `PATCHHEAL_*` variables and the names listed in
`config.env` — nothing else of patchheal's environment reaches it.

The candidate is the worktree's diff after the command exits (whatever its
exit code; an empty diff is recorded by the loop as `apply_failed`). A
`STRATEGY: tag` / `RATIONALE: line` printed by the agent is picked up; the
scrubbed output is kept in `last_output` and its tail ends the rationale.
Files the agent writes outside the worktree are not part of the candidate;
the policy gate judges protected paths and test files in the diff.
"""

from __future__ import annotations

import os
import shlex
import shutil
import time
from collections.abc import Callable
from pathlib import Path

from patchheal import proc
from patchheal.config import JobSpec
from patchheal.errors import StepTimeout
from patchheal.evidence.build import render_context
from patchheal.harness.engine import leftovers
from patchheal.models import Candidate
from patchheal.proposers.base import ProposalRequest
from patchheal.proposers.config import AgentConfig
from patchheal.proposers.editformats import parse_tags
from patchheal.scrub.scrubber import Scrubber
from patchheal.workspace.worktrees import worktree_diff

# Not secrets, and what CLIs need to start: a PATH, a HOME for their own config, a locale.
BASE_ENV = ("PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LC_ALL", "LC_CTYPE", "TERM", "TZ")
OUTPUT_CAP = 512 * 1024
_TAIL_LINES = 8
_TAIL_CHARS = 600


class AgentProposer:
    """Runs `config.command` once per `propose` call."""

    name = "agent"

    def __init__(
        self, config: AgentConfig, *, job: JobSpec, sleep: Callable[[float], None] = time.sleep
    ) -> None:
        del sleep  # an agent run is never retried here: a failed run is a recorded attempt
        self.config = config
        self._job = job
        self._scrubber = Scrubber.from_env((*config.env, *job.job.env))
        self.last_output = ""
        self.last_exit_code: int | None = None

    def environment(self, context_file: Path, request: ProposalRequest) -> dict[str, str]:
        """Exactly what the agent's process sees."""
        env = {name: os.environ[name] for name in BASE_ENV if name in os.environ}
        env.update({name: os.environ[name] for name in self.config.env if name in os.environ})
        env.update(
            {
                "PATCHHEAL_CONTEXT_FILE": str(context_file),
                "PATCHHEAL_WORKTREE": str(request.worktree),
                "PATCHHEAL_JOB_ID": self._job.job.id,
                "PATCHHEAL_ATTEMPT": str(request.attempt_number),
            }
        )
        return env

    def propose(self, request: ProposalRequest) -> Candidate:
        # Agents that commit (aider does by default) move HEAD: diff against where it started.
        started_at = proc.git("rev-parse", "--verify", "HEAD", cwd=request.worktree, check=False)
        head = started_at.output.strip() if started_at.exit_code == 0 else None
        tmp = leftovers.make_temp_dir("patchheal-context-")
        try:
            context_file = tmp / "context.md"
            text = render_context(request.context, max_tokens=self.config.context_tokens)
            context_file.write_text(self._scrubber.scrub(text), encoding="utf-8")
            command = self.config.command.replace("{context}", shlex.quote(str(context_file)))
            result = proc.run(
                command,
                cwd=request.worktree,
                env=self.environment(context_file, request),
                timeout=self.config.timeout_seconds,
                idle_timeout=self.config.idle_timeout_seconds,
                output_cap=OUTPUT_CAP,
            )
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        self.last_output = self._scrubber.scrub(result.output)
        self.last_exit_code = result.exit_code
        if result.timed_out is not None:
            limit = (
                self.config.timeout_seconds
                if result.timed_out == "wall"
                else self.config.idle_timeout_seconds
            )
            what = "wall-clock" if result.timed_out == "wall" else "idle (no output)"
            raise StepTimeout(
                f"agent command hit its {result.timed_out} timeout: {what} limit of {limit:g} s, "
                f"job {self._job.job.id} attempt {request.attempt_number}; its process group was "
                f"killed.{_tail(self.last_output, prefix=' Output tail: ')}"
            )
        strategy, rationale = parse_tags(self.last_output)
        diff = worktree_diff(request.worktree, base=head)
        status = f"agent exited {result.exit_code}" + ("" if diff.strip() else ", no change made")
        summary = "; ".join(part for part in (rationale, status) if part)
        return Candidate(
            diff=diff,
            strategy=strategy or self.config.strategy,
            rationale=summary + _tail(self.last_output, prefix=" | output tail: "),
            proposer=self.name,
            label=f"attempt-{request.attempt_number}",
        )


def _tail(output: str, *, prefix: str) -> str:
    lines = [line for line in output.strip().splitlines() if line.strip()][-_TAIL_LINES:]
    text = " / ".join(line.strip() for line in lines)[-_TAIL_CHARS:]
    return prefix + text if text else ""
