"""Real failing jobs on their own Python and runner: reproduced, fix `fixed`, no-op `no_effect`.

The corpus (benchmarks/corpus/reproduce_bugs.json, picked by pick_reproduce_bugs.py)
lists bug-fix commits of public projects that add a test: the repository, the fix
and its parent, the test the fix added, the source files it changed, and how the
project's CI of that era ran it: the Python (3.9, 3.11 or 3.13, the python
harness's `[pythons]`), the runner (pytest, or `python -m unittest`), the tool pins
of the job's setup (an old pytest such as 4.6.11 for old commits, else the image's
own: 6.0.2 on 3.9, 7.2.1 on 3.11, 8.3.5 on 3.13), and, as found at the parent, the
build system (setup.py, setup.cfg, a PEP 517 backend) and the layout (`src/` or
flat). Each case is materialized from a local mirror of the project's history
(bench_context's `materialize`: the parent's tree, the fix's tests over it; nothing
of those projects is stored here) and judged as bench_realfix judges (its
`judge_case`, imported): the real reproduction gate in the Docker python harness of
the case's Python with the case's setup, then the upstream fix through the real
`verify()` (must be `fixed`) and a no-op, a comment (must be `no_effect`). The
project runs from its tree (its dependency files aside, the `src/` directory on
`PYTHONPATH`), except a case marked `install_project`, whose setup installs the
project itself (`pip install -e .` through its own build system, as its CI's
tox does) with its dependency files in place: Python-Markdown finds its
extensions through the installed package's entry points.

Printed: per Python and per runner (the pytest major version the setup gives, or
unittest), the cases, those reproduced (the fix's test fails on the pre-fix tree,
patchable), the fix judged `fixed` and the no-op judged `no_effect` among them; then
every case that fails one of these, with its reason. BugsInPy is never used.

`--control` adds the fresh-venv control (venv_control.py): per case, whether the fix's
test fails before the fix and passes after it in a host venv of the case's Python with
its pins installed offline from the wheelhouse, run plainly; the tables then give, per
Python, runner and project, the cases the venv reproduces and how many of those the
harness reproduced and judged right, and the cases on which the two differ, with why.

`--corpus generated` runs benchmarks/corpus/generated_files_bugs.json instead
(pick_generated_bugs.py): real fixes of projects whose `pip install -e .` generates files
in the tree (a hatch-vcs or setuptools-scm version file the package imports, C extension
modules built in place), all `install_project`, each with a `generates` note; `--corpus
PATH` any corpus file of this format. The default corpus is unchanged. A case marked
`install_project` has its tree's commit tagged with the version CI's checkout of the
parent gives (its tags), and the harness is given the tree as the job's repository
(ci_checkout.py): git-versioned builds get the parent's real version, as in CI.

Run: python benchmarks/bench_reproduce.py [--corpus default|generated|PATH] [--runs DIR]
     [--python 3.9] [--repo OWNER/NAME] [--fix SHA] [--limit N] [--cached-only] [--control] [-v]
(`--runs DIR` keeps each case's outcome there and reuses it on the next call:
an interrupted run resumes.)
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_context import mirror, same_test
from bench_realfix import Judged, judge_case
from bench_realfix import _command as _pytest_command
from ci_checkout import tag_ci_version
from pick_generated_bugs import GENERATED_CORPUS
from pick_reproduce_bugs import REPRODUCE_CORPUS
from runner_commands import module_name, unittest_command
from venv_control import cached_control

from patchheal.harness.definitions import load_harness
from patchheal.harness.docker.harness import DockerHarness
from patchheal.harness.inference.pythons import with_python
from patchheal.models import Outcome

CORPORA = {"default": REPRODUCE_CORPUS, "generated": GENERATED_CORPUS}
IMAGE_PYTEST = {"3.9": 6, "3.11": 7, "3.13": 8}  # Debian's python3-pytest of each suite
_PIN = re.compile(r"pytest(?:==|>=)(\d+)")


def runner(case: dict[str, object]) -> str:
    """`unittest`, or `pytest N`: the major version the case's setup pins last, else the
    image's."""
    if case["runner"] == "unittest":
        return "unittest"
    pins = [m.group(1) for line in case["setup"] for m in _PIN.finditer(str(line))]  # type: ignore[attr-defined]
    return f"pytest {pins[-1] if pins else IMAGE_PYTEST[str(case['python'])]}"  # the last wins


def unittest_matches(node_id: str, test: str) -> bool:
    """`pkg.tests.test_x.TestX.test_y` is the corpus's `pkg/tests/test_x.py::TestX::test_y`."""
    file, _, rest = test.partition("::")
    wanted = ".".join([module_name(file), *rest.split("::")])
    return node_id == wanted or node_id.endswith("." + wanted) or same_test(node_id, test)


