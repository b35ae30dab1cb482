"""What a run added to the worktree is taken away before the next run (workspace/added.py).

Real folders, files and links: what was there before the first run stays as it
is (changed or not), everything a run added goes, links are removed as links
and never followed, and `.git` is never touched.
"""

from __future__ import annotations

import os
from pathlib import Path

from patchheal.workspace import added


def _tree(root: Path) -> Path:
    tree = root / "tree"
    (tree / ".git").mkdir(parents=True)
    (tree / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (tree / "pkg").mkdir()
    (tree / "pkg" / "calc.py").write_text("def add(a, b):\n    return a + b\n")
    (tree / "pkg.egg-info").mkdir()
    (tree / "pkg.egg-info" / "PKG-INFO").write_text("Name: pkg\n")
    (tree / "kept-link").symlink_to("pkg")
    return tree


def test_what_a_run_added_goes_and_what_was_there_stays(tmp_path: Path) -> None:
    tree = _tree(tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "precious.txt").write_text("not the tree's\n")
    before = added.snapshot(tree)
    assert ".git" not in before
    assert {"pkg", "pkg/calc.py", "pkg.egg-info/PKG-INFO", "kept-link"} <= before

    # A run: a counter, caches, a new folder with a link out of the tree in it, a link to a
    # folder outside, a changed file that was there, an empty folder, a file in `.git`.
    (tree / ".calc-runs").write_text("1")
    (tree / "pkg" / "__pycache__").mkdir()
    (tree / "pkg" / "__pycache__" / "calc.cpython-311.pyc").write_bytes(b"\0" * 16)
    (tree / "build" / "lib").mkdir(parents=True)
    (tree / "build" / "lib" / "out").symlink_to(outside)
    (tree / "escape").symlink_to(outside)
    (tree / "empty-marker").mkdir()
    (tree / "pkg.egg-info" / "PKG-INFO").write_text("Name: pkg\nmark: 2\n")
    (tree / ".git" / "ORIG_HEAD").write_text("x\n")

    assert added.remove_new(tree, before) == []
    assert added.snapshot(tree) == before
    assert not (tree / ".calc-runs").exists()
    assert not (tree / "pkg" / "__pycache__").exists()
    assert not (tree / "build").exists()
    assert not os.path.lexists(tree / "escape")
    # Links were removed, never followed: the folder they pointed at is whole.
    assert (outside / "precious.txt").read_text() == "not the tree's\n"
    # What was there before stays, as it is now (it is not restored).
    assert (tree / "pkg.egg-info" / "PKG-INFO").read_text().endswith("mark: 2\n")
    assert (tree / "kept-link").is_symlink()
    assert (tree / ".git" / "ORIG_HEAD").exists()


def test_folders_a_run_made_go_whole_and_old_folders_are_entered(tmp_path: Path) -> None:
    """A new folder goes with all it holds; in a folder that was there before, only what is
    new goes (a new `__pycache__` beside the old module)."""
    tree = _tree(tmp_path)
    before = added.snapshot(tree)
    (tree / "made" / "inner").mkdir(parents=True)
    (tree / "made" / "inner" / "file").write_text("x")
    (tree / "pkg" / "new.py").write_text("")
    assert added.remove_new(tree, before) == []
    assert not (tree / "made").exists()
    assert not (tree / "pkg" / "new.py").exists()
    assert (tree / "pkg" / "calc.py").exists()
