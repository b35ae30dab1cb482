"""Opening a pull request: only on request, and only for a verified branch.

patchheal speaks to no forge itself. The user's own command does it (`gh pr
create`, `glab mr create`, a script calling an API), run in the job's
repository with the verified branch filled in, after the report exists so
that it can be the pull request's body.
"""

from __future__ import annotations

import shlex
from pathlib import Path

from patchheal import proc
from patchheal.errors import BadInput
from patchheal.scrub.scrubber import Scrubber

PLACEHOLDERS = ("branch", "base", "job_id", "repo", "report")
TIMEOUT_SECONDS = 300.0


def render_command(template: str, values: dict[str, str]) -> str:
    """Fill {branch}, {base}, {job_id}, {repo} and {report}, each shell-quoted."""
    try:
        return template.format(**{k: shlex.quote(v) for k, v in values.items()})
    except (KeyError, IndexError, ValueError) as exc:
        raise BadInput(
            f"pull-request command {template!r}: unknown placeholder {exc}; "
            f"known: {', '.join('{' + p + '}' for p in PLACEHOLDERS)}"
        ) from None


def open_pull_request(
    template: str,
    *,
    repo: Path,
    branch: str,
    base: str,
    job_id: str,
    report: Path,
    scrubber: Scrubber,
) -> str:
    """Run the command; return what it said (scrubbed), e.g. the pull request's URL."""
    command = render_command(
        template,
        {
            "branch": branch,
            "base": base,
            "job_id": job_id,
            "repo": str(repo),
            "report": str(report),
        },
    )
    result = proc.run(command, cwd=repo, timeout=TIMEOUT_SECONDS, idle_timeout=TIMEOUT_SECONDS)
    output = scrubber.scrub(result.output.strip())
    tail = output.splitlines()[-1] if output else ""
    if not result.passed:
        why = f"{result.timed_out} timeout" if result.timed_out else f"exit {result.exit_code}"
        return f"pull-request command failed ({why}): {tail}"
    return tail or "pull-request command succeeded (it printed nothing)"
