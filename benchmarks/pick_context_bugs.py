"""Pick bug-fix commits for bench_context.py's corpus from local mirrors of real projects.

A case is a non-merge commit whose subject says fix/bug, that changes 1-3
source files (at most 80 changed lines, each present in the parent) outside the
tests, and adds a `def test_...` to a test file: the first test it adds is the
failing test, the source files are the fix. Commits already in the corpus are
skipped; `--since` keeps to history new enough to run on Python 3.11; the
picks are spread evenly over what qualifies and marked `"set": "added"` (the
first 60 cases are the set localization was tuned on, requests excepted).
BugsInPy is never used.

Run: python benchmarks/pick_context_bugs.py REPO --since YYYY-MM-DD --count N [--write]
(REPO is owner/name with a mirror under /work/.mirror or $PATCHHEAL_MIRRORS.)
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

from bench_context import CORPUS, mirror

_SUBJECT = re.compile(r"\b(fix|fixes|fixed|bug)\b", re.IGNORECASE)
_ADDED_TEST = re.compile(r"^\+\s*(?:async\s+)?def (test_\w+)", re.MULTILINE)
_TEST_FILE = re.compile(r"(?:^|/)tests?/.*\.py$|(?:^|/)test_[^/]*\.py$")


def _git(git_dir: Path, *args: str) -> str:
    return subprocess.run(
        ["git", f"--git-dir={git_dir}", *args], capture_output=True, text=True, check=True
    ).stdout


def candidate(git_dir: Path, fix: str) -> dict[str, object] | None:
    parent = _git(git_dir, "rev-parse", f"{fix}^").strip()
    numstat = _git(git_dir, "diff", "--numstat", parent, fix).splitlines()
    sources, tests, changed = [], [], 0
    for line in numstat:
        added, removed, name = line.split("\t", 2)
        if not name.endswith(".py") or added == "-":
            continue
        if _TEST_FILE.search(name) or "conftest" in name:
            tests.append(name)
        elif not name.startswith(("docs/", "examples/", "scripts/", "setup.py")):
            sources.append(name)
            changed += int(added) + int(removed)
    if not 1 <= len(sources) <= 3 or changed > 80 or not tests:
        return None
    present = set(_git(git_dir, "ls-tree", "-r", "--name-only", parent).split())
    if not all(s in present for s in sources):
        return None
    for test_file in tests:
        found = _ADDED_TEST.findall(_git(git_dir, "diff", parent, fix, "--", test_file))
        if found:
            return {"fix": fix, "parent": parent, "test": f"{test_file}::{found[0]}",
                    "fix_files": sorted(sources)}  # fmt: skip
    return None


def candidates(git_dir: Path, window: list[str], known: set[str]) -> list[dict[str, object]]:
    """Every qualifying commit of the history in `window` (`--since=...`), newest first,
    that is not in `known`."""
    log = _git(git_dir, "log", "--no-merges", *window, "--format=%H %s", "HEAD")
    found = []
    for line in log.splitlines():
        fix, _, subject = line.partition(" ")
        if fix in known or not _SUBJECT.search(subject):
            continue
        case = candidate(git_dir, fix)
        if case is not None:
            found.append(case)
    return found


def spread(
    found: list[dict[str, object]], count: int, corpus: list[object], write_to: Path | None
) -> int:
    """`count` of `found` spread evenly over it, printed, and appended to the corpus at
    `write_to` (when given)."""
    step = max(len(found) / max(count, 1), 1.0)
    picks = [found[int(i * step)] for i in range(min(count, len(found)))]
    print(f"{len(found)} qualify, {len(picks)} picked", file=sys.stderr)
    print(json.dumps(picks, indent=1))
    if write_to is not None:
        write_to.write_text(json.dumps(corpus + picks, indent=1) + "\n")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("repo")
    parser.add_argument("--since", required=True)
    parser.add_argument("--count", type=int, default=10)
    parser.add_argument("--write", action="store_true", help="append the picks to the corpus")
    args = parser.parse_args()
    git_dir = mirror(args.repo)
    if git_dir is None:
        print(f"no mirror of {args.repo}", file=sys.stderr)
        return 2
    corpus = json.loads(CORPUS.read_text())
    known = {c["fix"] for c in corpus}
    found = [
        {"repo": args.repo, **case, "set": "added"}
        for case in candidates(git_dir, [f"--since={args.since}"], known)
    ]
    return spread(found, args.count, corpus, CORPUS if args.write else None)


if __name__ == "__main__":
    sys.exit(main())
