"""False alarms of the verdict's in-step lines on real projects' whole suites at a clean release.

For each project of benchmarks/clean_suites.py (11 real projects at a release tag,
materialized from mirrors of their history), in the Docker python harness:

1. **Outcomes unchanged.** The suite runs once as a step (the collectors, the
   tripwire's audit hook and the signing all loaded) and once with none of
   patchheal's code in the process (PYTHONPATH and PYTEST_PLUGINS cleared,
   pytest's own JUnit XML). Every test id must have the same outcome in both,
   and the exit code must be the same: patchheal's code inside the step must
   not change what it watches.
2. **Tripwire quiet.** What the tripwire reported the project's own code doing
   (operation, file): none of it may be refused in-process (a refusal would show
   as a changed outcome in 1); each such file is one where a real fix would be
   refused (`rejected_tripwire`), so they are listed.
3. **Every twin fails.** `--twins N` passing tests (seeded) are taken as if a
   candidate had just fixed them: the real `verify()` runs the step over their
   files with the project's package files as the candidate's changed files, so
   each run gets an impossible twin and the tripwire's judgement. Each must be
   `fixed`: a twin that passes, or a tripwire refusal, is a false alarm.

Run: python benchmarks/bench_clean_suites.py [--repo OWNER/NAME] [--twins 10] [-v]
"""

from __future__ import annotations

import argparse
import random
import re
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from clean_suites import PROJECTS, SuiteProject, command, materialize

from patchheal.config import BudgetSpec, StepSpec
from patchheal.harness.definitions import load_harness
from patchheal.harness.docker.harness import DockerHarness
from patchheal.loop.verification import verify
from patchheal.models import Failure, Outcome, TestResults, Verdict

BUDGET = BudgetSpec(step_timeout_seconds=900, idle_timeout_seconds=300, verify_runs=1)
_JUNIT = ".bench-plain-junit.xml"


@dataclass
class Suite:
    repo: str
    tests: int = 0
    exit_with: int | None = None
    exit_plain: int | None = None
    changed_outcomes: list[str] = field(default_factory=list)
    monitor_files: dict[str, set[str]] = field(default_factory=dict)
    twins: list[tuple[str, str, str]] = field(default_factory=list)  # (test, outcome, reason)
    seconds: float = 0.0
    note: str = ""


def _plain_outcomes(tree: Path) -> list[str]:
    """Each test case's outcome in pytest's own JUnit XML (the run without patchheal)."""
    path = tree / _JUNIT
    if not path.is_file():
        return []
    outcomes = []
    for case in ET.parse(path).getroot().iter("testcase"):
        kinds = {child.tag for child in case}
        if kinds & {"failure", "error"}:
            outcomes.append("failed")
        elif "skipped" in kinds:
            outcomes.append("skipped")
        else:
            outcomes.append("passed")
    return outcomes


def _package_files(tree: Path) -> list[str]:
    """The project's own source files (not its tests): what a candidate could change."""
    out = []
    for path in sorted(tree.rglob("*.py")):
        rel = path.relative_to(tree).as_posix()
        if re.search(r"(^|/)(tests?|testing|docs|examples|benchmarks?)/|(^|/)test_", rel):
            continue
        if rel.startswith(".") or rel in {"setup.py", "conftest.py", "noxfile.py"}:
            continue
        out.append(rel)
    return out


def measure(project: SuiteProject, twins: int, seed: int) -> Suite:
    suite = Suite(project.repo)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="bench-clean-") as tmp:
        tree = Path(tmp) / "repo"
        config = materialize(project, tree)
        if config is None:
            suite.note = "no mirror"
            return suite
        harness = DockerHarness(
            load_harness("python"),
            job_id=f"bench-clean-{project.repo.split('/')[1]}",
            setup=list(project.setup),
        )
        try:
            harness.prepare(tree)
            cmd = command(project, tree, config, harness.defn.sandbox.workdir)
            with_ = harness.run(cmd, tree, timeout=900, idle_timeout=300)
            bare = command(project, tree, config, harness.defn.sandbox.workdir, plain=True)
            plain = harness.run(bare, tree, timeout=900, idle_timeout=300)
            if plain.tests is not None:  # proof the plain run had none of patchheal's code
                suite.note = "the plain run reported to the results channel"
            _compare(suite, with_.tests, with_.exit_code, plain.exit_code, _plain_outcomes(tree))
            subprocess.run(["git", "clean", "-qfdx"], cwd=tree, check=True)
            if with_.tests is not None:
                _twins(suite, project, harness, tree, config, with_.tests, twins, seed)
        finally:
            harness.close()
    suite.seconds = time.monotonic() - started
    return suite


