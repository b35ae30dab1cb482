"""Diff parsing, counting and hashing, on diffs made by real git."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from patchheal.errors import NotADiff
from patchheal.workspace import diffs

BODY = "".join(f"line {i}\n" for i in range(1, 21))


def _diff(repo: Path, *extra: str) -> str:
    """The working tree's changes (untracked files too) as git prints them."""
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True)
    out = subprocess.run(
        ["git", "diff", "--cached", "--binary", *extra], cwd=repo, check=True, capture_output=True
    ).stdout.decode()
    subprocess.run(["git", "reset", "-q"], cwd=repo, check=True)
    return out


@pytest.fixture
def repo(make_repo) -> Path:
    return make_repo(
        {"src/app.py": BODY, "old.txt": "bye\n", "keep.py": "def f(x):\n    return x+1\n"}
    )


def _edit(repo: Path, line10: str = "changed 10", line15: str = "changed 15") -> None:
    text = BODY.replace("line 10\n", f"{line10}\n").replace("line 15\n", f"{line15}\n")
    (repo / "src/app.py").write_text(text)


def test_is_diff_and_parse_reject_text_that_is_no_diff() -> None:
    assert not diffs.is_diff("just a sentence\nand another\n")
    assert not diffs.is_diff("")
    with pytest.raises(NotADiff, match=r"not a unified diff.*just a sentence"):
        diffs.parse("just a sentence\n")


def test_touched_files_lists_both_sides_of_renames_and_new_and_deleted_files(repo: Path) -> None:
    _edit(repo)
    (repo / "old.txt").unlink()
    (repo / "new dir").mkdir()
    (repo / "new dir/new.txt").write_text("hello\n")
    subprocess.run(["git", "mv", "keep.py", "kept.py"], cwd=repo, check=True)
    diff = _diff(repo, "-M")
    assert diffs.touched_files(diff) == (
        "keep.py",
        "kept.py",
        "new dir/new.txt",
        "old.txt",
        "src/app.py",
    )
    assert diffs.changed_lines(diff) == 2 + 2 + 1 + 1


def test_exact_hash_ignores_line_endings_only(repo: Path) -> None:
    _edit(repo)
    diff = _diff(repo)
    assert diffs.exact_hash(diff) == diffs.exact_hash(diff.replace("\n", "\r\n"))
    assert diffs.exact_hash(diff) != diffs.exact_hash(diff + " ")
    assert len(diffs.exact_hash(diff)) == 64


def test_normalized_hash_is_equal_for_the_same_change_with_other_context(repo: Path) -> None:
    """Invariant: the same change re-diffed never escapes the repeat check."""
    _edit(repo)
    (repo / "new.txt").write_text("fresh\n")
    (repo / "old.txt").unlink()
    one, three, ten = _diff(repo, "-U1"), _diff(repo, "-U3"), _diff(repo, "-U10")
    assert len({one, three, ten}) == 3  # really different texts: split vs merged hunks
    assert diffs.normalized_hash(one) == diffs.normalized_hash(three) == diffs.normalized_hash(ten)
    assert diffs.exact_hash(one) != diffs.exact_hash(three)


def test_normalized_hash_is_equal_under_whitespace_changes(repo: Path) -> None:
    _edit(repo, line10="x = compute(a, b)")
    tight = _diff(repo)
    _edit(repo, line10="    x  =  compute( a,b )   ")
    loose = _diff(repo)
    assert tight != loose
    assert diffs.normalized_hash(tight) == diffs.normalized_hash(loose)


def test_normalized_hash_differs_for_different_changes(repo: Path) -> None:
    _edit(repo, line10="x = 1")
    first = _diff(repo)
    _edit(repo, line10="x = 2")
    other_value = _diff(repo)
    _edit(repo, line10="x = 1", line15="line 15")
    fewer_lines = _diff(repo)
    hashes = {diffs.normalized_hash(d) for d in (first, other_value, fewer_lines)}
    assert len(hashes) == 3


def test_normalized_hash_tells_new_deleted_and_modified_files_apart(make_repo) -> None:
    repo = make_repo({"a.txt": "same\n"})
    (repo / "b.txt").write_text("same\n")
    added = _diff(repo)
    (repo / "b.txt").unlink()
    (repo / "a.txt").unlink()
    deleted = _diff(repo)
    (repo / "a.txt").write_text("")
    emptied = _diff(repo)
    assert "added b.txt\n+same" in diffs.normalize(added)
    assert "deleted a.txt\n-same" in diffs.normalize(deleted)
    assert "modified a.txt\n-same" in diffs.normalize(emptied)
    assert len({diffs.normalized_hash(d) for d in (added, deleted, emptied)}) == 3


def test_normalize_names_binary_files_by_content(make_repo) -> None:
    repo = make_repo({"x.txt": "x\n"})
    (repo / "blob.bin").write_bytes(b"\x00\x01one")
    one = _diff(repo)
    (repo / "blob.bin").write_bytes(b"\x00\x01two")
    two = _diff(repo)
    assert diffs.touched_files(one) == ("blob.bin",)
    assert diffs.normalized_hash(one) != diffs.normalized_hash(two)


def test_normalize_is_independent_of_file_order(make_repo) -> None:
    repo = make_repo({"a.py": "a = 1\n", "b.py": "b = 1\n"})
    (repo / "a.py").write_text("a = 2\n")
    (repo / "b.py").write_text("b = 2\n")
    diff = _diff(repo)
    head, _, tail = diff.partition("diff --git a/b.py")
    swapped = "diff --git a/b.py" + tail + head
    assert diffs.normalized_hash(swapped) == diffs.normalized_hash(diff)


def test_wrong_hunk_counts_are_recounted_not_fatal() -> None:
    written_by_hand = "--- a/x.py\n+++ b/x.py\n@@ -1,9 +1,9 @@\n a = 1\n-b = 2\n+b = 3\n\n c = 4\n"
    patchset = diffs.parse(written_by_hand)
    assert diffs.changed_lines(written_by_hand) == 2
    assert patchset[0][0].source_length == 4  # the blank line counts as context
    assert "@@ -1,4 +1,4 @@" in diffs.repaired(written_by_hand)


def test_preamble_before_the_diff_is_ignored() -> None:
    text = "# strategy: add_guard\nSome words.\n--- a/x.py\n+++ b/x.py\n@@ -1 +1 @@\n-a\n+b\n"
    assert diffs.touched_files(text) == ("x.py",)


@pytest.mark.parametrize(
    ("header", "why"),
    [
        ("--- a/../outside.py\n+++ b/../outside.py\n", "climbs out"),
        ("--- /etc/passwd\n+++ /etc/passwd\n", "absolute"),
        ("--- a/.git/hooks/pre-commit\n+++ b/.git/hooks/pre-commit\n", ".git"),
    ],
)
def test_unsafe_paths_are_named(header: str, why: str) -> None:
    unsafe = diffs.unsafe_paths(header + "@@ -1 +1 @@\n-a\n+b\n")
    assert unsafe
    assert why in unsafe[0][1]


def test_unsafe_paths_sees_rename_lines() -> None:
    diff = (
        "diff --git a/x.py b/y.py\nsimilarity index 100%\nrename from ../../x.py\nrename to y.py\n"
    )
    assert [p for p, _ in diffs.unsafe_paths(diff)] == ["../../x.py"]


def test_safe_paths_are_not_flagged(repo: Path) -> None:
    _edit(repo)
    assert diffs.unsafe_paths(_diff(repo)) == ()
