"""Edit formats: parsing model replies and applying their edits to a real git worktree."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from patchheal.errors import PatchApplyError
from patchheal.proposers.editformats import (
    Edit,
    apply_diff,
    apply_edits,
    apply_reply,
    diff_to_edits,
    parse_reply,
)
from patchheal.proposers.matching import AmbiguousMatch, NoMatch, locate

CALC = """\
def divide(a, b):
    return a / b


def mean(values):
    total = sum(values)
    return divide(total, len(values))
"""


@pytest.fixture
def repo(make_repo: Callable[[dict[str, str]], Path]) -> Path:
    return make_repo({"src/calc.py": CALC, "README.md": "calc\n"})


def test_parse_reply_reads_tags_blocks_and_fenced_filenames() -> None:
    reply = """Here is the fix.

**Strategy:** `add_guard`
RATIONALE: mean() divides by zero on an empty list

```python
src/calc.py
<<<<<<< SEARCH
    total = sum(values)
=======
    if not values:
        return 0.0
    total = sum(values)
>>>>>>> REPLACE
```

<<<<<<< SEARCH
def divide(a, b):
=======
def divide(a: float, b: float) -> float:
>>>>>>> REPLACE
"""
    parsed = parse_reply(reply)
    assert parsed.strategy == "add_guard"
    assert parsed.rationale == "mean() divides by zero on an empty list"
    assert [e.path for e in parsed.edits] == ["src/calc.py", "src/calc.py"]
    assert parsed.edits[0].search == "    total = sum(values)\n"
    assert "if not values:" in parsed.edits[0].replace
    assert parsed.problems == ()


def test_tags_inside_code_are_not_tags() -> None:
    reply = "a.py\n<<<<<<< SEARCH\nstrategy: old\n=======\nstrategy: new\n>>>>>>> REPLACE\n"
    assert parse_reply(reply).strategy is None


def test_unterminated_block_is_a_problem_not_an_edit() -> None:
    parsed = parse_reply("a.py\n<<<<<<< SEARCH\nx = 1\n=======\nx = 2\n")
    assert parsed.edits == ()
    assert len(parsed.problems) == 1
    assert "unterminated" in parsed.problems[0]


def test_parse_reply_extracts_a_fenced_unified_diff() -> None:
    reply = (
        "STRATEGY: fix_logic\n```diff\n--- a/src/calc.py\n+++ b/src/calc.py\n"
        "@@ -1,2 +1,2 @@\n def divide(a, b):\n-    return a / b\n+    return a / b if b else 0.0\n"
        "```\nThat is all.\n"
    )
    parsed = parse_reply(reply)
    assert parsed.edits == ()
    assert len(parsed.diffs) == 1
    assert parsed.diffs[0].endswith("+    return a / b if b else 0.0\n")
    assert "That is all" not in parsed.diffs[0]


def test_exact_match_and_replace(repo: Path) -> None:
    changed = apply_edits(repo, [Edit("src/calc.py", "    return a / b\n", "    return a // b\n")])
    assert changed == ["src/calc.py"]
    assert "return a // b" in (repo / "src/calc.py").read_text()


def test_whitespace_insensitive_match_reindents_the_replacement(repo: Path) -> None:
    # The model lost the indentation of both SEARCH and REPLACE.
    edit = Edit(
        "src/calc.py",
        "total = sum(values)\nreturn divide(total, len(values))\n",
        "if not values:\n    return 0.0\ntotal = sum(values)\nreturn divide(total, len(values))\n",
    )
    apply_edits(repo, [edit])
    text = (repo / "src/calc.py").read_text()
    assert "    if not values:\n        return 0.0\n    total = sum(values)\n" in text


def test_fuzzy_window_tolerates_small_drift(repo: Path) -> None:
    # The SEARCH text has a drifted line (`sum(vals)`) that is nowhere in the file.
    edit = Edit(
        "src/calc.py",
        "def mean(values):\n    total = sum(vals)\n    return divide(total, len(values))\n",
        "def mean(values):\n    total = sum(values)\n    return divide(total, len(values) or 1)\n",
    )
    apply_edits(repo, [edit])
    assert "len(values) or 1)" in (repo / "src/calc.py").read_text()


def test_ambiguous_exact_match_is_refused_and_nothing_is_written(repo: Path) -> None:
    (repo / "src/dup.py").write_text("x = 1\ny = 2\nx = 1\n")
    edits = [
        Edit("src/calc.py", "    return a / b\n", "    return a // b\n"),
        Edit("src/dup.py", "x = 1\n", "x = 3\n"),
    ]
    with pytest.raises(AmbiguousMatch, match=r"occurs 2 times in src/dup\.py"):
        apply_edits(repo, edits)
    assert (repo / "src/calc.py").read_text() == CALC  # all or nothing


def test_ambiguous_fuzzy_match_is_refused() -> None:
    text = "def a():\n    value = compute(1)\n    return value\n\n" * 2
    with pytest.raises(AmbiguousMatch):
        locate(
            text.replace("compute(1)", "compute(2)", 1),
            "    value = compute(3)\n    return value\n",
        )


def test_no_match_says_so(repo: Path) -> None:
    with pytest.raises(NoMatch, match=r"not found in src/calc.py"):
        apply_edits(repo, [Edit("src/calc.py", "completely different text\n", "x\n")])


@pytest.mark.parametrize("path", ["../outside.py", "/etc/passwd", ".git/config", "src/../../x.py"])
def test_edits_outside_the_worktree_are_refused(repo: Path, path: str) -> None:
    with pytest.raises(PatchApplyError, match="outside the worktree"):
        apply_edits(repo, [Edit(path, "", "boom\n")])
    assert not (repo.parent / "outside.py").exists()


def test_edit_through_a_symlink_out_of_the_worktree_is_refused(repo: Path, tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (repo / "link").symlink_to(outside)
    with pytest.raises(PatchApplyError, match="symlink"):
        apply_edits(repo, [Edit("link/evil.py", "", "boom\n")])
    assert not (outside / "evil.py").exists()


def test_empty_search_creates_a_new_file_but_not_over_an_existing_one(repo: Path) -> None:
    apply_edits(repo, [Edit("src/new.py", "", "NEW = 1\n")])
    assert (repo / "src/new.py").read_text() == "NEW = 1\n"
    with pytest.raises(PatchApplyError, match="empty SEARCH for existing file"):
        apply_edits(repo, [Edit("src/calc.py", "", "x\n")])


def test_exact_unified_diff_applies_with_git(repo: Path) -> None:
    diff = (
        "--- a/src/calc.py\n+++ b/src/calc.py\n@@ -1,2 +1,2 @@\n def divide(a, b):\n"
        "-    return a / b\n+    return a / b if b else 0.0\n"
    )
    assert apply_diff(repo, diff) == ["src/calc.py"]
    assert "if b else 0.0" in (repo / "src/calc.py").read_text()


def test_drifted_unified_diff_falls_back_to_tolerant_hunks(repo: Path) -> None:
    # Wrong line numbers, a lost blank-context space, tabs where the file has spaces.
    diff = (
        "--- a/src/calc.py\n+++ b/src/calc.py\n@@ -40,4 +40,6 @@\n"
        "\n def mean(values):\n+\tif not values:\n+\t\treturn 0.0\n"
        " \ttotal = sum(values)\n"
    )
    apply_diff(repo, diff)
    text = (repo / "src/calc.py").read_text()
    assert "def mean(values):\n    if not values:\n        return 0.0\n    total" in text
    assert text.count("total = sum(values)") == 1


def test_diff_creating_and_deleting_files(repo: Path) -> None:
    diff = (
        "--- /dev/null\n+++ b/src/extra.py\n@@ -0,0 +1,1 @@\n+EXTRA = True\n"
        "--- a/README.md\n+++ /dev/null\n@@ -1 +0,0 @@\n-calc\n"
    )
    assert [(e.path, e.delete) for e in diff_to_edits(diff)] == [
        ("src/extra.py", False),
        ("README.md", True),
    ]
    apply_diff(repo, diff)
    assert (repo / "src/extra.py").read_text() == "EXTRA = True\n"
    assert not (repo / "README.md").exists()


def test_diff_outside_the_worktree_is_refused_before_git_sees_it(repo: Path) -> None:
    diff = "--- a/../escape.py\n+++ b/../escape.py\n@@ -0,0 +1 @@\n+x = 1\n"
    with pytest.raises(PatchApplyError, match="outside the worktree"):
        apply_diff(repo, diff)


def test_apply_reply_without_edits_raises(repo: Path) -> None:
    with pytest.raises(PatchApplyError, match="no SEARCH/REPLACE block"):
        apply_reply(repo, parse_reply("I think the bug is in calc.py."))


def test_locate_reports_which_pass_matched() -> None:
    assert locate(CALC, "    return a / b\n").method == "exact"
    assert locate(CALC, "def divide(a,  b):\n  return a / b\n").method == "whitespace"
    fuzzy = locate(CALC, "def mean(vals):\n    total = sum(vals)\n")
    assert fuzzy.method == "fuzzy"
    assert 0.88 <= fuzzy.score < 1.0
    assert CALC[fuzzy.start : fuzzy.end].startswith("def mean(values):")


def test_fuzzy_match_in_a_large_file_stays_fast() -> None:
    """A 5000-line file took 4 s with a full character-level scan; windows are now pre-ranked."""
    import time

    lines = [f"    value_{i} = compute_{i * 7919 % 1000}(arg_{i % 17}, {i})\n" for i in range(5000)]
    text = "".join(lines)
    drifted = "".join(lines[3000:3010]).replace("compute_", "computer_", 1)
    started = time.perf_counter()
    match = locate(text, drifted)
    assert time.perf_counter() - started < 3.0  # the full scan took 4 s; pre-ranked, well under 1 s
    assert match.method == "fuzzy"
    assert text[match.start : match.end] == "".join(lines[3000:3010])
