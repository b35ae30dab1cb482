"""Crash logs live beside the store, with unique names, never through a symlink (issue 25,
item 7: `/tmp/patchheal-crash-<epoch>.log` was predictable, shared and followed symlinks)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from patchheal.cli import _crash_log
from patchheal.telemetry.crashlog import CRASH_DIR


def test_a_crash_log_goes_beside_the_named_store_with_a_unique_private_name(
    tmp_path: Path,
) -> None:
    """Two crashes in the same second get two files, in `<state dir>/crash/`, mode 0600."""
    db = tmp_path / "store.sqlite3"
    argv = ["heal", "job.toml", "--db", str(db)]
    first = _crash_log(RuntimeError("first"), argv)
    second = _crash_log(RuntimeError("second"), argv)
    assert first != second
    assert first.parent == tmp_path / "store-state" / CRASH_DIR
    assert "RuntimeError: first" in first.read_text()
    assert "RuntimeError: second" in second.read_text()
    assert stat.S_IMODE(first.stat().st_mode) == 0o600


def test_a_crash_log_is_never_written_through_a_planted_symlink(tmp_path: Path) -> None:
    """A symlink planted where the crash folder goes is not followed: the victim file is
    untouched and the log lands in a private folder instead."""
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "keep.txt").write_text("mine")
    state = tmp_path / "state"
    state.mkdir()
    (state / CRASH_DIR).symlink_to(victim)
    path = _crash_log(RuntimeError("boom"), ["heal", "job.toml", "--state-dir", str(state)])
    path.unlink()  # the fallback is this user's private folder under the temp dir
    assert not path.is_relative_to(victim)
    assert not path.parent.is_symlink()
    assert [p.name for p in victim.iterdir()] == ["keep.txt"]
    assert path.parent.stat().st_uid == os.getuid()