def _harness(
    case: dict[str, object], harnesses: dict[str, DockerHarness], repo: Path | None = None
) -> DockerHarness:
    key = json.dumps([case["repo"], case["python"], case["setup"], str(repo or "")])
    if key not in harnesses:
        defn = with_python(load_harness("python"), str(case["python"]), "the corpus case")
        name = str(case["repo"]).split("/")[1]
        harnesses[key] = DockerHarness(
            defn,
            job_id=f"bench-reproduce-{name}-{len(harnesses)}",
            setup=list(case["setup"]),  # type: ignore[call-overload]
            repo=repo,
        )
    return harnesses[key]


def _installing(
    case: dict[str, object], git_dir: Path, harnesses: dict[str, DockerHarness]
) -> Callable[[Path], DockerHarness]:
    """A case that installs the project: its tree tagged as CI's checkout is, and given to
    the harness as the job's repository (ci_checkout.py)."""

    def made(tree: Path) -> DockerHarness:
        tag_ci_version(case, git_dir, tree)
        return _harness(case, harnesses, tree)

    return made


def judge(
    case: dict[str, object], harnesses: dict[str, DockerHarness], runs: Path | None
) -> dict[str, object]:
    path = runs / f"{str(case['fix'])[:12]}.json" if runs else None
    if path is not None and path.is_file():
        return dict(json.loads(path.read_text()))
    git_dir = mirror(str(case["repo"]))
    assert git_dir is not None
    started = time.monotonic()
    unittest = case["runner"] == "unittest"
    one = unittest_matches if unittest else same_test
    # Any test the fix adds is the case's: the first one need not fail before the fix.
    tests = [str(t) for t in case.get("tests") or [case["test"]]]  # type: ignore[attr-defined]

    def matches(node_id: str, _test: str) -> bool:
        return any(one(node_id, test) for test in tests)

    base = unittest_command if unittest else _pytest_command
    files = sorted({t.partition("::")[0] for t in tests})

    def command(tree: Path, config: list[str], targets: list[str], workdir: str) -> str:
        # The step is every file the fix adds tests to, not the first test's alone: the
        # failing ones may be in another file (Python-Markdown `dbb9b3d766e8`).
        whole = targets == [str(case["test"]).partition("::")[0]]
        return base(tree, config, files if whole else targets, workdir)

    try:
        judged = judge_case(
            case,
            git_dir,
            _installing(case, git_dir, harnesses)
            if case.get("install_project")
            else _harness(case, harnesses),
            command=command,
            matches=matches,
            # A test that reads the project's own files (tomli parses its pyproject.toml)
            # needs them in place: `keep_files`.
            aside=not (case.get("install_project") or case.get("keep_files")),
        )
    except Exception as error:  # a harness or setup failure is a case's result, with its why
        judged = Judged(str(case["repo"]), str(case["fix"])[:12], str(case["test"]), False)
        judged.why = f"error: {type(error).__name__}: {str(error)[:300]}"
    judged.seconds = round(time.monotonic() - started, 1)
    record: dict[str, object] = {
        **asdict(judged),
        "python": case["python"],
        "runner": runner(case),
        "build": case.get("build", ""),
        "layout": case.get("layout", ""),
    }
    if path is not None:
        path.write_text(json.dumps(record))
    return record


def _row(label: str, chosen: list[dict[str, object]]) -> str:
    counted = [r for r in chosen if r["reproduced"]]
    fixed = sum(r["fix_outcome"] == Outcome.FIXED for r in counted)
    noop = sum(r["noop_outcome"] == Outcome.NO_EFFECT for r in counted)
    return f"| {label} | {len(chosen)} | {len(counted)} | {fixed} | {noop} |"


def table(results: list[dict[str, object]]) -> list[str]:
    head = ["| {} | cases | reproduced | fix judged fixed | no-op judged no_effect |",
            "| --- | ---: | ---: | ---: | ---: |"]  # fmt: skip
    lines: list[str] = []
    for key, title in (("python", "Python"), ("runner", "runner"), ("repo", "project")):
        lines += [head[0].format(title), head[1]]
        for value in sorted({str(r[key]) for r in results}):
            lines.append(_row(value, [r for r in results if r[key] == value]))
        lines += [_row("all", results), ""]
    return lines


def failures(results: list[dict[str, object]]) -> list[str]:
    out = []
    for r in results:
        where = f"{r['repo']} {r['fix']} {r['test']} (Python {r['python']}, {r['runner']})"
        if not r["reproduced"]:
            out.append(f"NOT REPRODUCED {where}: {r['why']}")
        elif r["fix_outcome"] != Outcome.FIXED:
            out.append(f"FIX NOT FIXED {where}: {r['fix_outcome']}: {r['fix_reason']}")
        elif r["noop_outcome"] != Outcome.NO_EFFECT:
            out.append(f"NO-OP NOT NO_EFFECT {where}: {r['noop_outcome']}: {r['noop_reason']}")
    return out


