"""Failure classification: why a step fails, whether patching or retrying can help, and why.

Evidence is looked for first in the failure itself (type, message, excerpt),
then in the last lines of the log, then in what the harness saw (exit code,
OOM kill, timeout). Rules are ordered: resource exhaustion, missing modules
and resolver conflicts, data, credentials and environment, then transient
infrastructure. A parsed exception with nothing else to say is a code bug.

`retryable` means a patch or a rerun can help: true for code bugs, transient
infrastructure, missing upstream artifacts and flakes; false for what needs a
person to change the environment, dependencies, resources or data. Only
`code_bug` and `unknown` are ever patched (`models.PATCHABLE_CLASSES`).
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

from patchheal.failure import setup_advice
from patchheal.failure.normalize import clean, normalize_message
from patchheal.failure.runbooks import runbook
from patchheal.models import Classification, Failure, FailureClass
from patchheal.scrub.active import scrub

__all__ = ["classify", "flaky", "runbook"]

TAIL_LINES = 200
MAX_EVIDENCE = 5
C = FailureClass


@dataclass(frozen=True)
class Rule:
    name: str
    failure_class: FailureClass
    retryable: bool
    pattern: re.Pattern[str]
    strong: bool  # found anywhere in the log's tail, it outweighs a parsed exception


def _rule(
    name: str, cls: FailureClass, retryable: bool, pattern: str, strong: bool = False
) -> Rule:
    return Rule(name, cls, retryable, re.compile(pattern), strong)


# Something outside the process stopped it for memory (the kernel, the engine, a shell's
# report of a SIGKILL), as opposed to an allocation failing inside it (MemoryError).
_KILLED_FOR_MEMORY = (
    r"\bOOMKilled\b|(?i:out of memory)|Cannot allocate memory|oom-kill"
    r"|Killed process \d+|exit (?:code|status) 137\b|\bsignal 9\b|SIGKILL|(?:^|\s)Killed\b"
)
_DATA_FILE = r"[\w./<>-]*\.(?:csv|tsv|json|jsonl|parquet|xlsx?|xml|ya?ml|db|sqlite3?|pkl|pickle|npy|npz|h5|avro|orc|txt|gz|zip)\b"  # noqa: E501
RULES: tuple[Rule, ...] = (
    _rule(
        "out of memory",
        C.INFRA_ISSUE,
        False,
        rf"\bMemoryError\b|{_KILLED_FOR_MEMORY}",
        strong=True,
    ),
    _rule(
        "no space left on device",
        C.INFRA_ISSUE,
        False,
        r"No space left on device|\bENOSPC\b|Disk quota exceeded",
        strong=True,
    ),
    _rule(
        "dependency resolver conflict",
        C.DEPENDENCY_ISSUE,
        False,
        r"ResolutionImpossible|conflicting dependencies|Could not find a version that satisfies"
        r"|No matching distribution found|\bERESOLVE\b|unable to resolve dependency tree"
        r"|(?i:peer dep\w* conflict)|VersionConflict|version solving failed|DistributionNotFound",
        strong=True,
    ),
    _rule(
        "missing upstream artifact",
        C.DATA_ISSUE,
        True,
        r"(?i:artifacts?\b[^\n]{0,60}\b(?:not found|missing|does not exist|unavailable))"
        r"|Unable to download artifact|No artifacts? (?:were )?found",
    ),
    _rule(
        "missing input file",
        C.DATA_ISSUE,
        False,
        r"(?:FileNotFoundError|No such file or directory)[^\n]{0,40}?" + _DATA_FILE,
    ),
    _rule(
        "schema or constraint violation",
        C.DATA_ISSUE,
        False,
        r"IntegrityError|(?:UNIQUE|NOT NULL|FOREIGN KEY|CHECK) constraint failed"
        r"|violates (?:not-null|unique|foreign key|check) constraint|duplicate key value"
        r"|SchemaError|(?i:schema (?:mismatch|violation|validation failed))|Failed validating"
        r"|is not valid under any of the given schemas|Error tokenizing data"
        r"|Expected \d+ fields in line|invalid input syntax for",
    ),
    _rule(
        "missing credentials or secret",
        C.ENV_MISMATCH,
        False,
        r"\b40[13]\b[^\n]{0,30}(?:Unauthorized|Forbidden)|\b(?:Unauthorized|Forbidden)\b"
        r"|HTTP Error 40[13]|status(?: code)?[=: ]+40[13]\b|Bad credentials"
        r"|(?i:invalid (?:api[ _-]?key|token|credentials))|(?i:authentication failed)"
        r"|NoCredentialsError|Unable to locate credentials|could not read Username"
        r"|(?i:missing (?:credentials|secret|token|api key))"
        r"|(?i:(?:environment variable|env var)\b[^\n]{0,60}\b(?:not set|is required|missing))"
        r"|KeyError: '[A-Z0-9_]*(?:TOKEN|SECRET|KEY|PASSWORD|CREDENTIALS?|AUTH)[A-Z0-9_]*'",
    ),
    _rule(
        "permission denied",
        C.ENV_MISMATCH,
        False,
        r"Permission denied|PermissionError|\bEACCES\b|Operation not permitted|\bEPERM\b"
        r"|Read-only file system",
    ),
    _rule(
        "runtime or tool missing",
        C.ENV_MISMATCH,
        False,
        r"command not found|: not found$|GLIBC_[\d.]+'? not found|requires a different Python"
        r"|(?i:unsupported python)|exec format error|(?i:no such option)",
    ),
    _rule(
        "DNS failure",
        C.INFRA_ISSUE,
        True,
        r"Temporary failure in name resolution|Name or service not known|Could not resolve host"
        r"|nodename nor servname|getaddrinfo (?:ENOTFOUND|EAI_AGAIN)|NameResolutionError"
        r"|Failed to resolve|no such host|\bEAI_AGAIN\b",
    ),
    _rule(
        "TLS error",
        C.INFRA_ISSUE,
        True,
        r"(?i:certificate verify failed)|\bSSLError\b|\[SSL[:\]]|SSL routines|\bx509: |\btls: "
        r"|(?i:handshake (?:failure|timed out))|unable to get local issuer certificate",
    ),
    _rule(
        "HTTP 5xx or 429 from a service",
        C.INFRA_ISSUE,
        True,
        r"\b(?:HTTP Error|HTTPError|status(?: code)?|Server Error|responded with|returned)\b"
        r"[:= ]{0,3}(?:429|5\d\d)\b|\b5\d\d (?:Server Error|Internal Server Error|Bad Gateway"
        r"|Service Unavailable|Gateway Time-?out)|Too Many Requests"
        r"|(?i:rate[ _]limit(?:ed|[ _]exceeded|[ _]reached))"
        # A model provider's SDK (openai, anthropic): `RateLimitError: Error code: 429 - ...`.
        r"|\bRateLimitError\b|\bError code: (?:429|5\d\d)\b|\bOverloadedError\b",
    ),
    _rule(
        "connection failure",
        C.INFRA_ISSUE,
        True,
        r"Connection refused|\bECONNREFUSED\b|Connection reset by peer|\bECONNRESET\b"
        r"|Network is unreachable|No route to host|Failed to establish a new connection"
        r"|Max retries exceeded|RemoteDisconnected|Connection aborted",
    ),
    _rule(
        "timeout",
        C.INFRA_ISSUE,
        True,
        r"(?i:read timed out|connect(?:ion)? timed out|operation timed out)|ReadTimeout"
        r"|ConnectTimeout|\bTimeoutError\b|socket\.timeout|(?i:deadline exceeded)|\bETIMEDOUT\b"
        r"|: timed out$",
    ),
    _rule(
        "container engine or runner",
        C.INFRA_ISSUE,
        True,
        r"Cannot connect to the Docker daemon|error during connect|toomanyrequests"
        r"|runner has received a shutdown signal|lost communication with the server",
        strong=True,
    ),
)
# `python -m pytest` without pytest says `No module named pytest`, unquoted.
_MISSING_MODULE = re.compile(
    r"No module named '?(?P<py>[\w.]+)'?|Cannot find module '(?P<js>[^']+)'"
)
# Test runners and their plugins: when one is missing the environment is wrong, not the code.
_TEST_TOOLS = re.compile(
    r"^(?:pytest|_pytest|pytest_\w+|xdist|pluggy|nose2?|tox|nox|coverage|hypothesis|mock"
    r"|unittest2|jest|mocha|vitest|ts-node)$"
)
_EXIT_CODES: dict[int, tuple[FailureClass, bool, str]] = {
    137: (C.INFRA_ISSUE, False, "exit code 137: killed by SIGKILL (usually the OOM killer)"),
    143: (C.INFRA_ISSUE, True, "exit code 143: terminated by SIGTERM (cancelled or preempted)"),
    127: (C.ENV_MISMATCH, False, "exit code 127: a command was not found"),
    126: (C.ENV_MISMATCH, False, "exit code 126: a command could not be executed"),
}


def _lines(text: str, rule: Rule) -> list[str]:
    found = []
    for line in text.split("\n"):
        if rule.pattern.search(line):
            found.append(normalize_message(scrub(line.strip()))[:300])
            if len(found) >= MAX_EVIDENCE:
                break
    return found


def _make(
    cls: FailureClass,
    retryable: bool,
    evidence: list[str],
    actions: tuple[str, ...] = (),
) -> Classification:
    """A classification; `actions`, what this very failure needs, replace the class's runbook
    (whose generic advice, e.g. credentials for a missing install step, would only distract)."""
    unique = tuple(dict.fromkeys(e for e in evidence if e))[:MAX_EVIDENCE]
    return Classification(
        failure_class=cls,
        retryable=retryable,
        evidence=unique,
        next_actions=actions or runbook(cls),
        pass_rate=None,
    )


def _module_in_project(name: str, failure: Failure, repo_root: str | None) -> bool:
    if name.startswith((".", "/")):
        return True  # a relative import or path is the project's own
    top = re.split(r"[./]", name.lstrip("@"))[0]
    if repo_root:
        root = Path(repo_root)
        return any(
            (base / top).exists() or (base / f"{top}.py").exists()
            for base in (root, root / "src", root / "lib")
        )
    parts = {p.removesuffix(".py") for f in failure.project_frames for p in f.file.split("/")}
    parts |= {re.split(r"[/.:]", t)[0] for t in failure.failing_tests}
    return top in parts


def _reproduce_alone(failure: Failure) -> tuple[str, ...]:
    """The code-bug runbook with the runner's own way to rerun one failing test, for a
    runner that is not pytest (the runbook's `pytest -x TEST_ID`)."""
    if failure.source != "node:test" or not failure.failing_tests:
        return ()
    file, _, name = failure.failing_tests[0].rpartition("::")
    leaf = name.split(" > ")[-1]
    command = f"node --test --test-name-pattern {shlex.quote(re.escape(leaf))} {shlex.quote(file)}"
    return (
        f"Reproduce the failing test alone: `{command}` (or the step's own command).",
        *runbook(C.CODE_BUG)[1:],
    )


_SYSTEM_LINE = re.compile(
    r"ZoneInfoNotFoundError|UnknownTimeZoneError|cannot open shared object file"
    r"|unsupported locale setting|No such file or directory: '[\w+-][\w.+-]*'"
)


def _system_lines(text: str) -> list[str]:
    """The log's own lines saying what the environment lacks (scrubbed, for the evidence)."""
    found = [line.strip() for line in text.split("\n") if _SYSTEM_LINE.search(line)]
    return [normalize_message(scrub(line))[:300] for line in found[:2]]


def _tool_actions(text: str) -> tuple[str, ...]:
    tool = setup_advice.tool_not_found(text)
    return setup_advice.tool_missing(tool) if tool else ()


# A traceback's listing of source code: pytest's `>` line and the code it indents by four
# spaces, the standard traceback's code lines under `File "...", line N`.
_SOURCE_LINE = re.compile(r"^(?:>|    |\t)")


def _not_source(summary: str) -> str:
    """The failure's own words without the source code its traceback lists: a library's
    code that *handles* a timeout (`raise ReadTimeoutError(..., 'Read timed out.')`, shown
    by pytest's long traceback of a test that failed for another reason) is no evidence
    that the step timed out. The `E   ` lines, the locations and the messages stay."""
    return "\n".join(line for line in summary.split("\n") if not _SOURCE_LINE.match(line))


def _memory_error_in_test(failure: Failure, tail: str, exit_code: int | None) -> list[str]:
    """Evidence that a named test itself ran out of memory, or nothing.

    A `MemoryError` that a test raised and the runner reported, the runner alive to
    report it, is the test's own allocation failing under its process's data limit
    (the sandbox's `process_memory`): the rest of the step ran in the same memory, so
    the code under test is what asks for too much (it consumes an infinite iterator,
    say), and a patch can help. Without a named test, or when the step was killed, it
    stays a resource problem (the "out of memory" rule).
    """
    if failure.error_type.rpartition(".")[2] != "MemoryError" or not failure.failing_tests:
        return []
    if exit_code is not None and not 0 < exit_code < 128:
        return []  # killed by a signal (137: SIGKILL), or it did not fail at all
    if re.search(_KILLED_FOR_MEMORY, tail, re.MULTILINE):
        return []
    first = failure.failing_tests[0]
    return [
        f"MemoryError raised inside test {first}; the runner survived and reported it",
        "the test's own allocation exceeded its process's memory, not the machine's",
        *(f"in-project frame {f.file}:{f.line}" for f in failure.project_frames[-2:]),
    ]


def classify(
    failure: Failure,
    log: str,
    *,
    exit_code: int | None = None,
    oom_killed: bool = False,
    timed_out: str | None = None,
    repo_root: str | None = None,
    stopped: str | None = None,
) -> Classification:
    """Classify a failure from its parsed form, the log's tail and what the harness saw."""
    if oom_killed:
        return _make(C.INFRA_ISSUE, False, ["the container was OOM-killed"])
    if stopped:  # a limit of the harness's run (the worktree's size), not the project's code
        return _make(
            C.INFRA_ISSUE,
            False,
            [f"the run was stopped: {stopped}"],
            (
                "Raise the limit in the harness's [sandbox] worktree_size (or 'off'), or find "
                "what the step writes into its worktree: `du -sh` after a run of the step.",
            ),
        )
    own = "\n".join((failure.error_type, failure.message, _not_source(failure.summary)))
    tail = "\n".join(clean(log[-256 * 1024 :]).split("\n")[-TAIL_LINES:])
    exhausted = _memory_error_in_test(failure, tail, exit_code)
    if exhausted:
        return _make(C.CODE_BUG, True, exhausted, _reproduce_alone(failure))
    missing = _MISSING_MODULE.search(own) or _MISSING_MODULE.search(tail)
    if missing:
        name = missing["py"] or missing["js"]
        line = normalize_message(scrub(missing.group(0)))
        where = setup_advice.module_location(name, repo_root) if repo_root else None
        if where is not None:
            # In the tree yet not importable: the job's setup does not install the project,
            # and every patch (the right one too) would fail the same way.
            return _make(
                C.ENV_MISMATCH,
                False,
                [line, f"'{name}' is the project's own ({where}) but nothing installs it"],
                setup_advice.project_not_importable(name, where, repo_root or "."),
            )
        made = setup_advice.generated_module(name, repo_root) if repo_root else None
        if made is not None:
            # The project's package is there, this module is what its setup makes (a version
            # file, an extension): the harness lacks the setup's output, every patch fails.
            return _make(
                C.ENV_MISMATCH,
                False,
                [line, f"'{name}' is absent from the tree: {made}"],
                setup_advice.generated_missing(name, made, repo_root or "."),
            )
        if _module_in_project(name, failure, repo_root):
            return _make(C.CODE_BUG, True, [line, f"'{name}' belongs to the project"])
        if _TEST_TOOLS.match(name.split(".")[0]):
            return _make(
                C.ENV_MISMATCH,
                False,
                [line, f"'{name}' is a test tool, not installed"],
                setup_advice.tool_missing(name.split(".")[0]),
            )
        return _make(C.DEPENDENCY_ISSUE, False, [line, f"'{name}' is not part of the project"])
    # A parsed exception in the project is its own best evidence: then only strong rules
    # (resources, resolver, runner) may overrule it from elsewhere in the log.
    code_like = bool(failure.error_type and (failure.failing_tests or failure.project_frames))
    lacking = setup_advice.missing_system_piece(own) or (
        None if code_like else setup_advice.missing_system_piece(tail)
    )
    if lacking is not None:
        what, actions = lacking
        return _make(C.ENV_MISMATCH, False, [what, *_system_lines(own + "\n" + tail)], actions)
    for text, strong_only in ((own, False), (tail, code_like)):
        for rule in RULES:
            if strong_only and not rule.strong:
                continue
            evidence = _lines(text, rule)
            if evidence:
                return _make(
                    rule.failure_class,
                    rule.retryable,
                    [f"{rule.name}:", *evidence],
                    _tool_actions(tail) if rule.name == "runtime or tool missing" else (),
                )
    if exit_code in _EXIT_CODES:
        cls, retryable, why = _EXIT_CODES[exit_code]
        return _make(cls, retryable, [why], _tool_actions(tail) if exit_code == 127 else ())
    if timed_out:
        return _make(C.INFRA_ISSUE, True, [f"the step hit its {timed_out} timeout"])
    if failure.error_type or failure.failing_tests or failure.project_frames:
        evidence = [f"{failure.error_type}: {failure.message.split(chr(10))[0]}".strip(": ")]
        evidence += [f"failing test {t}" for t in failure.failing_tests[:3]]
        # (Not `.rstrip(" in")`: that strips characters, and ate the end of `mean`.)
        evidence += [
            f"in-project frame {f.file}:{f.line}" + (f" in {f.function}" if f.function else "")
            for f in failure.project_frames[-2:]
        ]
        return _make(C.CODE_BUG, True, evidence, _reproduce_alone(failure))
    return _make(C.UNKNOWN, True, [failure.message[:300]] if failure.message else [])


def flaky(failure: Failure, *, passes: int, runs: int) -> Classification:
    """A step that passed `passes` of `runs` reruns: flaky (never patched), with its pass rate.

    A step that never passed is not flaky: it is returned as `unknown` with pass rate 0.
    """
    if runs <= 0 or not 0 <= passes <= runs:
        raise ValueError(f"flaky(): need 0 <= passes <= runs and runs > 0, got {passes}/{runs}")
    rate = round(passes / runs, 4)
    evidence = (
        f"passed {passes} of {runs} runs (pass rate {rate:.0%})",
        f"fingerprint {failure.fingerprint} when it fails",
    )
    if passes == 0:
        return Classification(
            failure_class=C.UNKNOWN,
            retryable=True,
            evidence=evidence,
            next_actions=runbook(C.UNKNOWN),
            pass_rate=0.0,
        )
    return Classification(
        failure_class=C.FLAKY,
        retryable=True,
        evidence=evidence,
        next_actions=runbook(C.FLAKY),
        pass_rate=rate,
    )
