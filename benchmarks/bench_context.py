"""Fix-file recall of the retry context on real bugs from real projects' history.

The corpus (benchmarks/corpus/context_bugs.json) lists bug-fix commits of
pallets/click, pallets/jinja and psf/requests that change a source file and add
a test: the repository, the fix commit, its parent, the test the fix added and
the source files the fix touched. No code of those projects is stored here:
each case is materialized from a local mirror of the project's git history
(`/work/.mirror/<owner>+<name>/repo`, or `$PATCHHEAL_MIRRORS/<owner>+<name>/repo`)
as the parent's tree with the fix's test files laid over it — the pre-fix code
and the test that fails on it. A case whose mirror is absent is skipped, with
a message.

The failing test is not run: the failure is derived from the test id alone
(`FAILED <test id>`, no traceback frames), the hardest input for localization
since nothing points past the test. For each case the context is built by
`build_context` and rendered by `render_context` within 8,000 tokens, with
localization (this change) and without it (the baseline: code around frames
and the failing test only, as before). A fix file counts as recalled when the
rendered context shows the pre-fix lines of every hunk the human fix changed
in it ("all hunks"); the looser "any hunk" figure is printed beside it.

Run: python benchmarks/bench_context.py [--budget 8000] [--limit N] [-v]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from patchheal.config import JobSpec
from patchheal.evidence.build import build_context, render_context
from patchheal.evidence.tokens import count_tokens, tokenizer_name
from patchheal.models import Classification, Failure, FailureClass

CORPUS = Path(__file__).resolve().parent / "corpus" / "context_bugs.json"
_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+\d+(?:,\d+)? @@", re.MULTILINE)
_SHOWN = re.compile(r"^`([^`]+)` lines (\d+)-(\d+):$", re.MULTILINE)


@dataclass
class Outcome:
    files: int
    all_hunks: int
    any_hunk: int
    tokens: int
    seconds: float


def mirror(repo: str) -> Path | None:
    roots = [Path(os.environ.get("PATCHHEAL_MIRRORS", "/work/.mirror"))]
    for root in roots:
        path = root / repo.replace("/", "+") / "repo"
        if path.is_dir():
            return path
    return None


def git(git_dir: Path, *args: str) -> str:
    return subprocess.run(
        ["git", f"--git-dir={git_dir}", *args], capture_output=True, text=True, check=True
    ).stdout


def materialize(case: dict[str, object], git_dir: Path, into: Path) -> None:
    """The parent's tree, the fix's test files over it, committed so `git ls-files` works."""
    parent, fix = str(case["parent"]), str(case["fix"])
    archive = subprocess.run(
        ["git", f"--git-dir={git_dir}", "archive", parent], capture_output=True, check=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    changed = git(git_dir, "diff", "--name-only", parent, fix).split()
    fix_files = set(case["fix_files"])  # type: ignore[arg-type]
    for name in changed:
        if name in fix_files or not name.endswith(".py"):
            continue  # the fix itself stays out: only its tests are laid over
        text = subprocess.run(
            ["git", f"--git-dir={git_dir}", "show", f"{fix}:{name}"], capture_output=True
        )
        if text.returncode == 0:
            (into / name).parent.mkdir(parents=True, exist_ok=True)
            (into / name).write_bytes(text.stdout)
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "b",
        "GIT_AUTHOR_EMAIL": "b@b",
        "GIT_COMMITTER_NAME": "b",
        "GIT_COMMITTER_EMAIL": "b@b",
    }
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "pre-fix"]):
        subprocess.run(["git", *args], cwd=into, check=True, env=env, capture_output=True)


def fix_hunks(case: dict[str, object], git_dir: Path) -> dict[str, list[tuple[int, int]]]:
    """Per fix file, the pre-fix line ranges its hunks replace (an insertion: the line before)."""
    out: dict[str, list[tuple[int, int]]] = {}
    for name in case["fix_files"]:  # type: ignore[attr-defined]
        diff = git(git_dir, "diff", "-U0", str(case["parent"]), str(case["fix"]), "--", name)
        ranges = []
        for m in _HUNK.finditer(diff):
            start, count = int(m[1]), int(m[2]) if m[2] is not None else 1
            ranges.append((max(start, 1), max(start + count - 1, start, 1)))
        out[name] = ranges
    return out


def shown(rendered: str) -> dict[str, list[tuple[int, int]]]:
    out: dict[str, list[tuple[int, int]]] = {}
    for m in _SHOWN.finditer(rendered):
        out.setdefault(m[1], []).append((int(m[2]), int(m[3])))
    return out


def covered(hunk: tuple[int, int], windows: list[tuple[int, int]]) -> bool:
    return any(s <= hunk[0] and hunk[1] <= e for s, e in windows)


def measure(case: dict[str, object], tree: Path, git_dir: Path, budget: int, code: int) -> Outcome:
    test = str(case["test"])
    job = JobSpec.model_validate(
        {
            "job": {"id": "bench", "repo": str(tree)},
            "steps": [{"name": "tests", "command": f"pytest -q {test}"}],
        }
    )
    failure = Failure(
        fingerprint="0" * 64,
        error_type="AssertionError",
        summary=f"FAILED {test} - AssertionError",
        failing_tests=(test,),
        source="pytest",
    )
    started = time.perf_counter()
    ctx = build_context(
        job=job,
        step_index=1,
        failure=failure,
        classification=Classification(failure_class=FailureClass.CODE_BUG, retryable=True),
        worktree=tree,
        prior=[],
        hints=[],
        code_budget_tokens=code,
    )
    text = render_context(ctx, max_tokens=budget)
    seconds = time.perf_counter() - started
    windows = shown(text)
    hunks = fix_hunks(case, git_dir)
    all_hunks = sum(1 for f, hs in hunks.items() if all(covered(h, windows.get(f, [])) for h in hs))
    any_hunk = sum(1 for f, hs in hunks.items() if any(covered(h, windows.get(f, [])) for h in hs))
    return Outcome(len(hunks), all_hunks, any_hunk, count_tokens(text), seconds)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=int, default=8000)
    parser.add_argument("--limit", type=int, default=0)
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args()
    cases = json.loads(CORPUS.read_text())[: args.limit or None]
    results: dict[str, list[Outcome]] = {"localized": [], "baseline": []}
    skipped: list[str] = []
    for case in cases:
        git_dir = mirror(str(case["repo"]))
        if git_dir is None:
            skipped.append(f"{case['repo']} {str(case['fix'])[:10]}: no mirror of {case['repo']}")
            continue
        with tempfile.TemporaryDirectory(prefix="bench-context-") as tmp:
            tree = Path(tmp)
            materialize(case, git_dir, tree)
            new = measure(case, tree, git_dir, args.budget, args.budget)
            old = measure(case, tree, git_dir, args.budget, 0)
        results["localized"].append(new)
        results["baseline"].append(old)
        if args.verbose:
            print(
                f"{case['repo']:<16} {str(case['fix'])[:10]} {case['test']:<70} "
                f"new {new.all_hunks}/{new.files} old {old.all_hunks}/{old.files} "
                f"{new.tokens} tok {new.seconds:.2f}s",
                file=sys.stderr,
            )
    for line in skipped:
        print(f"SKIP {line}", file=sys.stderr)
    if not results["localized"]:
        print("no case could be materialized: fetch the mirrors first (see benchmarks/README.md)")
        return 0
    n = len(results["localized"])
    print(
        f"{n} bugs ({len(skipped)} skipped), budget {args.budget} tokens, "
        f"tokenizer {tokenizer_name()}\n"
    )
    print("| context | fix-file recall (all hunks) | (any hunk) | median tokens | median s |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for name, rows in results.items():
        files = sum(r.files for r in rows)
        print(
            f"| {name} | {100 * sum(r.all_hunks for r in rows) / files:.1f} % "
            f"| {100 * sum(r.any_hunk for r in rows) / files:.1f} % "
            f"| {statistics.median(r.tokens for r in rows):.0f} "
            f"| {statistics.median(r.seconds for r in rows):.2f} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
