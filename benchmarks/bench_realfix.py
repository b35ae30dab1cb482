"""False alarms of the verdict on real upstream bug fixes: each must be judged `fixed`.

The corpus is bench_context's (benchmarks/corpus/context_bugs.json): bug-fix
commits of pallets/click, pallets/jinja, psf/requests, marshmallow-code/marshmallow,
python-attrs/attrs and more-itertools/more-itertools that change a source file and
add a test, materialized from local mirrors of their history (see that script's
docstring; nothing of those projects is stored here). For each case, as a user's
job would run it, in the Docker python harness with the project's fixed dependency
install (bench_context's `SETUP`):

1. the pre-fix tree with the fix's tests laid over it goes through patchheal's
   real reproduction gate, the step being the test's file (narrowed to the test's
   own node ids when other tests of that file fail on it too, since those fail for
   reasons the fix does not touch, e.g. Python 3.11 against old code);
2. the upstream fix's source files are the candidate, taken through the real
   `verify()` (every line of defence the verdict has: the results channel by id,
   `verify_runs`, and whatever else verification runs), and must be `fixed`;
3. a no-op candidate (a comment appended to a fix file) must be `no_effect`.

With `--regression`, the job also has a regression step, the test's whole file
(its baseline from the same reproduction), so the regression steps' lines of
defence (the tripwire among them) meet every real fix too.

A case counts when its step reproduced (failed on the pre-fix tree, patchable).
A counted fix not judged `fixed` is then run once more, plainly: the step on the
fixed tree in the same harness with none of patchheal's code in its process
(`plain`). A false alarm is one that passes there; one that fails there too is the
upstream fix failing on this runtime (marshmallow `cf808fc8de9e` on Python 3.11:
`collections.Mapping`), listed apart and not counted, since it says nothing of the
verdict.

Run: python benchmarks/bench_realfix.py [--repo OWNER/NAME] [--per-repo N] [--runs DIR]
     [--reproduced-in DIR] [--regression] [-v]
(`--runs DIR` keeps each case's outcome there and reuses it on the next call.)
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_context import CORPUS, SETUP, _config_aside, materialize, mirror, same_test
from clean_suites import _git

from patchheal.config import BudgetSpec, StepSpec
from patchheal.harness.definitions import load_harness
from patchheal.harness.docker.harness import DockerHarness
from patchheal.loop.reproduce import reproduce
from patchheal.loop.verification import verify
from patchheal.models import PATCHABLE_CLASSES, Outcome

BUDGET = BudgetSpec(step_timeout_seconds=300, idle_timeout_seconds=120)


@dataclass
class Judged:
    repo: str
    fix: str
    test: str
    reproduced: bool
    why: str = ""
    fix_outcome: str = ""
    fix_reason: str = ""
    noop_outcome: str = ""
    noop_reason: str = ""
    seconds: float = 0.0
    plain_exit: int | None = None
    """A fix not judged `fixed`: the step's exit code on the fixed tree run plainly in the same
    harness, no code of patchheal's in the process (0: a false alarm; else the upstream fix
    fails here too, e.g. on this Python, and says nothing of the verdict)."""

    @property
    def fix_fails_plainly(self) -> bool:
        return (
            self.reproduced
            and self.fix_outcome != Outcome.FIXED
            and self.plain_exit not in (None, 0)
        )

    @property
    def false_alarm(self) -> bool:
        """Not `fixed`, and not shown to fail plainly (no control run counts against us)."""
        return self.reproduced and self.fix_outcome != Outcome.FIXED and not self.fix_fails_plainly


def _command(tree: Path, config: list[str], targets: list[str], workdir: str) -> str:
    """bench_context's pytest invocation: its configuration aside, a src/ layout importable."""
    src = f"{workdir}/src"
    layout = ["-o", f"pythonpath={src}"] if config and (tree / "src").is_dir() else []
    env = f'PYTHONPATH="$PYTHONPATH:{src}" ' if (tree / "src").is_dir() else ""
    argv = ["python", "-m", "pytest", "-q", "-p", "no:cacheprovider", *config, *layout, *targets]
    return env + shlex.join(argv)


def plain(command: str) -> str:
    """`command` with none of patchheal's code in its process: the collectors come in through
    PYTHONPATH and PYTEST_PLUGINS only (harness/results/channel.py), so both are taken out."""
    return f"unset PYTHONPATH PYTEST_PLUGINS; {command}"


def plain_exit(harness: DockerHarness, command: str, tree: Path) -> int | None:
    """The exit code of `command` run plainly on `tree` in `harness` (None: no exit code)."""
    done = harness.run(
        plain(command),
        tree,
        timeout=BUDGET.step_timeout_seconds,
        idle_timeout=BUDGET.idle_timeout_seconds,
    )
    return done.exit_code


