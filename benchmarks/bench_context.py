"""Fix-file recall of the retry context on real bugs from real projects' history.

The corpus (benchmarks/corpus/context_bugs.json) lists bug-fix commits of
pallets/click, pallets/jinja, psf/requests, marshmallow-code/marshmallow,
python-attrs/attrs and more-itertools/more-itertools that change a source file and add
a test: the repository, the fix commit, its parent, the test the fix added and
the source files the fix touched. No code of those projects is stored here:
each case is materialized from a local mirror of the project's git history
(`/work/.mirror/<owner>+<name>/repo`, or `$PATCHHEAL_MIRRORS/<owner>+<name>/repo`)
as the parent's tree with the fix's test files laid over it: the pre-fix code
and the test that fails on it. A case whose mirror is absent is skipped, with
a message. The fix itself is never shown to localization: it only scores.

Each case's failing test is run for real, as patchheal's reproduction runs a
step: through the Docker python harness (Python 3.11, network disabled, the
collectors loaded, `trace=True`), `python -m pytest -q <the test's file>` on
the pre-fix tree. The failure is analyzed from what it printed, and the pytest
collector's trace of the failing test (the project functions and lines it
executed, its traceback frames, how many of the file's passing tests ran each
function and line) goes to localization. A case "runs" when its test ran and
failed in the call phase (so it has a trace); it is a *reproduced* bug when the
same test then passes on the fix's tree, and the headline figure is over those,
since patchheal proposes only after its reproduction failed. One that cannot run
on Python 3.11 (old code, a collection error, a missing dependency) falls back
to the static path: the failure derived from the test id alone (`FAILED <test
id>`, no frames), which is also measured for every case as the comparison, as
is the run with its line-level contrast removed (per-function contrast). The
dependency image is one per project (a fixed install list, `SETUP`), not the
project's own setup at each commit, so 164 commits need 6 images: the tree's
dependency files (which the harness fingerprints) are moved aside for the run,
and pytest is pointed at the one that held its configuration (`-c`).

The context is built by `build_context` and rendered by `render_context`
within 8,000 tokens. A fix file counts as recalled when the rendered context
shows the pre-fix lines of every hunk the human fix changed in it ("all
hunks"); the looser "any hunk" figure is printed beside it. Localization was
tuned on click and jinja; requests, marshmallow, attrs and more-itertools are
printed apart as held out (the keyword signal's two constants were chosen over
the first three too; more-itertools was added after that, untouched by any
tuning). `--repo OWNER/NAME`, repeatable, measures only those projects' cases.

Run: python benchmarks/bench_context.py [--budget 8000] [--limit N] [--static-only]
     [--runs DIR] [--repo OWNER/NAME] [-v]
(`--runs DIR` keeps each case's run there and reuses it on the next call.)
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
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
from patchheal.failure.analysis import analyze
from patchheal.harness.definitions import load_harness
from patchheal.harness.docker.harness import DockerHarness
from patchheal.harness.setup.deps import DEPENDENCY_GLOBS
from patchheal.models import Classification, Failure, FailureClass, TestResults, TestTrace

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


_TEST_DATA = re.compile(r"(?:^|/)tests?/")


def materialize(
    case: dict[str, object], git_dir: Path, into: Path, *, with_fix: bool = False
) -> None:
    """The parent's tree, the fix's test files over it (its `.py` files and whatever it
    changes under a `test/` or `tests/` directory: a test's data file, such as sqlparse's
    `tests/files/*.sql`), and its source files too when `with_fix`; committed so
    `git ls-files` works."""
    parent, fix = str(case["parent"]), str(case["fix"])
    archive = subprocess.run(
        ["git", f"--git-dir={git_dir}", "archive", parent], capture_output=True, check=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    changed = git(git_dir, "diff", "--name-only", parent, fix).split()
    fix_files = set(case["fix_files"])  # type: ignore[arg-type]
    for name in changed:
        if (name in fix_files and not with_fix) or not (
            name.endswith(".py") or _TEST_DATA.search(name)
        ):
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


# One fixed dependency install per project (see the docstring), as `pip install` setup lines.
SETUP: dict[str, list[str]] = {
    "pallets/click": [],
    "pallets/jinja": ["pip install 'MarkupSafe==2.0.1'"],
    "psf/requests": [
        "pip install 'urllib3<2' chardet idna certifi charset_normalizer "
        "pytest-mock pytest-httpbin trustme PySocks"
    ],
    "marshmallow-code/marshmallow": ["pip install pytz simplejson"],
    "more-itertools/more-itertools": [],
    # attrs: a pytest that does not import attrs itself (Debian's 7.2 in the image does, and
    # with the tree on PYTHONPATH would get the tree's, too old for it before 2019).
    "python-attrs/attrs": [
        "pip install 'pytest>=8,<9' hypothesis pympler zope.interface six cloudpickle "
        "importlib_metadata typing_extensions"
    ],
}
HELD_OUT = {
    "psf/requests",
    "marshmallow-code/marshmallow",
    "python-attrs/attrs",
    "more-itertools/more-itertools",
}
_DEPENDENCY_FILES = (*DEPENDENCY_GLOBS, "tox.ini")


@dataclass
class Run:
    """What running the case's failing test showed, or why it could not be used."""

    output: str = ""
    traces: dict[str, TestTrace] | None = None
    reason: str = ""
    fixed_passes: bool | None = None  # the same test on the fix's tree (None: not run)

    @property
    def usable(self) -> bool:
        return bool(self.traces)

    @property
    def reproduced(self) -> bool:
        """A reproduced bug: the test fails before the fix and passes after it."""
        return self.usable and bool(self.fixed_passes)


