"""Ref lookups in the private repository: GitPython (persistent Repo) vs a git subprocess.

Run: python benchmarks/bench_gitlayer.py [--lookups 300]

Opens a JobWorkspace on a small generated repository, makes one commit in a
worktree (so the lookups resolve a sha, a short sha and a ref), then times
resolving those three names to a commit sha by:

- subprocess: `proc.git rev-parse --verify --quiet <ref>^{commit}` (the
  helper every other git call goes through; the baseline);
- PrivateRefs: one persistent `git.Repo` (what JobWorkspace now uses);
- fresh PrivateRefs per lookup (a `git.Repo` built and closed each time);
- GitPython's own command wrapper (`repo.git.rev_parse`, one subprocess each).

Every way must return the same shas as the baseline, or the benchmark stops.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from patchheal import proc
from patchheal.workspace.gitrepo import PrivateRefs
from patchheal.workspace.worktrees import JobWorkspace


def median_ms(lookup: Callable[[str], str], names: list[str], reps: int) -> tuple[float, list[str]]:
    samples, answers = [], [lookup(name) for name in names]
    for index in range(reps):
        name = names[index % len(names)]
        started = time.perf_counter()
        lookup(name)
        samples.append(time.perf_counter() - started)
    return statistics.median(samples) * 1000, answers


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--lookups", type=int, default=300)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-gitlayer-") as name:
        root = Path(name)
        repo = root / "repo"
        repo.mkdir()
        for argv in (("init", "-q", "-b", "main"), ("commit", "-q", "--allow-empty", "-m", "x")):
            proc.git(*argv, cwd=repo)
        workspace = JobWorkspace(repo, "main", "bench", root=root / "wt")
        workspace.open()
        tree = workspace.worktree("a")
        (tree / "f.txt").write_text("f\n")
        made = workspace.commit(tree, "one")
        names = [made, made[:12], "refs/patchheal/base"]
        private = workspace.private
        refs = PrivateRefs(private)

        def subprocess_lookup(ref: str) -> str:
            result = proc.git("rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}",
                              cwd=private, check=False)  # fmt: skip
            return result.output.strip()

        def fresh_lookup(ref: str) -> str:
            fresh = PrivateRefs(private)
            try:
                return fresh.commit(ref)
            finally:
                fresh.close()

        def wrapper_lookup(ref: str) -> str:
            return str(refs._repo.git.rev_parse("--verify", "--quiet", f"{ref}^{{commit}}"))

        rows = [
            ("proc.git rev-parse (baseline)", subprocess_lookup),
            ("PrivateRefs, persistent git.Repo", refs.commit),
            ("PrivateRefs, fresh git.Repo each", fresh_lookup),
            ("GitPython command wrapper", wrapper_lookup),
        ]
        results = [(label, *median_ms(lookup, names, args.lookups)) for label, lookup in rows]
        refs.close()
        workspace.destroy()
    expected = results[0][2]
    for label, _, answers in results:
        if answers != expected or not all(answers):
            print(f"bench_gitlayer: {label} answered {answers}, not {expected}", file=sys.stderr)
            return 1
    baseline = results[0][1]
    print(f"{args.lookups} lookups each of a sha, a short sha and a ref\n")
    print(f"{'lookup':<36} {'median ms':>10} {'x subprocess':>13}")
    for label, median, _ in results:
        print(f"{label:<36} {median:>10.3f} {median / baseline:>13.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