def _pristine(tree: Path) -> None:
    """As between attempts: the verification worktree is the base before the patch."""
    _git(tree, "reset", "-q", "--hard")
    _git(tree, "clean", "-q", "-fdx")


# How a case's step is written: (tree, its pytest configuration args, targets, workdir).
Command = Callable[[Path, list[str], list[str], str], str]


def judge_case(
    case: dict[str, object],
    git_dir: Path,
    harness: DockerHarness | Callable[[Path], DockerHarness],
    *,
    command: Command = _command,
    matches: Callable[[str, str], bool] = same_test,
    aside: bool = True,
    regression: bool = False,
) -> Judged:
    """Reproduce, then the upstream fix and a no-op through `verify()`. `command` writes the
    step (pytest by default); `matches` says whether a failing id is the case's test;
    `aside`: the tree's dependency files are moved aside (the fixed `SETUP` install),
    else they stay for a setup that installs the project itself. `harness` may be made
    from the materialized tree (a harness given the tree as the job's repository)."""
    repo, fix, test = str(case["repo"]), str(case["fix"]), str(case["test"])
    out = Judged(repo, fix[:12], test, reproduced=False)
    with tempfile.TemporaryDirectory(prefix="bench-realfix-") as tmp:
        tree = Path(tmp) / "repo"
        tree.mkdir()
        materialize(case, git_dir, tree)
        config: list[str] = []
        if aside:
            _aside, config = _config_aside(tree)
            _git(tree, "add", "-A")
            _git(tree, "commit", "-qm", "configuration aside")
        if not isinstance(harness, DockerHarness):
            harness = harness(tree)
        workdir = harness.defn.sandbox.workdir
        test_file = test.partition("::")[0]
        step = StepSpec(name="unit", command=command(tree, config, [test_file], workdir))
        regressions = (command(tree, config, [test_file], workdir),) if regression else ()
        try:
            gate = reproduce(harness, step, tree, BUDGET, regression=regressions)
            failing = gate.verdict.failing_tests
            targets = [t for t in failing if matches(t, test)]
            if targets and set(failing) != set(targets):
                # Other tests of the file fail on the pre-fix tree too: the step is the
                # fix's own test, as a job whose CI ran it alone.
                step = StepSpec(name="unit", command=command(tree, config, targets, workdir))
                _pristine(tree)
                gate = reproduce(harness, step, tree, BUDGET, regression=regressions)
            klass = gate.classification.failure_class if gate.classification else None
            if gate.verdict.passed or gate.failure is None or klass not in PATCHABLE_CLASSES:
                out.why = f"not reproduced: {klass or 'passed'} ({gate.verdict.reason[:120]})"
                return out
            if not any(matches(t, test) for t in gate.verdict.failing_tests):
                out.why = f"the step fails, but not the fix's test ({gate.verdict.reason[:120]})"
                return out
            out.reproduced = True
            for label, edit in (("fix", _apply_fix), ("noop", _apply_noop)):
                _pristine(tree)
                edit(case, git_dir, tree)
                outcome, reason, _log = verify(
                    harness,
                    step,
                    tree,
                    BUDGET,
                    baseline=gate.verdict,
                    failure=gate.failure,
                    regression=regressions,
                    regression_baseline=gate.regression_baseline,
                )
                setattr(out, f"{label}_outcome", outcome.value)
                setattr(out, f"{label}_reason", reason[:300])
            if out.fix_outcome != Outcome.FIXED:
                # Measured against the real thing: does the upstream fix pass here plainly?
                _pristine(tree)
                _apply_fix(case, git_dir, tree)
                out.plain_exit = plain_exit(harness, step.command, tree)
        finally:
            harness.close()  # one sandbox per tree: the next case has another tree
    return out


def _apply_fix(case: dict[str, object], git_dir: Path, tree: Path) -> None:
    for name in case["fix_files"]:  # type: ignore[attr-defined]
        shown = subprocess.run(
            ["git", f"--git-dir={git_dir}", "show", f"{case['fix']}:{name}"],
            capture_output=True,
            check=True,
        )
        (tree / name).write_bytes(shown.stdout)


def _apply_noop(case: dict[str, object], git_dir: Path, tree: Path) -> None:
    first = tree / str(case["fix_files"][0])  # type: ignore[index]
    first.write_bytes(first.read_bytes() + b"\n# a comment changes nothing\n")


