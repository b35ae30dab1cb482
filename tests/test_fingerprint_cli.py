"""`patchheal fingerprint`: JSON and text output, stdin, and bad input in bounded time/memory."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "data"))
from corpus_index import runs

KEYS = {
    "fingerprint",
    "classification",
    "retryable",
    "error_type",
    "message",
    "summary",
    "source",
    "frames",
    "failing_tests",
    "evidence",
    "next_actions",
    "log_bytes",
}


def _cli(
    *args: str, stdin: bytes | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "patchheal", "fingerprint", *args],
        input=stdin,
        capture_output=True,
        timeout=timeout,
    )


def _run(bug: str):  # type: ignore[no-untyped-def]
    return next(r for r in runs() if r.bug == bug)


def test_json_output() -> None:
    run = _run("pt_assert")
    done = _cli(str(run.log), "--json")
    assert done.returncode == 0, done.stderr
    payload = json.loads(done.stdout)
    assert set(payload) == KEYS
    assert payload["classification"] == "code_bug"
    assert payload["retryable"] is True
    assert payload["failing_tests"] == ["tests/test_pricing.py::test_total_applies_discount"]
    assert all(frame["in_project"] for frame in payload["frames"])
    assert payload["evidence"]
    assert payload["next_actions"]


def test_stdin_gives_the_same_answer_and_junit_option_works() -> None:
    run = _run("pt_junit")
    assert run.junit is not None
    from_file = json.loads(_cli(str(run.log), "--junit", str(run.junit), "--json").stdout)
    from_stdin = json.loads(
        _cli("-", "--junit", str(run.junit), "--json", stdin=run.log.read_bytes()).stdout
    )
    assert from_file == from_stdin
    assert from_file["source"] == "junit"


def test_text_output_names_class_and_next_actions() -> None:
    done = _cli(str(_run("http_429").log))
    text = done.stdout.decode()
    assert done.returncode == 0
    assert "classification: infra_issue (retryable)" in text
    assert "evidence:" in text
    assert "next:" in text


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", "is empty"),
        (b"   \n\n", "is empty"),
        (os.urandom(200_000), "binary"),
        (b"\x00" * 70_000 + b"Traceback", "binary"),
    ],
    ids=["empty", "blank", "random-bytes", "nul-bytes"],
)
def test_bad_logs_exit_2_with_a_clear_message(tmp_path: Path, content: bytes, message: str) -> None:
    log = tmp_path / "job.log"
    log.write_bytes(content)
    done = _cli(str(log), "--json")
    assert done.returncode == 2
    assert message in done.stderr.decode()
    assert b"Traceback" not in done.stderr


def test_unreadable_missing_and_directory_exit_2(tmp_path: Path) -> None:
    assert _cli(str(tmp_path / "nope.log")).returncode == 2
    assert _cli(str(tmp_path)).returncode == 2
    log = tmp_path / "job.log"
    log.write_text("FAILED x\n")
    assert _cli(str(log), "--junit", str(tmp_path / "missing.xml")).returncode == 2
    bad_xml = tmp_path / "bad.xml"
    bad_xml.write_text("<testsuite><testcase")
    done = _cli(str(log), "--junit", str(bad_xml))
    assert done.returncode == 2
    assert b"not well-formed" in done.stderr
    if os.getuid() != 0:  # root reads anything
        log.chmod(0)
        assert _cli(str(log)).returncode == 2


@pytest.mark.slow
def test_a_2_gb_log_is_answered_in_bounded_memory_and_time(tmp_path: Path) -> None:
    """A 2 GB log (sparse: text at the start and the failure at the end) streams through."""
    run = _run("tb_zerodiv")
    log = tmp_path / "huge.log"
    tail = run.log.read_bytes()
    with log.open("wb") as out:
        out.write(b"INFO starting\n" * 5000)
        out.seek(2 * 1024**3 - len(tail))
        out.write(tail)
    code = (
        "import resource, subprocess, sys\n"
        "p = subprocess.run([sys.executable, '-m', 'patchheal', 'fingerprint', sys.argv[1], "
        "'--json'], capture_output=True)\n"
        "print(p.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
        "sys.stdout.write(p.stdout.decode())"
    )
    start = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", code, str(log)], capture_output=True, text=True, timeout=300
    )
    elapsed = time.monotonic() - start
    status, payload = done.stdout.split("\n", 1)
    code_rc, maxrss_kb = (int(x) for x in status.split())
    # The hole reads as NUL bytes: not text, but the sample at the start is, so it streams on.
    assert code_rc == 0, done.stderr
    assert json.loads(payload)["error_type"] == "ZeroDivisionError"
    assert maxrss_kb < 200 * 1024, f"peak RSS {maxrss_kb // 1024} MB"
    assert elapsed < 240
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss < 2 * 1024**2


PYTEST_LOG = """\
=================================== FAILURES ===================================
_______________________ test_bulk_discount_starts_at_ten _______________________

    def test_bulk_discount_starts_at_ten():
>       assert bulk_discount_percent(10) == 10
E       assert 0 == 10

tests/test_rules.py:11: AssertionError
=========================== short test summary info ============================
FAILED tests/test_rules.py::test_bulk_discount_starts_at_ten - assert 0 == 10
============================== 1 failed in 0.05s ===============================
"""


def test_next_actions_name_the_failing_test_not_a_placeholder(tmp_path: Path) -> None:
    """Regression (issue 34): `fingerprint LOG` printed `pytest -x TEST_ID` although the log
    names the test."""
    log = tmp_path / "ci.log"
    log.write_text(PYTEST_LOG)
    text = _cli(str(log)).stdout.decode()
    assert "pytest -x tests/test_rules.py::test_bulk_discount_starts_at_ten" in text
    assert "TEST_ID" not in text
    payload = json.loads(_cli(str(log), "--json").stdout)
    assert not any("TEST_ID" in action for action in payload["next_actions"])
