"""The results channel: where the harness's own collectors report per-test outcomes.

Per run, the harness opens a fresh directory outside the worktree (a
`results-<nonce>` directory under a private temp dir; in a Docker sandbox
session `/run/patchheal/results-<nonce>` in a capped tmpfs of the container,
read back through the engine: results/volume.py) and a random signing token. Both
reach the step only through its environment, never the proposer's context.
The collectors (`collectors/`: a pytest plugin loaded by PYTEST_PLUGINS, a
unittest hook loaded by sitecustomize, node's JUnit reporter through
NODE_OPTIONS) write there; `collect` reads what they wrote, drops records that
are unfinished or not signed with the token, and removes the directory.
A step may also declare its own JUnit XML (`results = "glob"`), read from the
worktree: weaker, since the step writes it, and said so in docs/verdict.md.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
import shutil
from collections.abc import Callable, Mapping
from pathlib import Path

from pydantic import BaseModel

from patchheal.harness.engine import leftovers
from patchheal.harness.results import monitor_log, twinchannel, untrusted
from patchheal.harness.results.evidence import Evidence, rewritten
from patchheal.harness.results.junit import parse_junit
from patchheal.models import MonitorEvent, TestResults, TestTrace

DIR_ENV = "PATCHHEAL_RESULTS_DIR"
TOKEN_ENV = "PATCHHEAL_RESULTS_TOKEN"
TRACE_ENV = "PATCHHEAL_TRACE"
NODE_JUNIT = "node-junit.xml"
# Failing tests whose trace is kept (as collectors/patchheal_trace.py bounds it).
MAX_TRACED_TESTS = 20
MAX_HELD_LINES = 64  # per test and record, as the monitor keeps them (patchheal_watch.py)
# Worst first, as in collectors/patchheal_results.py.
_RANK = {"error": 0, "failed": 1, "passed": 2, "xfailed": 3, "skipped": 4}


def _worst(before: str | None, now: str) -> str:
    if before is None:
        return now
    return before if _RANK.get(before, 0) <= _RANK.get(now, 0) else now


class ResultsChannel:
    """One run's results directory and token; `close()` removes the directory."""

    def __init__(self, *, trace: bool = False, on_host: bool = True) -> None:
        """A channel in a private temp dir of its own, or (`on_host=False`) only a nonce
        and token: the directory lives where the step runs and its harness reads it
        (`collect`'s `reader`). `trace`: the pytest collector traces what failing tests
        execute (evidence for localization; it slows a test run down, so only the
        reproduction asks for it)."""
        self.trace = trace
        self.nonce = secrets.token_hex(8)
        self.token = secrets.token_hex(32)
        self._root = leftovers.make_temp_dir("patchheal-results-") if on_host else None
        if self._root is not None:
            self.host_dir.mkdir()
            # A container's user is not the host user; the private parent (0700)
            # keeps other host users out, the nonce keeps the path unguessable.
            self.host_dir.chmod(0o777)

    @property
    def host_dir(self) -> Path:
        """The run's directory on the host (a channel made `on_host`)."""
        assert self._root is not None, "this channel's directory is not on the host"
        return self._root / f"results-{self.nonce}"

    def environment(
        self, base: Mapping[str, str], *, results_dir: str, collectors: str
    ) -> dict[str, str]:
        """`base` plus the variables that load the collectors and point them here."""
        env = dict(base)
        env[DIR_ENV] = results_dir
        env[TOKEN_ENV] = self.token
        # Alike in every run; the impossible twin's carries its changes (twinchannel.py).
        env[twinchannel.ENV] = twinchannel.blob()
        if self.trace:
            env[TRACE_ENV] = "1"
        env["PYTHONPATH"] = ":".join(filter(None, (collectors, base.get("PYTHONPATH"))))
        env["PYTEST_PLUGINS"] = ",".join(
            filter(None, ("patchheal_pytest", base.get("PYTEST_PLUGINS")))
        )
        node = (
            f"--test-reporter=tap --test-reporter-destination=stdout "
            f"--test-reporter=junit --test-reporter-destination={results_dir}/{NODE_JUNIT}"
        )
        env["NODE_OPTIONS"] = " ".join(filter(None, (base.get("NODE_OPTIONS"), node)))
        return env

    def collect(
        self,
        worktree: Path | None = None,
        declared: str | None = None,
        reader: Callable[[untrusted.Budget], list[untrusted.Entry]] | None = None,
    ) -> TestResults | None:
        """What the collectors (and a declared JUnit glob in `worktree`) reported, or None.
        `reader` reads the run's directory where it lives (default: on the host)."""
        outcomes: dict[str, str] = {}
        defined_in: dict[str, str] = {}
        runners: list[str] = []
        tampered: list[str] = []
        rejected: list[str] = []
        traces: dict[str, TestTrace] = {}
        errors: list[str] = []
        monitor: list[MonitorEvent] = []
        evidence = Evidence()
        held: dict[str, set[str]] = {}

        def merge(found: Mapping[str, str]) -> None:
            for test_id, outcome in found.items():
                outcomes[test_id] = _worst(outcomes.get(test_id), str(outcome))

        # Step-written files, read as hostile input (untrusted.py): regular files only,
        # capped in count and bytes; a refused file is listed with its reason.
        budget = untrusted.Budget()
        read = reader or (lambda b: untrusted.read_directory(self.host_dir, b))
        for entry in read(budget):
            if entry.refused:
                rejected.append(f"{entry.name} ({entry.refused})")
            elif entry.name.endswith(".json"):
                record = _verified(entry.data, self.token)
                if record is None:
                    rejected.append(entry.name)
                    continue
                runners.append(record.runner)
                if record.collector_error:
                    errors.append(f"{record.runner}: {record.collector_error[:300]}")
                merge(record.outcomes)
                defined_in.update(record.defined_in)
                tampered += [f"{record.runner}: {t}" for t in record.tampered]
                tampered += rewritten(record.runner, record.outcomes, record.streamed)
                _add_traces(traces, record.traces)
                evidence.add(record.evidence, record.evidence_kinds, record.sources)
                for test_id, lines in record.held.items():
                    held.setdefault(test_id, set()).update(lines[:MAX_HELD_LINES])
                found = monitor_log.from_record(record.runner, record.monitor, record.signed_by)
                monitor_log.merge(monitor, found)
            elif monitor_log.is_monitor_log(entry.name):
                events = monitor_log.read_log(entry.name, entry.data, self.token)
                if events is None:
                    rejected.append(entry.name)
                else:
                    monitor_log.merge(monitor, events)
            elif entry.name == NODE_JUNIT:
                parsed = parse_junit(entry.data)
                if isinstance(parsed, str):
                    rejected.append(f"{entry.name} ({parsed})")
                else:
                    runners.append("node")
                    merge(parsed)
            elif not entry.name.endswith(".part"):
                rejected.append(entry.name)
        if declared and worktree is not None:
            for entry in untrusted.read_glob(worktree, declared, budget):
                parsed = entry.refused or parse_junit(entry.data)
                if isinstance(parsed, str):
                    rejected.append(f"{entry.name} ({parsed})")
                else:
                    runners.append("junit")
                    merge(parsed)
        if not runners and not rejected:
            return None
        return TestResults(
            outcomes=outcomes,
            defined_in=defined_in,
            runners=tuple(runners),
            tampered=tuple(tampered),
            rejected=tuple(rejected),
            traces=traces,
            collector_errors=tuple(errors),
            monitor=tuple(monitor),
            asserted=evidence.asserted(),
            evidence_kinds=tuple(sorted(evidence.kinds)),
            sources={f: tuple(sorted(h)) for f, h in evidence.sources.items()},
            held={t: tuple(sorted(lines)) for t, lines in held.items()},
        )

    def close(self) -> None:
        if self._root is not None:
            shutil.rmtree(self._root, ignore_errors=True)


