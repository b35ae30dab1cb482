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


FORMAT_PATCH = """\
From 1234abcd Mon Sep 17 00:00:00 2001
From: A Author <a@example.invalid>
Date: Mon, 1 Jan 2024 00:00:00 +0000
Subject: [PATCH] pricing: the 10 % tier starts at 10

The docs say inclusive;
the code said exclusive.
---
 pricing/rules.py | 2 +-
 1 file changed, 1 insertion(+), 1 deletion(-)

diff --git a/pricing/rules.py b/pricing/rules.py
--- a/pricing/rules.py
+++ b/pricing/rules.py
@@ -1 +1 @@
-x
+y
"""


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("rationale: the tier is inclusive\n" + FIX, "the tier is inclusive"),
        (
            FORMAT_PATCH,
            "pricing: the 10 % tier starts at 10. The docs say inclusive; the code said exclusive.",
        ),
        ("# strategy: guard\n# Guard the empty list.\n" + FIX, "Guard the empty list."),
        (FIX, ""),
    ],
    ids=["rationale-line", "format-patch", "comment-preamble", "bare-diff"],
)
def test_the_patch_files_own_explanation_becomes_the_rationale(text: str, said: str) -> None:
    """Issue 34: a report shows the proposer's own explanation; for a patch file that is
    its `rationale:` line, else its commit message, else the prose before the diff."""
    from patchheal.proposers.patchfiles import explanation

    assert explanation(text) == said
