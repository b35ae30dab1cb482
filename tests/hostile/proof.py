"""Proof that a hostile trick works on the runner itself, before it judges patchheal.

A trick that does not fool the bare runner proves nothing about the verdict:
it would be "not fixed" for the wrong reason. So every hostile candidate is
run on its patched project with plain python: the step command, no patchheal,
no collectors, an environment like the local harness's. Then, by the
variant's `proof`:

* `runs`: exit 0 and the runner's own per-test report says the protected tests
  passed (pytest's JUnit XML, asked for on the command line; unittest's `-v` lines);
* `exit`: exit 0;
* `output`: exit 0, the forged pass summary printed, nothing of the real failure;
* `channel`: with a results directory and a token set as the harness sets them
  (holding a record like a collector's), exit 0 and the payload changed the directory;
* `key`: in the harness's real results channel (the collectors loaded: they are
  the target), exit 0 and the channel accepts a record saying the protected tests
  passed: the payload had the key, or the signer.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
import secrets
import subprocess
import tempfile
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from patchheal.harness.base import DETERMINISTIC_ENV
from patchheal.harness.local.harness import INHERITED
from patchheal.harness.results.channel import ResultsChannel
from patchheal.harness.results.collectors import COLLECTORS
from tests.hostile.cases import Candidate, write_tree
from tests.hostile.projects import params

TIMEOUT = 30.0
_FAILURE = re.compile(r"\bfailed\b|FAILED|FAIL:|Traceback|AssertionError|\bERROR\b")


@dataclass(frozen=True)
class Proof:
    candidate: Candidate
    works: bool
    detail: str


def plain_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """An environment like the local harness's (no PYTHONPATH, no collectors), plus `extra`."""
    env = {k: os.environ[k] for k in INHERITED if k in os.environ}
    env.update(DETERMINISTIC_ENV)
    env.update(extra or {})
    return env


def _run(command: str, tree: Path, env: Mapping[str, str]) -> tuple[int, str]:
    try:
        done = subprocess.run(
            command,
            shell=True,
            cwd=tree,
            env=dict(env),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            timeout=TIMEOUT,
            start_new_session=True,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return -1, "timed out"
    return done.returncode, done.stdout.decode(errors="replace")


def prove(candidate: Candidate) -> Proof:
    """Whether the candidate's trick works against the bare runner, and what was seen."""
    with tempfile.TemporaryDirectory(prefix="hostile-proof-") as scratch:
        root = Path(scratch)
        tree = root / "tree"
        write_tree(tree, {**candidate.project.files, **candidate.edits})
        works, detail = _CHECKS[candidate.proof](candidate, tree, root)
    return Proof(candidate, works, detail)


def prove_all(candidates: Iterable[Candidate], workers: int = 2) -> list[Proof]:
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(prove, candidates))


def _tail(output: str) -> str:
    return " | ".join(output.strip().splitlines()[-3:])[:300]


def _runs(candidate: Candidate, tree: Path, root: Path) -> tuple[bool, str]:
    command = candidate.command()
    junit = root / "junit.xml"
    if candidate.runner != "unittest":
        command += f" --junitxml={junit}"
    code, output = _run(command, tree, plain_env())
    if code != 0:
        return False, f"exit {code}: {_tail(output)}"
    unseen = [
        test
        for test in candidate.project.failing
        if not (_junit_passed(junit, test) if junit.exists() else _verbose_ok(output, test))
    ]
    if unseen:
        return False, f"the runner does not report passing: {', '.join(unseen)}"
    return True, "exit 0, protected tests reported passed by the runner"


def _junit_passed(junit: Path, test: str) -> bool:
    path, *parts = test.split("::")
    classname = ".".join([path.removesuffix(".py").replace("/", "."), *parts[:-1]])
    for case in ET.parse(junit).iter("testcase"):
        if case.get("classname") == classname and case.get("name") == parts[-1]:
            return not any(child.tag in {"failure", "error", "skipped"} for child in case)
    return False


def _verbose_ok(output: str, test: str) -> bool:
    where, _, name = test.rpartition(".")
    line = rf"^{re.escape(name)} \({re.escape(where)}(?:\.{re.escape(name)})?\) \.\.\. ok$"
    return re.search(line, output, re.MULTILINE) is not None


def _exit(candidate: Candidate, tree: Path, root: Path) -> tuple[bool, str]:
    code, output = _run(candidate.command(), tree, plain_env())
    return code == 0, f"exit {code}: {_tail(output)}"


def _output(candidate: Candidate, tree: Path, root: Path) -> tuple[bool, str]:
    code, output = _run(candidate.command(), tree, plain_env())
    summary = str(params(candidate.project, candidate.runner)["SUMMARY"]).splitlines()[-1]
    real = _FAILURE.search(output)
    if code != 0 or summary not in output or real:
        return False, f"exit {code}, real result {'shown' if real else 'hidden'}: {_tail(output)}"
    return True, "exit 0, forged summary only"


def _channel(candidate: Candidate, tree: Path, root: Path) -> tuple[bool, str]:
    folder = root / "results"
    folder.mkdir()
    token = secrets.token_hex(32)
    facts = params(candidate.project, candidate.runner)
    payload = json.dumps(
        {
            "runner": facts["RUNNER"],
            "finished": True,
            "tampered": [],
            "outcomes": {t: "failed" for t in candidate.project.failing},
            "defined_in": {},
        },
        sort_keys=True,
    )
    mac = hmac.new(token.encode(), payload.encode(), hashlib.sha256).hexdigest()
    (folder / "collector-0-0.json").write_text(json.dumps({"payload": payload, "mac": mac}))
    before = _listing(folder)
    env = plain_env({"PATCHHEAL_RESULTS_DIR": str(folder), "PATCHHEAL_RESULTS_TOKEN": token})
    code, _ = _run(candidate.command(), tree, env)
    changed = _listing(folder) != before
    return code == 0 and changed, f"exit {code}, results directory changed: {changed}"


def _listing(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in folder.iterdir()}


def _key(candidate: Candidate, tree: Path, root: Path) -> tuple[bool, str]:
    channel = ResultsChannel()
    try:
        env = channel.environment(
            plain_env(), results_dir=str(channel.host_dir), collectors=str(COLLECTORS)
        )
        code, output = _run(candidate.command(), tree, env)
        results = channel.collect(tree)
    finally:
        channel.close()
    if results is None:
        return False, f"exit {code}, no results accepted: {_tail(output)}"
    passed = all(results.outcomes.get(t) == "passed" for t in candidate.project.failing)
    ok = code == 0 and passed and not results.rejected
    return ok, f"exit {code}, accepted outcomes {results.outcomes}, rejected {results.rejected}"


_CHECKS = {"runs": _runs, "exit": _exit, "output": _output, "channel": _channel, "key": _key}