def same_test(node_id: str, test: str) -> bool:
    """`tests/t.py::TestX::test_y[1]` is the corpus's `tests/t.py::test_y`."""
    file, _, name = test.partition("::")
    parts = node_id.split("::")
    return parts[0] == file and parts[-1].split("[")[0] == name.split("::")[-1].split("[")[0]


def _config_aside(tree: Path) -> tuple[Path, list[str]]:
    """Move the dependency files aside for the run (the harness's dependency fingerprint
    reads them from the tree) and name the one holding pytest's configuration, if any."""
    aside = tree / ".bench-config"
    aside.mkdir()
    for pattern in _DEPENDENCY_FILES:
        for path in sorted(tree.glob(pattern)):
            target = aside / path.relative_to(tree)
            target.parent.mkdir(parents=True, exist_ok=True)
            path.rename(target)
    for name, section in (
        ("pyproject.toml", "[tool.pytest"),
        ("setup.cfg", "[tool:pytest]"),
        ("tox.ini", "[pytest]"),
    ):
        config = aside / name
        if config.is_file() and section in config.read_text(errors="replace"):
            # --confcutdir: else the conftest.py at the tree's root (attrs) is above the
            # configuration file's directory and not loaded.
            return aside, ["-c", f".bench-config/{name}", "--rootdir", ".", "--confcutdir", "."]
    return aside, []


def _config_back(tree: Path, aside: Path) -> None:
    for path in sorted(aside.rglob("*"), reverse=True):
        if path.is_file():
            target = tree / path.relative_to(aside)
            target.parent.mkdir(parents=True, exist_ok=True)
            path.rename(target)
    shutil.rmtree(aside)


def _harness(repo: str, harnesses: dict[str, DockerHarness]) -> DockerHarness:
    if repo not in harnesses:
        harnesses[repo] = DockerHarness(
            load_harness("python"), job_id=f"bench-context-{repo.split('/')[1]}", setup=SETUP[repo]
        )
    return harnesses[repo]


def _pytest(
    harness: DockerHarness, tree: Path, targets: list[str], *, trace: bool
) -> tuple[str, TestResults | None]:
    """`python -m pytest -q TARGETS` on `tree` in the harness, its configuration aside."""
    aside, config = _config_aside(tree)
    # Absolute: a relative `pythonpath` is read from the configuration file's directory.
    src = f"{harness.defn.sandbox.workdir}/src"
    layout = ["-o", f"pythonpath={src}"] if config and (tree / "src").is_dir() else []
    # And importable from the interpreter's start, as the installed package is in the
    # project's CI: pytest resolves its configuration's warning filters (marshmallow's
    # `ignore::marshmallow.warnings...`) and imports its own dependencies (attrs) before
    # the ini `pythonpath` applies. After the collectors, which must come first.
    env = f'PYTHONPATH="$PYTHONPATH:{src}" ' if (tree / "src").is_dir() else ""
    argv = ["python", "-m", "pytest", "-q", "-p", "no:cacheprovider", *config, *layout, *targets]
    try:
        result = harness.run(
            env + shlex.join(argv), tree, timeout=300, idle_timeout=120, trace=trace
        )
    finally:
        harness.close()  # one sandbox per tree: the next case has another tree
        _config_back(tree, aside)
    return result.output, result.tests


