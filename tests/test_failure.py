"""Fingerprints on the recorded corpus, streaming analysis, similarity."""

from __future__ import annotations

import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

from patchheal.errors import BadInput
from patchheal.failure.analysis import (
    FINGERPRINT_LENGTH,
    SIMILARITY_THRESHOLD,
    analyze,
    analyze_file,
    canonical_test_id,
    similarity,
)
from patchheal.failure.parsers import sections

sys.path.insert(0, str(Path(__file__).resolve().parent / "data"))
from corpus_index import Run, manifest, runs


def _fingerprint(run: Run) -> str:
    return analyze_file(run.log, junit_path=run.junit).fingerprint


def _by_bug() -> dict[str, list[str]]:
    prints: dict[str, list[str]] = defaultdict(list)
    for run in runs():
        prints[run.bug].append(_fingerprint(run))
    return prints


def test_corpus_covers_every_format_and_class() -> None:
    kinds = {info["kind"] for info in manifest().values()}
    classes = {info["expected_class"] for info in manifest().values()}
    assert {"traceback", "pytest", "unittest", "junit", "compiler", "generic"} <= kinds
    assert classes == {
        "code_bug",
        "env_mismatch",
        "dependency_issue",
        "infra_issue",
        "data_issue",
        "flaky",
    }
    assert all(len(info["runs"]) >= 3 for info in manifest().values())


def test_fingerprint_is_stable_within_each_bug() -> None:
    """Invariant: reruns with other temp dirs, cwd, hash seeds, time zones and CI line
    timestamps give one fingerprint per bug (100% on the corpus)."""
    unstable = {bug: prints for bug, prints in _by_bug().items() if len(set(prints)) != 1}
    assert not unstable, f"unstable fingerprints: {unstable}"


def test_no_two_bugs_share_a_fingerprint() -> None:
    owners: dict[str, list[str]] = defaultdict(list)
    for bug, prints in _by_bug().items():
        owners[prints[0]].append(bug)
    collisions = {fp: bugs for fp, bugs in owners.items() if len(bugs) > 1}
    assert not collisions, f"different bugs share a fingerprint: {collisions}"


def test_fingerprint_format() -> None:
    fingerprint = _fingerprint(runs()[0])
    assert re.fullmatch(rf"[0-9a-f]{{{FINGERPRINT_LENGTH}}}", fingerprint)


def test_in_memory_and_streaming_analysis_agree() -> None:
    """The harness's captured output (analyze) and a CI log file (analyze_file) of the same
    run must agree, or the reproduction gate would call it an environment mismatch."""
    for run in runs():
        text = run.log.read_text()
        junit = run.junit.read_bytes() if run.junit else None
        assert analyze(text, junit=junit).fingerprint == _fingerprint(run), run.log


def test_repo_root_and_python_version_do_not_change_the_fingerprint(tmp_path: Path) -> None:
    run = next(r for r in runs() if r.bug == "tb_chained_cause")
    text = run.log.read_text()
    root = re.search(r'File "(/[^"]+)/app/config.py"', text)
    assert root is not None
    baseline = analyze(text).fingerprint
    assert analyze(text, repo_root=root.group(1)).fingerprint == baseline
    # Another checkout directory, another Python patch version with other stdlib line numbers.
    moved = text.replace(root.group(1), "/home/runner/work/shop/shop")
    moved = re.sub(r"python3\.\d+", "python3.12", moved)
    moved = re.sub(r'(lib/python3\.12/[^"]+", line )\d+', r"\g<1>999", moved)
    assert analyze(moved).fingerprint == baseline


def test_line_numbers_are_shown_but_not_hashed() -> None:
    run = next(r for r in runs() if r.bug == "tb_zerodiv")
    text = run.log.read_text()
    failure = analyze(text)
    assert [f.line for f in failure.project_frames if f.function == "mean"] == [2]
    shifted = re.sub(r'(stats\.py", line )2\b', r"\g<1>40", text)
    assert analyze(shifted).fingerprint == failure.fingerprint


