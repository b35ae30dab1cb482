"""Host folders a container reads are readable by its user whatever the umask or home."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from patchheal.harness.engine import hostdirs


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_wheelhouse_written_under_umask_077_becomes_readable_by_everyone(
    tmp_path: Path,
) -> None:
    """Invariant: after share_readable, every file is world-readable and every directory
    world-searchable (pip writes 0600 under umask 077); no bit is removed."""
    old = os.umask(0o077)
    try:
        house = tmp_path / "cp311"
        (house / "sub").mkdir(parents=True)
        (house / "a-1.0-py3-none-any.whl").write_bytes(b"wheel")
        (house / "sub" / "tool").write_bytes(b"#!/bin/sh\n")
        (house / "sub" / "tool").chmod(0o700)
    finally:
        os.umask(old)
    assert not hostdirs.readable_by_all(house)
    hostdirs.share_readable(house)
    assert hostdirs.readable_by_all(house)
    assert _mode(house / "a-1.0-py3-none-any.whl") == 0o644
    assert _mode(house / "sub" / "tool") == 0o755
    assert _mode(house / "sub") == 0o755


def test_private_collectors_are_mounted_from_a_readable_copy(tmp_path: Path) -> None:
    """Invariant: a folder some user cannot read is replaced by a readable copy keyed by
    content (same content, same copy); a readable folder is used as it is."""
    source = tmp_path / "collectors"
    source.mkdir(mode=0o700)
    (source / "sitecustomize.py").write_text("x = 1\n")
    (source / "sitecustomize.py").chmod(0o600)
    copy = hostdirs.shared_copy(source, tmp_path / "cache")
    assert copy != source
    assert (copy / "sitecustomize.py").read_text() == "x = 1\n"
    assert hostdirs.readable_by_all(copy)
    assert hostdirs.shared_copy(source, tmp_path / "cache") == copy
    source.chmod(0o755)
    (source / "sitecustomize.py").chmod(0o644)
    assert hostdirs.shared_copy(source, tmp_path / "cache") == source


def test_the_cache_folder_needs_no_home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Invariant: with HOME unset and no passwd entry (`docker run -u 54321`) the cache is
    a per-uid temp folder, never a crash; PATCHHEAL_CACHE_DIR wins over a read-only home."""
    import pwd

    def no_entry(uid: int) -> pwd.struct_passwd:
        raise KeyError(uid)

    for name in ("HOME", "XDG_CACHE_HOME", "PATCHHEAL_CACHE_DIR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(pwd, "getpwuid", no_entry)
    found = hostdirs.cache_dir()
    assert found.is_absolute(), found
    assert found.name == f"patchheal-cache-{os.getuid()}"
    monkeypatch.setenv("HOME", "/nonexistent")
    monkeypatch.setenv("PATCHHEAL_CACHE_DIR", str(tmp_path / "c"))
    assert hostdirs.cache_dir() == tmp_path / "c"
