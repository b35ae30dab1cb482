"""Next actions per failure class: what to check and which command to run."""

from __future__ import annotations

import shlex
from collections.abc import Iterable

from patchheal.models import FailureClass

# The runbooks' placeholder for a failing test's id.
TEST_ID = "TEST_ID"


def with_test_id(actions: Iterable[str], failing_tests: Iterable[str]) -> tuple[str, ...]:
    """The actions with `TEST_ID` replaced by the first failing test (shell-quoted), when
    the failure names one; unchanged otherwise."""
    first = next(iter(failing_tests), None)
    if first is None:
        return tuple(actions)
    return tuple(a.replace(TEST_ID, shlex.quote(first)) for a in actions)


RUNBOOKS: dict[FailureClass, tuple[str, ...]] = {
    FailureClass.CODE_BUG: (
        "Reproduce the failing test alone: `pytest -x TEST_ID` (or the step's own command).",
        "Read the first in-project frame of the failure: `patchheal fingerprint LOG --json`.",
        "Let patchheal propose and verify a fix: `patchheal heal JOB.toml`; "
        "then review the attempts: `patchheal attempts`.",
    ),
    FailureClass.INFRA_ISSUE: (
        "Rerun the job: DNS failures, refused or reset connections, TLS hiccups, 5xx and 429 "
        "from external services are usually transient.",
        "Check the runner's resources: `df -h` (disk), `free -m` and `dmesg | grep -i oom` "
        "(memory; exit 137 is a SIGKILL, usually the OOM killer), `docker info` (engine).",
        "For memory: raise the job's memory limit or lower parallelism (e.g. `pytest -n 2`); "
        "for rate limits: add backoff or caching, or use a token with a higher quota.",
    ),
    FailureClass.ENV_MISMATCH: (
        "Check that the job's secrets and credentials exist and are passed through "
        "(`env = [...]` in the job spec; 401/403 mean missing or expired credentials).",
        "Compare runtimes between CI and the harness: `python -VV`, `pip freeze`, `node -v`, "
        "`uname -a`.",
        "Check the user and file permissions the step needs: `id`, `ls -ld PATH`.",
    ),
    FailureClass.DEPENDENCY_ISSUE: (
        "Install or pin the missing package: `pip install PACKAGE`, then add it to "
        "pyproject.toml/requirements (or `npm install PACKAGE --save`).",
        "Show the resolver conflict: `pip install --dry-run -r requirements.txt`, `pip check`, "
        "`npm ls` / `npm install --dry-run`.",
        "Regenerate and commit the lockfile (`pip-compile`, `uv lock`, `npm install`).",
    ),
    FailureClass.DATA_ISSUE: (
        "Check that the upstream job produced its artifact or input file: `ls -l INPUT` "
        "(size, timestamp) or `gh run view UPSTREAM_RUN`; rerun once it exists.",
        "Validate the input before the step: `python -m jsonschema -i INPUT SCHEMA`, or count "
        "nulls and duplicate keys "
        "(`SELECT key, COUNT(*) FROM t GROUP BY key HAVING COUNT(*) > 1`).",
        "Fix or quarantine the offending records at the source; the code is not the problem.",
    ),
    FailureClass.FLAKY: (
        "Do not patch: the step passes on some runs (see the pass rate); rerun the job.",
        "Confirm the flake: `for i in $(seq 20); do pytest -x TEST_ID -p no:cacheprovider "
        "|| break; done`.",
        "Quarantine and track the test; look for order dependence (`pytest -p randomly`), "
        "time, randomness, shared state or external services.",
    ),
    FailureClass.UNKNOWN: (
        "Read the end of the log: `tail -n 200 LOG`.",
        "Fingerprint it to see what was recognised: `patchheal fingerprint LOG --json`.",
        "Rerun once to see whether it reproduces, then heal: `patchheal heal JOB.toml`.",
    ),
}


def runbook(failure_class: FailureClass) -> tuple[str, ...]:
    """The next actions for a failure class."""
    return RUNBOOKS[FailureClass(failure_class)]