def test_frames_say_which_are_in_the_project() -> None:
    run = next(r for r in runs() if r.bug == "auth_401")
    failure = analyze(run.log.read_text())
    assert any(f.file.startswith("<stdlib>/urllib/") and not f.in_project for f in failure.frames)
    assert [f.file for f in failure.project_frames] == ["repo/job.py"]


def test_failure_fields_on_a_pytest_run() -> None:
    run = next(r for r in runs() if r.bug == "pt_assert")
    failure = analyze(run.log.read_text())
    assert failure.source == "pytest"
    assert failure.error_type == "AssertionError"
    assert failure.message.startswith("assert 3.0 == 27")
    assert failure.failing_tests == ("tests/test_pricing.py::test_total_applies_discount",)
    assert ("tests/test_pricing.py", "test_total_applies_discount") in [
        (f.file, f.function) for f in failure.project_frames
    ]
    assert "<tmp>" in failure.summary
    assert "/tmp/" not in failure.summary


def test_junit_report_and_pytest_log_name_the_same_tests() -> None:
    run = next(r for r in runs() if r.bug == "pt_junit")
    assert run.junit is not None
    with_junit = analyze_file(run.log, junit_path=run.junit)
    log_only = analyze_file(run.log)
    assert with_junit.source == "junit"
    assert log_only.source == "pytest"
    assert with_junit.fingerprint == log_only.fingerprint
    assert {canonical_test_id(t) for t in with_junit.failing_tests} == {
        canonical_test_id(t) for t in log_only.failing_tests
    }


def test_secrets_in_a_failure_are_scrubbed_and_do_not_change_its_fingerprint() -> None:
    log = (
        "Traceback (most recent call last):\n"
        '  File "/srv/app/client.py", line 9, in call\n'
        "RuntimeError: upstream rejected token ghp_{}\n"
    )
    one = analyze(log.format("a" * 36))
    two = analyze(log.format("b" * 36))
    assert one.fingerprint == two.fingerprint
    assert "ghp_" not in one.message + one.summary
    assert "[REDACTED]" in one.message