class _Record(BaseModel):
    """What a collector writes (collectors/patchheal_results.py `write`)."""

    runner: str
    finished: bool
    outcomes: dict[str, str] = {}
    defined_in: dict[str, str] = {}
    tampered: list[str] = []
    collector_error: str = ""
    """The collector's own internal error: it stopped observing (collectors/patchheal_guard.py)."""
    monitor: list[object] = []
    signed_by: dict[str, object] = {}
    # Added by the monitor from its own closure (collectors/patchheal_watch.py `sign`).
    streamed: dict[str, str] = {}
    """Each test's outcome as the runner reported it, streamed to the monitor as it ran."""
    evidence: dict[str, list[str]] = {}
    """'file:line' of each assertion seen passing from the test file's own frame, by test."""
    evidence_kinds: list[str] = []
    sources: dict[str, list[str]] = {}
    held: dict[str, list[str]] = {}
    """'file:line' of each impossible assertion of the twin seen holding, by test."""
    traces: dict[str, object] = {}
    """Step-controlled (the step runs in the collector's process): validated one by one in
    `_add_traces`, so a malformed trace never costs the record its outcomes."""


def _add_traces(into: dict[str, TestTrace], found: Mapping[str, object]) -> None:
    """The well-formed traces of `found`, bounded (TestTrace's limits, MAX_TRACED_TESTS)."""
    for test_id, raw in found.items():
        if len(into) >= MAX_TRACED_TESTS:
            return
        if len(test_id) > 1000 or test_id in into:
            continue
        try:
            into[test_id] = TestTrace.model_validate(raw)
        except ValueError:  # pydantic's ValidationError: an oversized or forged trace
            continue


def _verified(data: bytes, token: str) -> _Record | None:
    """The payload of a finished record signed with `token`, else None."""
    try:
        record = json.loads(data.decode("utf-8"))
        payload, mac = record["payload"], record["mac"]
        if not (isinstance(payload, str) and isinstance(mac, str)):
            return None
        # The same HMAC as collectors/patchheal_results.py `sign`.
        expected = hmac.new(token.encode(), payload.encode(), hashlib.sha256).hexdigest()
        if not hmac.compare_digest(expected, mac):
            return None
        body = _Record.model_validate_json(payload)
    except (OSError, ValueError, KeyError, TypeError):  # pydantic's ValidationError is a ValueError
        return None
    return body if body.finished else None
