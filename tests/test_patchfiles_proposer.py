"""The patchfiles proposer reads a candidates folder as untrusted input (issue 25, H2-H4)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from patchheal.config import build_spec
from patchheal.errors import SpecError
from patchheal.proposers.config import PatchfilesConfig
from patchheal.proposers.patchfiles import PatchfilesProposer
from tests.specfuzz import FIX, valid_spec


def _proposer(tmp_path: Path, folder: Path) -> PatchfilesProposer:
    job = build_spec(valid_spec(tmp_path), source="job.toml", base_dir=tmp_path)
    return PatchfilesProposer(PatchfilesConfig(dir=folder), job=job)


def test_a_symlink_in_the_candidates_folder_is_refused_by_name(tmp_path: Path) -> None:
    """A symlink `x.patch -> /etc/passwd` in the folder once put the host file into
    report.md as a candidate's diff; it is now refused with a clear reason."""
    folder = tmp_path / "candidates"
    folder.mkdir()
    (folder / "01-fix.patch").write_text(FIX)
    (folder / "02-passwd.patch").symlink_to("/etc/passwd")
    with pytest.raises(SpecError, match=r"symlinks are not read .*02-passwd\.patch"):
        _proposer(tmp_path, folder)


def test_a_patch_swapped_for_a_symlink_or_fifo_after_listing_is_not_read(tmp_path: Path) -> None:
    """Loading a listed file never follows a symlink swapped in afterwards, nor blocks on
    a FIFO: the candidate carries the reason instead of the host file's bytes."""
    folder = tmp_path / "candidates"
    folder.mkdir()
    for name in ("01-a.patch", "02-b.patch", "03-c.patch"):
        (folder / name).write_text(FIX)
    proposer = _proposer(tmp_path, folder)
    (folder / "01-a.patch").unlink()
    (folder / "01-a.patch").symlink_to("/etc/passwd")
    (folder / "02-b.patch").unlink()
    os.mkfifo(folder / "02-b.patch")
    diffs = [c.diff for c in proposer.peek_all()]
    assert "root:" not in diffs[0]
    assert "a symlink" in diffs[0]
    assert "a FIFO" in diffs[1]
    assert diffs[2] == FIX
