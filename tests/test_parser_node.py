"""Node's test runner: failing test ids and a readable message from its TAP output, and
next actions that rerun the test with node, not pytest (issue 27).

`data/node/node20-tap.log` is what `node --test` (Node 20.20) printed, off a terminal,
for `data/node/sum.test.js` over `data/node/sum.js` (a subtraction where a sum belongs).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from patchheal.failure.analysis import analyze
from patchheal.failure.classify import classify

DATA = Path(__file__).parent / "data" / "node"
LOG = (DATA / "node20-tap.log").read_text()


def test_a_node_tap_log_gives_failing_test_ids_and_the_assertion() -> None:
    """Invariant: each failing leaf test is a failing test id (a suite failed only by its
    subtests is not), and the message is the assertion, not the YAML header `error: |-`."""
    failure = analyze(LOG)
    assert failure.source == "node:test"
    assert [t.split("::", 1)[1] for t in failure.failing_tests] == [
        "adds two numbers",
        "group > nested adds",
    ]
    assert all(t.endswith("sum.test.js::" + t.split("::", 1)[1]) for t in failure.failing_tests)
    assert failure.error_type == "AssertionError"
    assert failure.message.startswith("Expected values to be strictly equal:")
    assert "|-" not in failure.message
    assert failure.frames[-1].file.endswith("sum.test.js")
    assert failure.frames[-1].line == 4


def test_the_fingerprint_of_a_node_log_suggests_node_not_pytest() -> None:
    """Invariant: `patchheal fingerprint` on a node log never tells the user to run pytest;
    it prints the node command that reruns the failing test alone."""
    done = subprocess.run(
        [sys.executable, "-m", "patchheal", "fingerprint", str(DATA / "node20-tap.log")],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "pytest" not in done.stdout
    assert "failing test:   " in done.stdout
    assert "node --test --test-name-pattern" in done.stdout


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_the_printed_node_command_reruns_the_failing_test(tmp_path: Path) -> None:
    """Invariant: the next action's command, run as printed in the project, runs the one
    failing test and fails (the others are skipped)."""
    (tmp_path / "test").mkdir()
    shutil.copy(DATA / "sum.js", tmp_path / "sum.js")
    shutil.copy(DATA / "sum.test.js", tmp_path / "test" / "sum.test.js")
    failure = analyze(LOG.replace("/tmp/ux-node/", f"{tmp_path}/"), repo_root=str(tmp_path))
    action = classify(failure, LOG, repo_root=str(tmp_path)).next_actions[0]
    command = action.split("`")[1]
    done = subprocess.run(
        ["bash", "-c", command], cwd=tmp_path, capture_output=True, text=True, timeout=120,
        check=False,
    )  # fmt: skip
    assert done.returncode == 1, done.stdout[-2000:]
    assert "# fail 1" in done.stdout
    assert "# pass 0" in done.stdout
