"""The results directory and a declared `results` glob are hostile input (issue 25, H2-H4).

Every file there is written by the step. A hostile one must reject that run with a
reason in `TestResults.rejected`, and never hang patchheal, exhaust its memory, stop
the heal or make it read a host file.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from patchheal.harness.results import tarreader, untrusted
from patchheal.harness.results.channel import NODE_JUNIT, ResultsChannel
from patchheal.harness.results.junit import MAX_DEPTH, parse_junit
from patchheal.models import TestResults

JUNIT = '<testsuites><testsuite name="s"><testcase name="t"/></testsuite></testsuites>'


def _collect(
    channel: ResultsChannel, worktree: Path | None = None, declared: str | None = None
) -> TestResults | None:
    """`channel.collect` in a thread: a collect that blocks fails the test instead of hanging."""
    got: list[TestResults | None] = []
    worker = threading.Thread(
        target=lambda: got.append(channel.collect(worktree, declared)), daemon=True
    )
    worker.start()
    worker.join(20)
    assert not worker.is_alive(), "collect blocked on a step-written file"
    return got[0]


def _rejected(results: TestResults | None) -> str:
    assert results is not None
    return " | ".join(results.rejected)


@pytest.mark.parametrize("name", ["zz.json", NODE_JUNIT])
def test_a_fifo_in_the_results_directory_is_refused_without_blocking(name: str) -> None:
    """H2: a FIFO where a collector's record goes is refused by name; `open` never blocks."""
    channel = ResultsChannel()
    try:
        os.mkfifo(channel.host_dir / name)
        results = _collect(channel)
    finally:
        channel.close()
    assert f"{name} (a FIFO)" in _rejected(results)
    assert results is not None
    assert results.outcomes == {}


def test_an_oversized_results_file_is_refused_before_it_is_read() -> None:
    """H3: the bytes patchheal reads from the results directory are capped; a well-formed
    report over the cap is refused, not parsed (3 GiB took patchheal to 6.4 GB RSS)."""
    channel = ResultsChannel()
    case = b'<testcase name="t"/>'
    count = untrusted.MAX_FILE_BYTES // len(case) + 10
    try:
        with (channel.host_dir / NODE_JUNIT).open("wb") as out:
            out.write(b"<testsuites>" + case * count + b"</testsuites>")
        results = _collect(channel)
    finally:
        channel.close()
    assert f"{NODE_JUNIT} (over {untrusted.MAX_FILE_BYTES} bytes)" in _rejected(results)
    assert results is not None
    assert results.outcomes == {}


def test_deeply_nested_junit_is_refused_not_a_recursion_error() -> None:
    """H4: 100,000 nested testsuites raised RecursionError and stopped the whole heal;
    now that file is refused with a reason and the run goes on being judged."""
    channel = ResultsChannel()
    deep = "<testsuites>" + "<testsuite name='s'>" * 100_000 + "<testcase name='t'/>"
    deep += "</testsuite>" * 100_000 + "</testsuites>"
    try:
        (channel.host_dir / NODE_JUNIT).write_text(deep)
        results = _collect(channel)
    finally:
        channel.close()
    assert f"nested deeper than {MAX_DEPTH}" in _rejected(results)


def test_symlinks_in_the_results_directory_are_not_followed(tmp_path: Path) -> None:
    """A symlink there once made a host XML file the run's test outcomes."""
    host_file = tmp_path / "host.xml"
    host_file.write_text(JUNIT)
    channel = ResultsChannel()
    try:
        (channel.host_dir / NODE_JUNIT).symlink_to(host_file)
        results = _collect(channel)
    finally:
        channel.close()
    assert f"{NODE_JUNIT} (a symlink)" in _rejected(results)
    assert results is not None
    assert results.outcomes == {}
    assert host_file.exists()


