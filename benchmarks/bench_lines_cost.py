"""What issue 33's lines of defence cost a verified candidate, against the commit before them.

Issue 33 added, to a verification that already had its impossible twin (one
more run of the failing step since issue 24), the monitor's assertion
evidence from the test's own frame, every runner object snapshotted and each
outcome streamed, the twin made in memory at a random place and run as it
is too, the one door into the verdict and no bytecode from the tree. None
of them can be switched off: they are the verdict. So the baseline is the
real thing, patchheal as it was before them (`--base`, by default
BEFORE_ISSUE_33), checked out from this repository's own history into a
temporary git worktree.

Each side runs `patchheal demo` (Docker harness, its own store and images)
in a fresh directory, alternated, after one warm-up each that builds its
images; the figure is the wall time of the demo's verified candidate
(06-fix_boundary: apply, gates, the failing step's verification runs, its
twin and the regression step) as each side's attempt store recorded it, and
the ratio of the medians.

    python benchmarks/bench_lines_cost.py --runs 5
    python benchmarks/bench_lines_cost.py --runs 5 --base <commit>
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# The last commit on main before issue 33's first line landed (b89e736, the twin made in
# memory, merged in 0edd8c0): its verification has the twin on disk, no frame evidence,
# no runner snapshot and trusts the tree's bytecode.
BEFORE_ISSUE_33 = "b8bd612"
DEMO_JOB = "demo-pricing"


@contextlib.contextmanager
def checkout(rev: str) -> Iterator[Path]:
    """This repository at `rev`, in a temporary detached worktree removed afterwards."""
    with tempfile.TemporaryDirectory(prefix="bench-lines-base-") as parent:
        tree = Path(parent) / "patchheal"
        subprocess.run(
            ["git", "-C", str(ROOT), "worktree", "add", "--detach", "-q", str(tree), rev],
            check=True,
        )
        try:
            yield tree
        finally:
            subprocess.run(
                ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)],
                check=False,
            )


def verified_seconds(code: Path) -> float:
    """One `patchheal demo` run from the package in `code`; its verified candidate's time."""
    with tempfile.TemporaryDirectory(prefix="bench-lines-") as root:
        db = Path(root) / "attempts.sqlite3"
        argv = [sys.executable, "-m", "patchheal", "-q", "demo", "--workdir", f"{root}/demo"]
        argv += ["--db", str(db), "--reports", f"{root}/reports"]
        env = {**os.environ, "PYTHONPATH": str(code)}
        done = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise SystemExit(f"demo from {code} exited {done.returncode}:\n{done.stderr[-2000:]}")
        with contextlib.closing(sqlite3.connect(db)) as store:
            rows = store.execute(
                "SELECT duration_seconds FROM attempts WHERE job_id = ? AND outcome = 'fixed'",
                (DEMO_JOB,),
            ).fetchall()
    if len(rows) != 1:
        raise SystemExit(f"demo from {code}: {len(rows)} fixed attempts, expected 1")
    return float(rows[0][0])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="measured demo runs per side")
    parser.add_argument("--base", default=BEFORE_ISSUE_33, help="the commit to compare with")
    args = parser.parse_args()
    head = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    times: dict[str, list[float]] = {"head": [], "base": []}
    with checkout(args.base) as base:
        sides = {"head": ROOT, "base": base}
        for code in sides.values():  # warm-up: each side builds its own images
            verified_seconds(code)
        for _ in range(args.runs):
            for side, code in sides.items():
                times[side].append(verified_seconds(code))
    with_, without = statistics.median(times["head"]), statistics.median(times["base"])
    print("| verified candidate (demo job, Docker) | median s | runs (s) |")
    print("| --- | --- | --- |")
    named = {"head": f"with issue 33's lines ({head})", "base": f"before ({args.base})"}
    for side, rev in named.items():
        runs = ", ".join(f"{t:.2f}" for t in times[side])
        print(f"| {rev} | {statistics.median(times[side]):.2f} | {runs} |")
    print(f"| ratio (goal <= 1.25) | {with_ / without:.2f} | |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
