"""The patchfiles proposer reads a candidates folder as untrusted input (issue 25, H2-H4)."""

from __future__ import annotations

import os
import sys
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
    candidates = proposer.peek_all()
    diffs = [c.diff for c in candidates]
    # The reason is the candidate's rationale now, its diff empty (never applied or run).
    assert "root:" not in diffs[0] + candidates[0].rationale
    assert diffs[:2] == ["", ""]
    assert "a symlink" in candidates[0].rationale
    assert "a FIFO" in candidates[1].rationale
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


@pytest.mark.slow
def test_one_oversized_file_among_nine_is_one_rejected_candidate_and_the_rest_run(
    tmp_path: Path,
) -> None:
    """Issue 34: one candidate file over 4 MiB stopped the whole heal (exit 2) before any
    candidate was tried. It is now that candidate's attempt, with the reason, and the
    other eight are tried in order: seven that change nothing that matters, then the fix."""
    from patchheal.memory.store import AttemptStore
    from patchheal.proposers.patchfiles import MAX_PATCH_BYTES
    from tests.healjobs import BUGGY, diff_for, make_calc_repo, patchheal_cli, state_args
    from tests.healjobs import FIX as FIXED_SOURCE

    repo = make_calc_repo(tmp_path)
    folder = tmp_path / "candidates"
    folder.mkdir()
    for index in (1, 2, 3, 4, 6, 7, 8):
        (folder / f"0{index}-note_{index}.patch").write_text(
            diff_for(repo, {"calc.py": BUGGY + f"# note {index}\n"})
        )
    (folder / "05-huge_log.patch").write_bytes(b"x" * (MAX_PATCH_BYTES + 1))
    (folder / "09-fix_add.patch").write_text(diff_for(repo, {"calc.py": FIXED_SOURCE}))
    spec = tmp_path / "job.toml"
    spec.write_text(
        f'[job]\nid = "nine"\nrepo = "{repo}"\nbase = "main"\nharness = "local"\n\n'
        f"[[steps]]\nname = \"unit\"\ncommand = '''{sys.executable} -m pytest -q "
        "-p no:cacheprovider tests/test_calc.py::test_add'''\n\n"
        f'[proposer]\nkind = "patchfiles"\ndir = "{folder}"\n\n'
        "[budget]\nmax_attempts = 10\nflaky_reruns = 0\nverify_runs = 1\nbucket_limit = 20\n"
    )
    done = patchheal_cli("heal", str(spec), *state_args(tmp_path), timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    with AttemptStore(tmp_path / "store.sqlite3") as store:
        tried = {a.attempt_number: a for a in store.attempts()}
    assert len(tried) == 9, [(a.attempt_number, a.outcome.value) for a in tried.values()]
    huge = [a for a in tried.values() if "05-huge_log.patch" in a.reason]
    assert len(huge) == 1, [a.reason for a in tried.values()]
    assert huge[0].outcome.value == "apply_failed"
    assert f"over the {MAX_PATCH_BYTES:,}-byte limit" in huge[0].reason
    outcomes = [tried[n].outcome.value for n in sorted(tried)]
    assert outcomes == ["no_effect"] * 4 + ["apply_failed"] + ["no_effect"] * 3 + ["fixed"]


def test_a_binary_or_non_utf8_patch_file_is_one_rejected_candidate(tmp_path: Path) -> None:
    folder = tmp_path / "candidates"
    folder.mkdir()
    (folder / "01-nul.patch").write_bytes(b"--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+\0b\n")
    (folder / "02-latin1.patch").write_bytes(b"caf\xe9\n")
    (folder / "03-ok.patch").write_text(FIX)
    first, second, third = _proposer(tmp_path, folder).peek_all()
    assert (first.diff, second.diff) == ("", "")
    assert "binary file (NUL bytes)" in first.rationale
    assert "not UTF-8 text (byte 3)" in second.rationale
    assert first.rationale.startswith("the patch file 01-nul.patch was not used: ")
    assert third.diff == FIX