def control_table(results: list[dict[str, object]]) -> list[str]:
    """Per Python, runner and project: the cases a fresh venv with the case's pins
    reproduces (fail before the fix, pass after), and how many of those the harness
    reproduced and judged right (fix `fixed`, no-op `no_effect`)."""
    head = "| {} | cases | venv reproduces | harness reproduced of those | and judged right |"
    lines: list[str] = []

    def row(label: str, chosen: list[dict[str, object]]) -> str:
        venv = [r for r in chosen if r["venv_reproduced"]]
        both = [r for r in venv if r["reproduced"]]
        right = [r for r in both if _judged_right(r)]
        return f"| {label} | {len(chosen)} | {len(venv)} | {len(both)} | {len(right)} |"

    for key, title in (("python", "Python"), ("runner", "runner"), ("repo", "project")):
        lines += [head.format(title), "| --- | ---: | ---: | ---: | ---: |"]
        for value in sorted({str(r[key]) for r in results}):
            lines.append(row(value, [r for r in results if r[key] == value]))
        lines += [row("all", results), ""]
    return lines


def _judged_right(r: dict[str, object]) -> bool:
    return r["fix_outcome"] == Outcome.FIXED and r["noop_outcome"] == Outcome.NO_EFFECT


def control_gaps(results: list[dict[str, object]]) -> list[str]:
    """The harness's gaps (the venv reproduces, the harness does not), with the harness's
    reason; then the converse, with the venv's."""
    out = []
    for r in results:
        where = f"{r['repo']} {r['fix']} {r['test']} (Python {r['python']}, {r['runner']})"
        if r["venv_reproduced"] and not r["reproduced"]:
            out.append(f"HARNESS GAP {where}: {r['why']}")
        elif r["venv_reproduced"] and not _judged_right(r):
            out.append(
                f"HARNESS MISJUDGED {where}: fix {r['fix_outcome']}, no-op {r['noop_outcome']}"
            )
    for r in results:
        where = f"{r['repo']} {r['fix']} {r['test']} (Python {r['python']}, {r['runner']})"
        if r["reproduced"] and not r["venv_reproduced"]:
            why = " ".join(str(r["venv_why"]).split())  # one line each
            out.append(f"HARNESS ONLY {where}: venv: {why[:300]}")
    return out


def corpus_path(name: str) -> Path:
    """`default`, `generated`, or a path to a corpus file of the same format."""
    return CORPORA.get(name, Path(name))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=Path, help="keep and reuse each case's outcome here")
    parser.add_argument(
        "--corpus",
        default="default",
        help="`default` (reproduce_bugs.json), `generated` (generated_files_bugs.json: "
        "installs that generate files in the tree) or a corpus file's path",
    )
    parser.add_argument("--python", action="append", help="only this Python's cases (repeatable)")
    parser.add_argument("--repo", action="append", help="only this project's cases (repeatable)")
    parser.add_argument(
        "--fix", action="append", help="only the case whose fix commit starts so (repeatable)"
    )
    parser.add_argument("--limit", type=int, default=0, help="at most N cases")
    parser.add_argument("--cached-only", action="store_true", help="report --runs, run nothing")
    parser.add_argument(
        "--control",
        action="store_true",
        help="also the fresh-venv control per case (venv_control.py) and its tables",
    )
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args()
    cases = json.loads(corpus_path(args.corpus).read_text())
    if args.python:
        cases = [c for c in cases if c["python"] in args.python]
    if args.repo:
        cases = [c for c in cases if c["repo"] in args.repo]
    if args.fix:
        cases = [c for c in cases if str(c["fix"]).startswith(tuple(args.fix))]
    cases = cases[: args.limit or None]
    if args.runs is not None:
        args.runs.mkdir(parents=True, exist_ok=True)
    harnesses: dict[str, DockerHarness] = {}
    results: list[dict[str, object]] = []
    started = time.monotonic()
    for case in cases:
        cached = args.runs is not None and (args.runs / f"{case['fix'][:12]}.json").is_file()
        if mirror(str(case["repo"])) is None or (args.cached_only and not cached):
            print(f"SKIP {case['repo']} {case['fix'][:12]}: no mirror or not run", file=sys.stderr)
            continue
        record = judge(case, harnesses, args.runs)
        if args.control:
            venv = cached_control(case, args.runs)
            record |= {
                "venv_reproduced": venv["venv_reproduced"],
                "venv_why": venv.get("why", ""),
                "venv_pytest": venv.get("pytest", ""),
            }
            if args.verbose:
                why = str(venv.get("why", ""))[:150]
                print(f"      venv reproduces: {venv['venv_reproduced']} {why}", file=sys.stderr)
        results.append(record)
        if args.verbose:
            what = (
                f"fix {record['fix_outcome']}, no-op {record['noop_outcome']}"
                if record["reproduced"]
                else str(record["why"])[:150]
            )
            print(
                f"{case['python']:<5} {record['runner']:<9} {case['repo']:<26} "
                f"{record['fix']} {record['seconds']:>6}s {what}",
                file=sys.stderr,
                flush=True,
            )
    print("\n".join(table(results)))
    print(f"{len(results)} cases in {time.monotonic() - started:.0f} s\n")
    print("\n".join(failures(results)))
    if args.control:
        print("\n## Control: a fresh venv with the case's pins\n")
        print("\n".join(control_table(results)))
        print("\n".join(control_gaps(results)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