def _cached(
    case: dict[str, object],
    git_dir: Path,
    harness: DockerHarness,
    runs: Path | None,
    regression: bool = False,
) -> Judged:
    path = runs / f"{str(case['fix'])[:12]}.json" if runs else None
    if path is not None and path.is_file():
        kept = Judged(**json.loads(path.read_text()))
        # An outcome kept before the plain control existed is judged again when it needs one.
        if not kept.reproduced or kept.fix_outcome == Outcome.FIXED or kept.plain_exit is not None:
            return kept
    started = time.monotonic()
    judged = judge_case(case, git_dir, harness, regression=regression)
    judged.seconds = round(time.monotonic() - started, 1)
    if path is not None:
        path.write_text(json.dumps(asdict(judged)))
    return judged


def _reproduced(runs: Path, fix: str) -> bool:
    path = runs / f"{fix[:12]}.json"
    return path.is_file() and bool(json.loads(path.read_text()).get("reproduced"))


def table(results: list[Judged]) -> list[str]:
    lines = [
        "| project | cases | reproduced | fix judged fixed | false alarms "
        "| fix fails plainly too | no-op judged no_effect | median s/case |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    repos = sorted({r.repo for r in results})
    for label, chosen in [
        *((r, [x for x in results if x.repo == r]) for r in repos),
        ("all", results),
    ]:
        counted = [r for r in chosen if r.reproduced]
        fixed = sum(r.fix_outcome == Outcome.FIXED for r in counted)
        noop = sum(r.noop_outcome == Outcome.NO_EFFECT for r in counted)
        seconds = sorted(r.seconds for r in chosen) or [0.0]
        alarms = sum(r.false_alarm for r in counted)
        plainly = sum(r.fix_fails_plainly for r in counted)
        lines.append(
            f"| {label} | {len(chosen)} | {len(counted)} | {fixed} | {alarms} | {plainly} "
            f"| {noop} | {seconds[len(seconds) // 2]:.0f} |"
        )
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", action="append", help="only this project's cases (repeatable)")
    parser.add_argument("--per-repo", type=int, default=0, help="at most N cases per project")
    parser.add_argument("--runs", type=Path, help="keep and reuse each case's outcome here")
    parser.add_argument(
        "--reproduced-in",
        type=Path,
        help="only the cases that reproduced in an earlier run's --runs directory",
    )
    parser.add_argument(
        "--regression",
        action="store_true",
        help="give each job a regression step too: the test's whole file (use its own --runs)",
    )
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args()
    cases = json.loads(CORPUS.read_text())
    if args.repo:
        cases = [c for c in cases if c["repo"] in args.repo]
    if args.reproduced_in is not None:
        cases = [c for c in cases if _reproduced(args.reproduced_in, str(c["fix"]))]
    if args.per_repo:
        seen: dict[str, int] = {}
        kept = []
        for case in cases:
            seen[case["repo"]] = seen.get(case["repo"], 0) + 1
            if seen[case["repo"]] <= args.per_repo:
                kept.append(case)
        cases = kept
    if args.runs is not None:
        args.runs.mkdir(parents=True, exist_ok=True)
    harnesses: dict[str, DockerHarness] = {}
    results: list[Judged] = []
    started = time.monotonic()
    for case in cases:
        repo = str(case["repo"])
        git_dir = mirror(repo)
        if git_dir is None:
            print(f"SKIP {repo}: no mirror (fetch it first)", file=sys.stderr)
            continue
        if repo not in harnesses:
            harnesses[repo] = DockerHarness(
                load_harness("python"),
                job_id=f"bench-realfix-{repo.split('/')[1]}",
                setup=SETUP[repo],
            )
        judged = _cached(case, git_dir, harnesses[repo], args.runs, args.regression)
        results.append(judged)
        if args.verbose:
            what = (
                f"fix {judged.fix_outcome}, no-op {judged.noop_outcome}"
                if judged.reproduced
                else judged.why
            )
            print(f"{repo:<30} {judged.fix} {judged.test[:60]:<60} {what}", file=sys.stderr)
            if judged.reproduced and judged.fix_outcome != Outcome.FIXED:
                print(f"    FALSE ALARM: {judged.fix_reason}", file=sys.stderr)
    print("\n".join(table(results)))
    print(f"\n{len(results)} cases in {time.monotonic() - started:.0f} s")
    alarms = [r for r in results if r.false_alarm]
    for r in alarms:
        print(f"FALSE ALARM {r.repo} {r.fix} {r.test}: {r.fix_outcome}: {r.fix_reason}")
    for r in results:
        if r.fix_fails_plainly:
            print(
                f"fix fails plainly too (exit {r.plain_exit}, not counted) {r.repo} {r.fix} "
                f"{r.test}: {r.fix_outcome}: {r.fix_reason}"
            )
    return 1 if alarms else 0


if __name__ == "__main__":
    sys.exit(main())
