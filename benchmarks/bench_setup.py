"""Job setup on a long history: the private repository + first worktree vs `git clone --depth 1`.

Run: python benchmarks/bench_setup.py [--commits 50000] [--files 2000] [--reps 5]

Generates, with `git fast-import`, a repository of --commits commits (each
rewrites one of --files source files, so the history holds about --commits
blobs) and a second one whose single commit has the same tip tree. Then
times, each on a fresh destination:

- baseline: `git clone --depth 1 --quiet file://<repo>` (checkout included);
- measured: `JobWorkspace.open()` + its first `worktree()` (what a job pays
  before its first step), on the long history and on the one-commit copy;
- full history: what `open()` did before issue 16 (a bare repository that
  fetches the base with all its ancestors, then `git worktree add`).

Medians of --reps runs and the ratio to the baseline's median, all measured
in this run. A baseline or measured command that fails, or a worktree whose
files differ from the clone's, stops the benchmark with an error.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from patchheal.errors import PatchhealError
from patchheal.workspace.worktrees import JobWorkspace

_ENV = {
    **os.environ,
    "GIT_AUTHOR_NAME": "bench",
    "GIT_AUTHOR_EMAIL": "bench@localhost",
    "GIT_COMMITTER_NAME": "bench",
    "GIT_COMMITTER_EMAIL": "bench@localhost",
}


class BenchFailed(RuntimeError):
    """A timed command failed: there is no ratio to print."""


def git(*args: str, cwd: Path, stdin: bytes | None = None) -> str:
    done = subprocess.run(
        ["git", *args], cwd=cwd, env=_ENV, input=stdin, capture_output=True, check=False
    )
    if done.returncode != 0:
        raise BenchFailed(f"git {' '.join(args)} failed: {done.stderr.decode(errors='replace')}")
    return done.stdout.decode().strip()


def file_body(index: int, version: int) -> bytes:
    return "".join(f"def f{index}_{j}(x):\n    return x * {j} + {version}\n\n"
                   for j in range(20)).encode()  # fmt: skip


def fast_import_stream(commits: int, files: int) -> bytes:
    """Commit 0 writes every file; commit n > 0 rewrites file n % files."""
    out: list[bytes] = []
    for n in range(commits):
        message = f"commit {n}".encode()
        out.append(b"commit refs/heads/main\n")
        out.append(f"committer bench <bench@localhost> {1_000_000_000 + n} +0000\n".encode())
        out.append(b"data %d\n%s\n" % (len(message), message))
        touched = range(files) if n == 0 else (n % files,)
        for index in touched:
            body = file_body(index, n)
            path = f"pkg{index % 50:02d}/mod{index:05d}.py"
            out.append(f"M 644 inline {path}\n".encode())
            out.append(b"data %d\n%s\n" % (len(body), body))
    return b"".join(out)


def make_repos(root: Path, commits: int, files: int) -> tuple[Path, Path]:
    """The long-history repository and a one-commit repository with the same tip tree."""
    long_repo, short_repo = root / "long", root / "short"
    for repo in (long_repo, short_repo):
        repo.mkdir()
        git("init", "-q", "-b", "main", cwd=repo)
    git("fast-import", "--quiet", cwd=long_repo, stdin=fast_import_stream(commits, files))
    git("reset", "-q", "--hard", "main", cwd=long_repo)
    git("fetch", "-q", "--depth", "1", f"file://{long_repo}", "main", cwd=short_repo)
    tree = git("rev-parse", "FETCH_HEAD^{tree}", cwd=short_repo)
    root_commit = git("commit-tree", tree, "-m", "one commit", cwd=short_repo)
    git("reset", "-q", "--hard", root_commit, cwd=short_repo)
    return long_repo, short_repo


def tracked_files(tree: Path) -> list[str]:
    return sorted(git("ls-files", cwd=tree).splitlines())


def timed(run: Callable[[Path], Path], scratch: Path, reps: int, expect: list[str]) -> list[float]:
    """`reps` runs of `run(destination)`; each must yield a worktree with the files `expect`."""
    samples = []
    for rep in range(reps):
        dest = scratch / f"run{rep}"
        started = time.perf_counter()
        tree = run(dest)
        samples.append(time.perf_counter() - started)
        if expect and tracked_files(tree) != expect:
            raise BenchFailed(f"{tree} does not hold the base's files")
        shutil.rmtree(dest)
    return samples


def clone_depth_1(repo: Path) -> Callable[[Path], Path]:
    def run(dest: Path) -> Path:
        git("clone", "--depth", "1", "--quiet", f"file://{repo}", str(dest), cwd=repo.parent)
        return dest

    return run


def job_setup(repo: Path) -> Callable[[Path], Path]:
    def run(dest: Path) -> Path:
        workspace = JobWorkspace(repo, "main", "bench", root=dest)
        try:
            workspace.open()
            return workspace.worktree("first")
        except PatchhealError as exc:
            raise BenchFailed(f"JobWorkspace setup failed: {exc}") from exc

    return run


def full_history_setup(repo: Path) -> Callable[[Path], Path]:
    """The pre-issue-16 private repository: the base and every ancestor."""

    def run(dest: Path) -> Path:
        private = dest / "repo.git"
        sha = git("rev-parse", "main^{commit}", cwd=repo)
        git("init", "--bare", "--quiet", str(private), cwd=repo.parent)
        git("fetch", "--no-tags", "--quiet", str(repo), f"+{sha}:refs/patchheal/base", cwd=private)
        git("worktree", "add", "--detach", "--quiet", str(dest / "wt" / "first"), sha, cwd=private)
        return dest / "wt" / "first"

    return run


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--commits", type=int, default=50_000)
    parser.add_argument("--files", type=int, default=2000)
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-setup-") as name:
        scratch = Path(name)
        started = time.perf_counter()
        long_repo, short_repo = make_repos(scratch, args.commits, args.files)
        made = time.perf_counter() - started
        expect = tracked_files(long_repo)
        runs = scratch / "runs"
        runs.mkdir()
        try:
            rows = [
                ("git clone --depth 1 file:// (baseline)",
                 timed(clone_depth_1(long_repo), runs, args.reps, expect)),
                ("open() + first worktree",
                 timed(job_setup(long_repo), runs, args.reps, expect)),
                ("open() + first worktree, 1-commit repo",
                 timed(job_setup(short_repo), runs, args.reps, expect)),
                ("full-history fetch + worktree add (old)",
                 timed(full_history_setup(long_repo), runs, args.reps, expect)),
            ]  # fmt: skip
        except BenchFailed as exc:
            print(f"bench_setup: {exc}", file=sys.stderr)
            return 1
    count = git("--version", cwd=Path.cwd())
    print(f"repository: {args.commits} commits, {len(expect)} files at the tip "
          f"(generated in {made:.1f} s); {count}; {args.reps} runs each\n")  # fmt: skip
    baseline = statistics.median(rows[0][1])
    print(f"{'setup':<42} {'median ms':>10} {'min ms':>8} {'max ms':>8} {'x clone':>8}")
    for label, samples in rows:
        median = statistics.median(samples)
        print(f"{label:<42} {median * 1000:>10.1f} {min(samples) * 1000:>8.1f} "
              f"{max(samples) * 1000:>8.1f} {median / baseline:>8.2f}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