def _compare(
    suite: Suite,
    tests: TestResults | None,
    exit_with: int | None,
    exit_plain: int | None,
    plain: list[str],
) -> None:
    suite.exit_with, suite.exit_plain = exit_with, exit_plain
    if tests is None:
        suite.note = "no record from the collectors"
        return
    suite.tests = len(tests.outcomes)
    for event in tests.monitor:
        suite.monitor_files.setdefault(event.file, set()).add(event.op)
    # JUnit names a test by class and name, not node id: compare the outcome counts per
    # outcome and the failing names, which is what a changed outcome would move.
    ours = sorted(tests.outcomes.values())
    theirs = sorted(plain)
    if _counts(ours) != _counts(theirs):
        suite.changed_outcomes.append(f"with {_counts(ours)} / without {_counts(theirs)}")


def _counts(outcomes: list[str]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for outcome in outcomes:
        key = {"error": "failed", "xfailed": "skipped"}.get(outcome, outcome)
        counts[key] = counts.get(key, 0) + 1
    return counts


def _twins(
    suite: Suite,
    project: SuiteProject,
    harness: DockerHarness,
    tree: Path,
    config: list[str],
    results: TestResults,
    count: int,
    seed: int,
) -> None:
    passing = [t for t in results.with_outcome("passed") if "::" in t]
    chosen = random.Random(seed).sample(passing, min(count, len(passing)))
    changed = _package_files(tree)
    for test in chosen:
        step = StepSpec(
            name="twin",
            command=command(
                SuiteProject(project.repo, project.tag, test, project.setup),
                tree,
                config,
                harness.defn.sandbox.workdir,
            ),
        )
        failed = TestResults(
            outcomes={test: "failed"},
            defined_in={test: results.defined_in[test]} if test in results.defined_in else {},
            runners=("pytest",),
            # What the tripwire saw the suite's own code do: the reproduction's record.
            monitor=results.monitor,
        )
        baseline = Verdict(
            passed=False, reason="as if it failed", failing_tests=(test,), tests=failed
        )
        failure = Failure(fingerprint="0" * 64, failing_tests=(test,), source="pytest")
        outcome, reason, _log = verify(
            harness,
            step,
            tree,
            BUDGET,
            baseline=baseline,
            failure=failure,
            regression=(),
            regression_baseline={},
            changed=changed,
        )
        suite.twins.append((test, outcome.value, reason.splitlines()[0][:200]))
        subprocess.run(["git", "clean", "-qfdx"], cwd=tree, check=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", action="append", help="only this project (repeatable)")
    parser.add_argument("--twins", type=int, default=10, help="passing tests twinned per project")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args()
    projects = [p for p in PROJECTS if not args.repo or p.repo in args.repo]
    rows = []
    for project in projects:
        suite = measure(project, args.twins, args.seed)
        rows.append(suite)
        if args.verbose:
            print(f"{suite.repo}: {suite}", file=sys.stderr, flush=True)
    print(
        "| project | tests | exit with / without | outcomes changed | files the tripwire saw "
        "| twins fixed / tried | s |"
    )
    print("| --- | ---: | --- | --- | ---: | ---: | ---: |")
    alarms = 0
    for s in rows:
        fixed = sum(1 for _t, outcome, _r in s.twins if outcome == Outcome.FIXED)
        alarms += len(s.twins) - fixed + len(s.changed_outcomes) + (s.exit_with != s.exit_plain)
        print(
            f"| {s.repo} | {s.tests} | {s.exit_with} / {s.exit_plain} "
            f"| {'; '.join(s.changed_outcomes) or 'none'} | {len(s.monitor_files)} "
            f"| {fixed} / {len(s.twins)} | {s.seconds:.0f} |"
        )
    for s in rows:
        for file, ops in sorted(s.monitor_files.items()):
            print(f"tripwire saw {s.repo} {file}: {', '.join(sorted(ops))}")
        for test, outcome, reason in s.twins:
            if outcome != Outcome.FIXED:
                print(f"FALSE ALARM {s.repo} {test}: {outcome}: {reason}")
        if s.note:
            print(f"NOTE {s.repo}: {s.note}")
    return 1 if alarms else 0


if __name__ == "__main__":
    sys.exit(main())