def test_a_large_log_is_analyzed_in_bounded_memory(tmp_path: Path) -> None:
    """Streaming: the child's peak RSS does not grow with the log (6 MB vs 60 MB, the
    failure at the end). Compared with itself, so a machine's baseline does not matter."""
    run = next(r for r in runs() if r.bug == "tb_zerodiv")
    noise = b"".join(
        b"2024-05-01T12:00:00Z INFO step %d ok, nothing to see here\n" % i for i in range(20000)
    )
    code = (
        "import resource, sys\nfrom pathlib import Path\n"
        "from patchheal.failure.analysis import analyze_file\n"
        "f = analyze_file(Path(sys.argv[1]))\n"
        "print(f.fingerprint, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)\n"
    )
    peaks = []
    for megabytes in (6, 60):
        big = tmp_path / f"big-{megabytes}.log"
        with big.open("wb") as out:
            for _ in range(megabytes * 1024 * 1024 // len(noise)):
                out.write(noise)
            out.write(run.log.read_bytes())
        out_fields = subprocess.run(
            [sys.executable, "-c", code, str(big)], capture_output=True, text=True, check=True
        ).stdout.split()
        assert out_fields[0] == _fingerprint(run)
        peaks.append(int(out_fields[1]))
    growth_mb = (peaks[1] - peaks[0]) / 1024
    assert growth_mb < 24, f"peak RSS grew {growth_mb:.0f} MB from a 6 MB to a 60 MB log"


def test_section_scan_does_not_depend_on_chunk_boundaries() -> None:
    data = b"".join(r.log.read_bytes() for r in runs()[:12])
    import io

    whole = sections.scan(io.BytesIO(data)).text
    for size in (97, 1000, 4096):
        assert sections.scan(io.BytesIO(data), chunk_size=size).text == whole


def test_analyze_file_rejects_empty_binary_and_missing_logs(tmp_path: Path) -> None:
    empty = tmp_path / "empty.log"
    empty.write_bytes(b"")
    binary = tmp_path / "core.bin"
    binary.write_bytes(bytes(range(256)) * 512)
    with pytest.raises(BadInput, match="empty"):
        analyze_file(empty)
    with pytest.raises(BadInput, match="binary"):
        analyze_file(binary)
    with pytest.raises(BadInput, match="cannot read"):
        analyze_file(tmp_path / "missing.log")


def test_analyze_never_raises_on_odd_content() -> None:
    for log in ("", "\x00\x01\x02", "just one line", b"\xff\xfe" * 100):
        assert len(analyze(log).fingerprint) == FINGERPRINT_LENGTH


def test_similarity_same_bug_kind_and_unrelated() -> None:
    first = {r.bug: analyze_file(r.log, junit_path=r.junit) for r in runs()}
    assert similarity(first["tb_zerodiv"], first["tb_zerodiv"]) == 1.0
    # The same kind of failure: HTTP errors from a service, in two jobs.
    assert similarity(first["http_429"], first["auth_401"]) >= 0.5
    unrelated = similarity(first["tb_zerodiv"], first["pip_conflict"])
    assert unrelated < SIMILARITY_THRESHOLD
    scores = [similarity(a, b) for n, a in first.items() for m, b in first.items() if n < m]
    assert all(0.0 <= s <= 1.0 for s in scores)
    # Different bugs of the corpus are mostly told apart at the threshold.
    assert sum(s >= SIMILARITY_THRESHOLD for s in scores) <= len(scores) // 20


def test_similarity_finds_the_same_failure_in_another_test() -> None:
    log = (
        "Traceback (most recent call last):\n"
        '  File "/w/app/stats.py", line 2, in mean\n'
        "ZeroDivisionError: division by zero\n"
    )
    a = analyze(log)
    b = analyze(log.replace("line 2, in mean", "line 7, in mean").replace("/w/", "/x/"))
    c = analyze(log.replace("in mean", "in median"))
    assert a.fingerprint == b.fingerprint
    assert a.fingerprint != c.fingerprint
    assert similarity(a, c) >= SIMILARITY_THRESHOLD


def test_canonical_test_ids_agree_across_runners() -> None:
    assert (
        canonical_test_id("tests/test_x.py::TestA::test_b[1-2]") == "tests.test_x.TestA.test_b[1-2]"
    )
    assert canonical_test_id("tests.test_x.TestA.test_b[1-2]") == "tests.test_x.TestA.test_b[1-2]"


def test_digits_inside_quoted_values_and_generated_ids_do_not_split_a_bug() -> None:
    """`KeyError: 'bob-93'` and `'bob-88'` from the same bug share a fingerprint (Sentry-style
    parameterization); different keys, numbers that are the whole value and `int32`/`int64`
    still tell bugs apart."""

    def fp(message: str) -> str:
        log = (
            "Traceback (most recent call last):\n"
            '  File "/app/users.py", line 7, in lookup\n'
            "    return USERS[name]\n"
            f"{message}\n"
        )
        return analyze(log).fingerprint

    assert fp("KeyError: 'bob-93'") == fp("KeyError: 'bob-88'")
    assert fp("KeyError: 'user_1234'") == fp("KeyError: 'user_77'")
    assert fp("LookupError: no session job-4411 in pool") == fp(
        "LookupError: no session job-19 in pool"
    )
    assert fp("KeyError: 'bob-93'") != fp("KeyError: 'alice'")
    assert fp("KeyError: '93'") != fp("KeyError: '88'")
    assert fp("TypeError: expected int32") != fp("TypeError: expected int64")


def test_frames_of_patchheal_collectors_are_not_the_projects() -> None:
    """The Airflow collector wraps the task run, so its frames are in a failing task's
    traceback (measured: the example's failure named it its first project frame)."""
    trace = (
        "Traceback (most recent call last):\n"
        '  File "/opt/patchheal/collectors/patchheal_airflow.py", line 72, in _run_raw_task\n'
        "    return original(*args, **kwargs)\n"
        '  File "/workspace/dags/daily_revenue.py", line 9, in summarize\n'
        "    parse(text)\n"
        "ValueError: bad date\n"
    )
    failure = analyze(trace, repo_root="/workspace")
    files = [(f.file, f.in_project) for f in failure.frames]
    assert files == [
        ("<patchheal>/patchheal_airflow.py", False),
        ("dags/daily_revenue.py", True),
    ]