def test_a_declared_glob_never_leaves_the_worktree_or_blocks(tmp_path: Path) -> None:
    """H2 (declared): a FIFO at the step's own `results` glob is refused without blocking;
    a symlinked file or directory is not followed out of the worktree; a real report
    beside them is still read."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "host.xml").write_text(JUNIT.replace('"t"', '"host"'))
    worktree = tmp_path / "wt"
    (worktree / "reports" / "sub").mkdir(parents=True)
    os.mkfifo(worktree / "reports" / "fifo.xml")
    (worktree / "reports" / "link.xml").symlink_to(outside / "host.xml")
    (worktree / "reports" / "linkdir").symlink_to(outside)
    (worktree / "reports" / "loop").symlink_to(worktree / "reports")
    (worktree / "reports" / "sub" / "real.xml").write_text(JUNIT)
    channel = ResultsChannel()
    try:
        results = _collect(channel, worktree, "reports/**/*.xml")
    finally:
        channel.close()
    why = _rejected(results)
    assert "reports/fifo.xml (a FIFO)" in why
    assert "reports/link.xml (a symlink)" in why
    assert results is not None
    assert results.outcomes == {"s.t": "passed"}
    assert results.runners == ("junit",)


def test_the_number_of_files_read_is_capped() -> None:
    """A results directory with more files than the cap is refused past the cap, quickly."""
    channel = ResultsChannel()
    try:
        for i in range(untrusted.MAX_FILES + 5):
            (channel.host_dir / f"f{i:05}.txt").write_text("x")
        results = _collect(channel)
    finally:
        channel.close()
    assert f"more than {untrusted.MAX_FILES} files" in _rejected(results)


@pytest.mark.parametrize(
    "data",
    [
        b'<!DOCTYPE l [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;">]><testsuites>'
        b'<testcase name="&b;"/></testsuites>',
        b"<testsuites><testcase name='t'>",
        b"\x00\xff",
        b"",
    ],
)
def test_malformed_or_entity_junit_is_refused_with_a_reason(data: bytes) -> None:
    assert isinstance(parse_junit(data), str)


def test_legitimate_junit_keeps_its_ids_and_worst_outcomes() -> None:
    """The streaming parser reads what the tree walker read: suite names, classnames,
    the worst outcome of a repeated id, and no cases from inside a testcase."""
    found = parse_junit(
        b'<?xml version="1.0"?><testsuites><testsuite name="math"><testsuite name="add">'
        b'<testcase name="small"/><testcase name="big"><failure/></testcase>'
        b'</testsuite><testcase name="skip"><skipped/></testcase></testsuite>'
        b'<testcase name="small" classname="math.add"><error/><testcase name="inner"/>'
        b'</testcase><testsuite><testcase name="anon" classname="test"/></testsuite>'
        b"</testsuites>"
    )
    assert found == {
        "math.add.small": "error",
        "math.add.big": "failed",
        "math.skip": "skipped",
        "anon": "passed",
    }


def _tar(tmp: Path) -> bytes:
    """A tar of a results root as the engine streams it: `patchheal/results-x/...`."""
    import io
    import tarfile

    root = tmp / "patchheal"
    run = root / "results-x"
    (run / "sub").mkdir(parents=True)
    (run / "good.json").write_text("{}")
    (run / "big.json").write_bytes(b"x" * 2048)
    (run / "sub" / "deep.json").write_text("{}")
    os.mkfifo(run / "f.json")
    (run / "pw.json").symlink_to("/etc/passwd")
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        tar.add(root, arcname="patchheal")
    return buffer.getvalue()


def _chunked(data: bytes, size: int = 1000) -> list[bytes]:
    return [data[i : i + size] for i in range(0, len(data), size)]


def test_a_tar_stream_gives_regular_files_only_within_the_budget(tmp_path: Path) -> None:
    """The engine's tar of a container's results volume is read as hostile as a host
    directory: non-regular members refused with their kind, sizes within the budget."""
    data = _tar(tmp_path)
    budget = untrusted.Budget(bytes=1024)
    members, cut = tarreader.read_tar(
        _chunked(data), budget, cap=len(data), wanted=lambda p: p.count("/") == 1
    )
    assert cut == ""
    got = {m.path: (m.entry.data, m.entry.refused) for m in members}
    assert got["results-x/good.json"] == (b"{}", "")
    assert got["results-x/big.json"] == (b"", "over 1024 bytes")
    assert got["results-x/f.json"][1] == "a FIFO"
    assert got["results-x/pw.json"][1] == "a symlink"
    assert got["results-x/sub"][1] == "a directory"
    assert got["results-x/sub/deep.json"] == (b"", "")  # not wanted: listed, never read
    assert {m.path: m.size for m in members}["results-x/big.json"] == 2048


def test_a_tar_stream_past_its_cap_is_cut_off(tmp_path: Path) -> None:
    data = _tar(tmp_path)
    members, cut = tarreader.read_tar(
        _chunked(data), untrusted.Budget(), cap=len(data) // 2, wanted=lambda p: True
    )
    assert cut == f"the stream went past {len(data) // 2} bytes"
    assert len(members) < 7
    _, cut = tarreader.read_tar([b"not a tar" * 100], untrusted.Budget(), cap=10**6, wanted=bool)
    assert cut.startswith("an unreadable stream")
