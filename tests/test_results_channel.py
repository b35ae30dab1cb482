"""The harness's results channel: signed records in, the rest rejected, nothing left behind."""

from __future__ import annotations

import hashlib
import hmac
import json
import subprocess
import sys
from pathlib import Path

from patchheal.harness.local.harness import LocalHarness
from patchheal.harness.results.channel import ResultsChannel


def _record(channel: ResultsChannel, body: dict[str, object], *, key: str | None = None) -> str:
    payload = json.dumps(body)
    mac = hmac.new((key or channel.token).encode(), payload.encode(), hashlib.sha256).hexdigest()
    return json.dumps({"payload": payload, "mac": mac})


def test_only_finished_records_signed_with_the_runs_token_are_believed() -> None:
    """A record the step writes without the token, or an unfinished one, is rejected by name."""
    channel = ResultsChannel()
    try:
        good = {"runner": "pytest", "finished": True, "outcomes": {"t::a": "passed"}}
        (channel.host_dir / "pytest-1.json").write_text(_record(channel, good))
        forged = {"runner": "pytest", "finished": True, "outcomes": {"t::b": "passed"}}
        (channel.host_dir / "pytest-2.json").write_text(_record(channel, forged, key="guess"))
        unfinished = {"runner": "unittest", "finished": False, "outcomes": {"t.c": "passed"}}
        (channel.host_dir / "unittest-3.json").write_text(_record(channel, unfinished))
        (channel.host_dir / "pytest-4.part").write_text("half written")
        (channel.host_dir / "notes.txt").write_text("all passed")
        results = channel.collect()
    finally:
        channel.close()
    assert results is not None
    assert results.outcomes == {"t::a": "passed"}
    assert results.runners == ("pytest",)
    assert set(results.rejected) == {"pytest-2.json", "unittest-3.json", "notes.txt"}
    assert not channel.host_dir.exists()


def test_junit_ids_name_the_enclosing_suites_and_keep_the_worst_outcome(tmp_path: Path) -> None:
    channel = ResultsChannel()
    try:
        (tmp_path / "out").mkdir()
        (tmp_path / "out" / "r.xml").write_text(
            '<testsuites><testsuite name="math"><testsuite name="add">'
            '<testcase name="small"/><testcase name="big"><failure/></testcase>'
            '</testsuite><testcase name="skip"><skipped/></testcase></testsuite>'
            '<testcase name="small" classname="math.add"><error/></testcase></testsuites>'
        )
        results = channel.collect(tmp_path, "out/*.xml")
    finally:
        channel.close()
    assert results is not None
    assert results.outcomes == {
        "math.add.small": "error",
        "math.add.big": "failed",
        "math.skip": "skipped",
    }


def test_a_local_run_reports_by_id_and_leaves_nothing_in_the_worktree(tmp_path: Path) -> None:
    """The collectors live in the package, the results outside the worktree: git sees nothing."""
    tree = tmp_path / "tree"
    (tree / "tests").mkdir(parents=True)
    (tree / "tests" / "test_x.py").write_text(
        "def test_ok():\n    pass\n\n\ndef test_bad():\n    assert 0\n"
    )
    subprocess.run(["git", "init", "-q"], cwd=tree, check=True)
    result = LocalHarness().run(
        f"{sys.executable} -m pytest -q -p no:cacheprovider tests",
        tree,
        timeout=120,
        idle_timeout=120,
    )
    assert result.tests is not None
    assert result.tests.outcomes == {
        "tests/test_x.py::test_ok": "passed",
        "tests/test_x.py::test_bad": "failed",
    }
    assert result.tests.defined_in["tests/test_x.py::test_ok"] == "tests/test_x.py"
    status = subprocess.run(
        ["git", "status", "--porcelain", "--ignored"], cwd=tree, capture_output=True, text=True
    ).stdout
    assert status.split() == ["??", "tests/"]
    assert "PATCHHEAL_RESULTS" not in result.output


def test_a_step_that_is_not_a_test_runner_has_no_results(tmp_path: Path) -> None:
    result = LocalHarness().run("echo 3 passed", tmp_path, timeout=30, idle_timeout=30)
    assert result.tests is None
