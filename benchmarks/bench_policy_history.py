"""The policy gate over real projects' own commits: what it refuses that a person wrote.

Each non-merge commit of a project's history (the fetch tool's mirrors, see
bench_context.py) is judged as if a candidate had proposed it, by this tree's
policy gate and, in the same run, by the gate of `--against` (a revision of
this repository, checked out in a temporary worktree and run in a child
process). The job's defaults apply (`PolicySpec()`), with the pre-patch files
read from the commit's parent. The `size` rule is left out of the counts (a
real commit may be bigger than a candidate may be; it says nothing about the
other rules).

A real commit often changes existing tests on purpose, so `test_tampering`
refusing it is expected; what the table shows is the difference: commits the
new gate refuses that the old did not (each listed with its new reasons),
and the other way round. A rule that refuses what people commit every day
would refuse real fixes too.

    python benchmarks/bench_policy_history.py --against 0f50ec7
    python benchmarks/bench_policy_history.py --against 0f50ec7 --commits 200 --repo pallets/click
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_context import mirror
from bench_lines_cost import ROOT, checkout

REPOS = (
    "pallets/click",
    "pallets/jinja",
    "pallets/itsdangerous",
    "pallets/markupsafe",
    "psf/requests",
    "python-attrs/attrs",
    "more-itertools/more-itertools",
    "marshmallow-code/marshmallow",
    "andialbrecht/sqlparse",
    "astanin/python-tabulate",
    "kjd/idna",
    "tkem/cachetools",
    # pytest plugins: their conftests and tests name hooks all the time.
    "pytest-dev/pytest-xdist",
    "pytest-dev/pytest-mock",
)


def _git(git_dir: Path, *args: str) -> str:
    done = subprocess.run(["git", f"--git-dir={git_dir}", *args], capture_output=True, check=False)
    return done.stdout.decode("utf-8", "replace") if done.returncode == 0 else ""


def commits(git_dir: Path, count: int) -> list[tuple[str, str]]:
    """(commit, first parent) of the newest `count` non-merge commits with a parent."""
    out = _git(git_dir, "log", "--no-merges", f"-n{count}", "--format=%H %P", "HEAD")
    return [
        (line.split()[0], line.split()[1]) for line in out.splitlines() if len(line.split()) > 1
    ]


def judge(git_dir: Path, pairs: list[tuple[str, str]]) -> Iterator[dict[str, object]]:
    """Each commit's decision by the gate importable here, the size rule left out."""
    from patchheal.config import PolicySpec
    from patchheal.gates.policy import check_candidate

    policy = PolicySpec(max_changed_lines=1_000_000, max_files=100_000)
    for commit, parent in pairs:
        diff = _git(git_dir, "diff", "--no-color", "--no-ext-diff", "-M", parent, commit)
        if not diff.strip():
            continue

        def original(path: str, parent: str = parent) -> str | None:
            text = _git(git_dir, "show", f"{parent}:{path}")
            return text or None

        decision = check_candidate(diff, policy, original)
        yield {
            "commit": commit,
            "rule": None if decision.allowed else decision.rule,
            "reasons": list(decision.reasons),
        }


def _child(args: argparse.Namespace) -> int:
    """In the process of one side: every commit's decision as JSON lines on stdout."""
    for repo in args.repo:
        git_dir = mirror(repo)
        if git_dir is None:
            continue
        for row in judge(git_dir, commits(git_dir, args.commits)):
            print(json.dumps({"repo": repo, **row}), flush=True)
    return 0


def _side(tree: Path, args: argparse.Namespace) -> dict[tuple[str, str], dict[str, object]]:
    argv = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--child",
        "--commits",
        str(args.commits),
    ]
    for repo in args.repo:
        argv += ["--repo", repo]
    env = {**os.environ, "PYTHONPATH": str(tree)}
    done = subprocess.run(argv, cwd=tree, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:  # the gate of that tree failed: its own words, not ours
        tail = done.stderr.strip().splitlines()[-1:] or ["no output"]
        raise SystemExit(f"the policy gate at {tree} failed (exit {done.returncode}): {tail[0]}")
    rows = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    return {(str(r["repo"]), str(r["commit"])): r for r in rows}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--against", default="HEAD~1", help="the revision to compare with")
    parser.add_argument("--commits", type=int, default=400, help="newest commits per project")
    parser.add_argument("--repo", action="append", default=[], help="a project (repeatable)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    args.repo = args.repo or list(REPOS)
    if args.child:
        return _child(args)
    missing = [repo for repo in args.repo if mirror(repo) is None]
    args.repo = [repo for repo in args.repo if repo not in missing]
    known = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--verify", "--quiet", f"{args.against}^{{commit}}"],
        capture_output=True,
        check=False,
    )
    if known.returncode != 0:
        print(f"--against {args.against!r}: no such revision in {ROOT}", file=sys.stderr)
        return 2
    new = _side(ROOT, args)
    with checkout(args.against) as tree:
        old = _side(tree, args)
    print(f"policy gate over real commits: this tree against {args.against} (size rule off)\n")
    print("| project | commits | refused before | refused now | newly refused | no longer |")
    print("| --- | --- | --- | --- | --- | --- |")
    newly: list[tuple[str, str, list[str]]] = []
    total = [0, 0, 0, 0, 0]
    for repo in args.repo:
        keys = [k for k in new if k[0] == repo and k in old]
        before = sum(old[k]["rule"] is not None for k in keys)
        now = sum(new[k]["rule"] is not None for k in keys)
        more = [k for k in keys if old[k]["rule"] is None and new[k]["rule"] is not None]
        fewer = [k for k in keys if old[k]["rule"] is not None and new[k]["rule"] is None]
        newly += [(k[0], k[1], list(new[k]["reasons"])) for k in more]  # type: ignore[arg-type]
        for i, value in enumerate((len(keys), before, now, len(more), len(fewer))):
            total[i] += value
        print(f"| {repo} | {len(keys)} | {before} | {now} | {len(more)} | {len(fewer)} |")
    print("| **all** | " + " | ".join(str(v) for v in total) + " |")
    changed = [
        (k, old[k]["reasons"], new[k]["reasons"])
        for k in new
        if k in old and old[k]["rule"] is not None and old[k]["reasons"] != new[k]["reasons"]
    ]
    print(f"\nrefused by both, with other reasons now: {len(changed)}")
    for (repo, commit), was, now in changed[:20]:
        added = [r for r in now if r not in was]  # type: ignore[union-attr]
        print(f"- {repo} {commit[:12]}: + {'; '.join(added)[:300]}")
    print(f"\nnewly refused: {len(newly)}")
    for repo, commit, reasons in newly:
        print(f"- {repo} {commit[:12]}: {'; '.join(reasons)[:300]}")
    if missing:
        print(f"\nno mirror (left out): {', '.join(missing)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
