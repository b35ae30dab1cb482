"""The monitor's own modules start from checked-hash bytecode patchheal compiled beside
them (harness/results/collectors.py `precompiled`, patchheal_monitor.py `_code`), and
only from bytecode of exactly the source bytes that are there now.

Real processes with the collectors on their path, as a step starts them: the twin's
kept-originals module is compiled, for the test, with one more line that leaves a mark
on disk, and its pyc carries the header of the module's own source; whether the mark
appears tells which code the monitor ran.
"""

from __future__ import annotations

import importlib.util
import py_compile
import shutil
import subprocess
import sys
from pathlib import Path

from patchheal.harness.results.channel import ResultsChannel
from patchheal.harness.results.collectors import (
    COLLECTORS,
    PRIVATE_MODULES,
    cached_code,
    precompiled,
)

KEPT = "patchheal_twin_kept.py"
# Prints "refused" only where the monitor's hook is in place.
ARMED = """
try:
    open("/proc/self/environ").close()
    print("read")
except PermissionError:
    print("refused")
"""


def _collectors(tmp_path: Path) -> Path:
    folder = tmp_path / "collectors"
    shutil.copytree(COLLECTORS, folder, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return folder


def _start(folder: Path, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """A step's Python process with the collectors (and so the monitor) loaded."""
    channel = ResultsChannel()
    try:
        env = channel.environment(
            {"PATH": "/usr/bin:/bin"}, results_dir=str(channel.host_dir), collectors=str(folder)
        )
        return subprocess.run(
            [sys.executable, "-c", ARMED],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        channel.close()


def _marked_pyc(folder: Path, mark: Path, *, checked: bool) -> None:
    """The kept-originals module's pyc, compiled from its source plus a line that touches
    `mark`, with the header (hash or timestamp) of the source as it is in `folder`."""
    source = folder / KEPT
    marked = folder / "marked.py"
    marked.write_text(source.read_text() + f"\nopen({str(mark)!r}, 'w').close()\n")
    target = cached_code(source)
    if checked:
        py_compile.compile(
            str(marked),
            cfile=str(target),
            doraise=True,
            invalidation_mode=py_compile.PycInvalidationMode.CHECKED_HASH,
        )
        data = bytearray(target.read_bytes())
        data[8:16] = importlib.util.source_hash(source.read_bytes())  # the real source's
        target.write_bytes(bytes(data))
    else:
        py_compile.compile(str(marked), cfile=str(target), doraise=True)
    marked.unlink()


def test_precompiled_writes_checked_hash_bytecode_once(tmp_path: Path) -> None:
    folder = precompiled(_collectors(tmp_path))
    pycs = [cached_code(folder / m) for m in PRIVATE_MODULES]
    for pyc, module in zip(pycs, PRIVATE_MODULES, strict=True):
        header = pyc.read_bytes()[:16]
        assert header[:4] == importlib.util.MAGIC_NUMBER, module
        assert int.from_bytes(header[4:8], "little") == 0b11, module  # hash-based, checked
        assert header[8:16] == importlib.util.source_hash((folder / module).read_bytes())
    written = [p.stat().st_mtime_ns for p in pycs]
    precompiled(folder)
    assert [p.stat().st_mtime_ns for p in pycs] == written  # up to date: not written again
    (folder / KEPT).write_text((folder / KEPT).read_text() + "\n# changed\n")
    precompiled(folder)
    assert pycs[PRIVATE_MODULES.index(KEPT)].read_bytes()[8:16] == importlib.util.source_hash(
        (folder / KEPT).read_bytes()
    )


def test_a_folder_patchheal_cannot_write_is_left_as_it_is(tmp_path: Path) -> None:
    folder = _collectors(tmp_path)
    blocked = cached_code(folder / "patchheal_watch.py")
    blocked.mkdir()  # no pyc can be written there
    assert precompiled(folder) == folder
    assert blocked.is_dir()
    started = _start(folder, tmp_path)
    assert started.returncode == 0, started.stderr
    assert started.stdout.strip() == "refused"


def test_the_monitor_runs_bytecode_of_its_source_bytes_only(tmp_path: Path) -> None:
    folder = precompiled(_collectors(tmp_path))
    mark = tmp_path / "mark"

    # A checked-hash pyc whose hash is the source's: run (the folder is trusted as its
    # source is: a step container mounts it read-only, and the hook refuses writes into it).
    _marked_pyc(folder, mark, checked=True)
    started = _start(folder, tmp_path)
    assert started.returncode == 0, started.stderr
    assert started.stdout.strip() == "refused"
    assert mark.exists()
    mark.unlink()

    # The same pyc once the source's bytes changed: compiled from the source instead.
    (folder / KEPT).write_text((folder / KEPT).read_text() + "\n# one more line\n")
    started = _start(folder, tmp_path)
    assert started.returncode == 0, started.stderr
    assert started.stdout.strip() == "refused"
    assert not mark.exists()

    # A timestamp-based pyc says nothing of the bytes it came from: never run.
    _marked_pyc(folder, mark, checked=False)
    started = _start(folder, tmp_path)
    assert started.returncode == 0, started.stderr
    assert started.stdout.strip() == "refused"
    assert not mark.exists()


def test_a_step_cannot_write_the_monitors_bytecode(tmp_path: Path) -> None:
    """The pyc the next run's monitor would start from is in the folder the hook guards: a
    step's write of it is refused, as a write of the monitor's source is."""
    folder = precompiled(_collectors(tmp_path))
    target = cached_code(folder / "patchheal_watch.py")
    before = target.read_bytes()
    channel = ResultsChannel()
    try:
        env = channel.environment(
            {"PATH": "/usr/bin:/bin"}, results_dir=str(channel.host_dir), collectors=str(folder)
        )
        script = f"""
for path in ({str(target)!r}, {str(folder / "patchheal_watch.py")!r}):
    try:
        open(path, "wb").close()
        print("written", path)
    except PermissionError:
        print("refused")
"""
        done = subprocess.run(
            [sys.executable, "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True
        )
    finally:
        channel.close()
    assert done.stdout.split() == ["refused", "refused"], done.stdout + done.stderr
    assert target.read_bytes() == before
