"""Attempt workspace preparation: reset an existing worktree vs add a fresh one.

Run: python benchmarks/bench_workspace.py [--files 3000] [--reps 9]

Generates a repository of --files source files (about 2 KB each, in 60
packages, plus a .gitignore), opens a JobWorkspace on it, and times, per
attempt, what makes a pristine worktree at the base:

- reset: `JobWorkspace.reset` of a worktree an attempt has dirtied (edited
  files, new files, an ignored __pycache__), i.e. `reset --hard` + `clean -ffdx`;
- add: `JobWorkspace.worktree(<new name>)`, i.e. a fresh `git worktree add`;
- remove+add: what a fresh worktree per attempt really costs (the old one goes).

Medians and the ratio to reset's median, all measured in this run.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from patchheal.workspace.worktrees import JobWorkspace

_ENV = {
    "GIT_AUTHOR_NAME": "bench",
    "GIT_AUTHOR_EMAIL": "bench@localhost",
    "GIT_COMMITTER_NAME": "bench",
    "GIT_COMMITTER_EMAIL": "bench@localhost",
}


def make_repo(path: Path, files: int) -> None:
    path.mkdir(parents=True)
    env = {**os.environ, **_ENV}
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=path, check=True, env=env)
    (path / ".gitignore").write_text("__pycache__/\n*.pyc\n")
    for i in range(files):
        package = path / f"pkg{i % 60:02d}"
        package.mkdir(exist_ok=True)
        body = "".join(f"def f{i}_{j}(x):\n    return x * {j} + {i}\n\n" for j in range(50))
        (package / f"mod{i:05d}.py").write_text(body)
    subprocess.run(["git", "add", "-A"], cwd=path, check=True, env=env)
    subprocess.run(["git", "commit", "-q", "-m", "generated"], cwd=path, check=True, env=env)


def dirty(tree: Path) -> None:
    """What an attempt leaves behind: edits, new files, ignored caches."""
    for i in range(10):
        target = tree / f"pkg{i:02d}" / f"mod{i:05d}.py"
        target.write_text(target.read_text() + "# edited\n")
    for i in range(20):
        (tree / f"pkg{i:02d}" / f"new_{i}.py").write_text("x = 1\n")
    cache = tree / "pkg00" / "__pycache__"
    cache.mkdir(exist_ok=True)
    for i in range(50):
        (cache / f"mod{i:05d}.cpython-311.pyc").write_bytes(os.urandom(2048))


def timed(prepare: Callable[[], None], action: Callable[[], None], reps: int) -> list[float]:
    samples = []
    for _ in range(reps):
        prepare()
        started = time.perf_counter()
        action()
        samples.append(time.perf_counter() - started)
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=3000)
    parser.add_argument("--reps", type=int, default=9)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-workspace-") as scratch:
        root = Path(scratch)
        started = time.perf_counter()
        make_repo(root / "repo", args.files)
        workspace = JobWorkspace(root / "repo", "main", "bench", root=root / "wt")
        workspace.open()
        tree = workspace.worktree("attempt")
        setup = time.perf_counter() - started

        reset = timed(lambda: dirty(tree), lambda: workspace.reset(tree), args.reps)
        assert not subprocess.run(
            ["git", "status", "--porcelain", "--ignored"], cwd=tree, capture_output=True, text=True
        ).stdout, "reset left the worktree dirty"

        counter = iter(range(10**6))
        fresh: list[Path] = []

        def add() -> None:
            fresh.append(workspace.worktree(f"fresh{next(counter)}"))

        def drop_last() -> None:
            if fresh:
                workspace.remove(fresh.pop())

        add_only = timed(drop_last, add, args.reps)
        drop_last()
        add()

        def remove_and_add() -> None:
            drop_last()
            add()

        replace = timed(lambda: dirty(fresh[-1]), remove_and_add, args.reps)
        workspace.destroy()

    base = statistics.median(reset)
    print(f"repository: {args.files} files, setup {setup:.1f} s; {args.reps} runs each\n")
    print(f"{'preparation':<34} {'median ms':>10} {'min ms':>8} {'max ms':>8} {'x reset':>8}")
    for name, samples in (
        ("reset --hard + clean -ffdx", reset),
        ("fresh git worktree add", add_only),
        ("worktree remove + add", replace),
    ):
        median = statistics.median(samples)
        print(
            f"{name:<34} {median * 1000:>10.1f} {min(samples) * 1000:>8.1f} "
            f"{max(samples) * 1000:>8.1f} {median / base:>8.1f}"
        )


if __name__ == "__main__":
    main()