def run_case(
    case: dict[str, object], tree: Path, git_dir: Path, harnesses: dict[str, DockerHarness]
) -> Run:
    """The failing test in the Docker python harness, as the reproduction runs a step; then,
    if it failed, the same test on the fix's tree, which must pass for a reproduced bug."""
    repo, test = str(case["repo"]), str(case["test"])
    harness = _harness(repo, harnesses)
    # The test's whole file, as a step often runs it: its passing tests are the contrast
    # for the failing one's trace (the corpus names a test without its class).
    output, tests = _pytest(harness, tree, [test.partition("::")[0]], trace=True)
    if tests is None:
        return Run(output, None, "no results (collection failed or pytest crashed)")
    traces = {t: tr for t, tr in tests.traces.items() if same_test(t, test)}
    if not traces:
        outcome = {o for t, o in tests.outcomes.items() if same_test(t, test)} or {"not run"}
        return Run(output, None, f"the test did not fail in its call ({', '.join(outcome)})")
    with tempfile.TemporaryDirectory(prefix="bench-context-fixed-") as tmp:
        fixed = Path(tmp)
        materialize(case, git_dir, fixed, with_fix=True)
        _out, after = _pytest(harness, fixed, sorted(traces), trace=False)
    passes = after is not None and all(after.outcomes.get(t) == "passed" for t in traces)
    return Run(output, traces, "" if passes else "the test does not pass after the fix", passes)


def cached_run(
    case: dict[str, object],
    tree: Path,
    git_dir: Path,
    harnesses: dict[str, DockerHarness],
    runs: Path | None,
) -> Run:
    if runs is None:
        return run_case(case, tree, git_dir, harnesses)
    path = runs / f"{str(case['fix'])[:12]}.json"
    if path.is_file():
        data = json.loads(path.read_text())
        traces = data["traces"]
        return Run(
            data["output"],
            None if traces is None else {k: TestTrace.model_validate(v) for k, v in traces.items()},
            data["reason"],
            data.get("fixed_passes"),
        )
    run = run_case(case, tree, git_dir, harnesses)
    traces = None if run.traces is None else {k: v.model_dump() for k, v in run.traces.items()}
    record = {"output": run.output, "traces": traces, "reason": run.reason}
    path.write_text(json.dumps({**record, "fixed_passes": run.fixed_passes}))
    return run


def per_function(traces: dict[str, TestTrace]) -> dict[str, TestTrace]:
    """The traces without their line-level contrast: what the collector gave before it."""
    plain = {"line_passed_by": None, "rare_lines": ()}
    return {
        test: trace.model_copy(
            update={"functions": tuple(c.model_copy(update=plain) for c in trace.functions)}
        )
        for test, trace in traces.items()
    }


def measure(
    case: dict[str, object],
    tree: Path,
    git_dir: Path,
    budget: int,
    run: Run | None,
    *,
    lines: bool = True,
) -> Outcome:
    test = str(case["test"])
    job = JobSpec.model_validate(
        {
            "job": {"id": "bench", "repo": str(tree)},
            "steps": [{"name": "tests", "command": f"pytest -q {test}"}],
        }
    )
    if run is not None and run.usable:
        failure = analyze(run.output, repo_root=str(tree), command=f"pytest -q {test}")
        traces = run.traces or {}
        traces = traces if lines else per_function(traces)
        # The case's test alone: others of its file may fail on Python 3.11 for other reasons.
        failure = failure.model_copy(update={"failing_tests": tuple(traces), "frames": ()})
    else:
        failure = Failure(
            fingerprint="0" * 64,
            error_type="AssertionError",
            summary=f"FAILED {test} - AssertionError",
            failing_tests=(test,),
            source="pytest",
        )
        traces = {}
    started = time.perf_counter()
    ctx = build_context(
        job=job,
        step_index=1,
        failure=failure,
        classification=Classification(failure_class=FailureClass.CODE_BUG, retryable=True),
        worktree=tree,
        prior=[],
        hints=[],
        code_budget_tokens=budget,
        traces=traces,
    )
    text = render_context(ctx, max_tokens=budget)
    seconds = time.perf_counter() - started
    windows = shown(text)
    hunks = fix_hunks(case, git_dir)
    all_hunks = sum(1 for f, hs in hunks.items() if all(covered(h, windows.get(f, [])) for h in hs))
    any_hunk = sum(1 for f, hs in hunks.items() if any(covered(h, windows.get(f, [])) for h in hs))
    return Outcome(len(hunks), all_hunks, any_hunk, count_tokens(text), seconds)


def _recall(rows: list[Outcome]) -> str:
    files = sum(r.files for r in rows)
    if not files:
        return "-"
    all_hunks = 100 * sum(r.all_hunks for r in rows) / files
    any_hunk = 100 * sum(r.any_hunk for r in rows) / files
    return f"{all_hunks:.1f} / {any_hunk:.1f} %"


@dataclass
class Result:
    repo: str
    tuned: bool  # in the set localization was tuned on (click and jinja's first cases)
    ran: bool  # the test failed in its call phase before the fix, so there is a trace
    reproduced: bool  # ... and it passes on the fix's tree: a reproduced bug
    built: Outcome
    function_level: Outcome  # the run's evidence with the per-function contrast only
    static: Outcome


def table(results: list[Result]) -> None:
    """Per group: the context as patchheal builds it (from the run where the test ran,
    else static); on the reproduced bugs, the run's context against the same run with a
    per-function contrast only and against the static one."""
    print(
        "| cases | bugs | reproduced | as built | reproduced: from the run "
        "| reproduced: per-function contrast | reproduced: static | median tokens |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    groups = [
        ("click+jinja, tuned on", lambda r: r.tuned and r.repo not in HELD_OUT),
        ("click+jinja, added (not tuned on)", lambda r: not r.tuned and r.repo not in HELD_OUT),
        *((f"{repo} (held out)", lambda r, repo=repo: r.repo == repo) for repo in sorted(HELD_OUT)),
        ("pallets/click", lambda r: r.repo == "pallets/click"),
        ("pallets/jinja", lambda r: r.repo == "pallets/jinja"),
        ("held out, together", lambda r: r.repo in HELD_OUT),
        ("all", lambda r: True),
    ]
    for label, wanted in groups:
        chosen = [r for r in results if wanted(r)]
        if not chosen:
            continue
        bugs = [r for r in chosen if r.reproduced]
        tokens = statistics.median(r.built.tokens for r in chosen)
        print(
            f"| {label} | {len(chosen)} | {len(bugs)} | {_recall([r.built for r in chosen])} "
            f"| {_recall([r.built for r in bugs])} | {_recall([r.function_level for r in bugs])} "
            f"| {_recall([r.static for r in bugs])} | {tokens:.0f} |"
        )
    print(
        "\nrecall: fix files whose every hunk / any hunk the context shows\n"
        "reproduced: the test fails on the pre-fix tree (in its call, so it is traced) and "
        "passes on the fix's tree"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=int, default=8000)
    parser.add_argument("--limit", type=int, default=0)
    parser.add_argument("--static-only", action="store_true", help="do not run the tests")
    parser.add_argument("--runs", type=Path, help="keep and reuse each case's run here")
    parser.add_argument("--repo", action="append", help="only this project's cases (repeatable)")
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args()
    cases = json.loads(CORPUS.read_text())
    if args.repo:
        cases = [c for c in cases if c["repo"] in args.repo]
    cases = cases[: args.limit or None]
    if args.runs is not None:
        args.runs.mkdir(parents=True, exist_ok=True)
    results: list[Result] = []
    skipped: list[str] = []
    harnesses: dict[str, DockerHarness] = {}
    for case in cases:
        git_dir = mirror(str(case["repo"]))
        if git_dir is None:
            skipped.append(f"{case['repo']} {str(case['fix'])[:10]}: no mirror of {case['repo']}")
            continue
        with tempfile.TemporaryDirectory(prefix="bench-context-") as tmp:
            tree = Path(tmp)
            materialize(case, git_dir, tree)
            run = (
                None if args.static_only else cached_run(case, tree, git_dir, harnesses, args.runs)
            )
            new = measure(case, tree, git_dir, args.budget, run)
            function_level = measure(case, tree, git_dir, args.budget, run, lines=False)
            static = measure(case, tree, git_dir, args.budget, None)
        ran = run is not None and run.usable
        reproduced = run is not None and run.reproduced
        tuned = case.get("set") != "added"
        results.append(
            Result(str(case["repo"]), tuned, ran, reproduced, new, function_level, static)
        )
        if args.verbose:
            why = "reproduced" if reproduced else "static only"
            why = run.reason if run is not None and run.reason else why
            print(
                f"{case['repo']:<14} {str(case['fix'])[:10]} {case['test'][:60]:<60} "
                f"built {new.all_hunks}/{new.files} per-function {function_level.all_hunks}/"
                f"{function_level.files} static {static.all_hunks}/{static.files} "
                f"{new.tokens} tok ({why})",
                file=sys.stderr,
            )
    for line in skipped:
        print(f"SKIP {line}", file=sys.stderr)
    if not results:
        print("no case could be materialized: fetch the mirrors first (see benchmarks/README.md)")
        return 0
    ran = sum(1 for r in results if r.ran)
    reproduced = sum(1 for r in results if r.reproduced)
    print(
        f"{len(results)} bugs ({len(skipped)} skipped), {ran} failing in the Docker python "
        f"harness before the fix, {reproduced} of them passing after it (reproduced), "
        f"budget {args.budget} tokens, tokenizer {tokenizer_name()}\n"
    )
    table(results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
