"""The adversarial verdict battery as a table: spoofs tried / judged fixed, real fixes judged fixed.

Runs the same cases as tests/test_verdict_battery.py (tests/verdict_battery.py)
in the local harness, and as the baseline in the same run, the same cases
judged the way patchheal judged before the results channel: the step's exit
code and printed summary only (this script's harness drops the collectors'
results before the judge sees them; verify_runs and the reproduction rerun
stay on, so the difference is the results channel alone).

    python benchmarks/bench_verdict.py            # both verdicts
    python benchmarks/bench_verdict.py --by-id    # only the current verdict
    python benchmarks/bench_verdict.py --no-twins # also the current verdict without twins
    python benchmarks/bench_verdict.py --twin-cost 7   # verify() with / without twins
    python benchmarks/bench_verdict.py --full     # every table issue 24 asks for, one run

`--full` runs, one after another in this run, each measurement of the verdict
and prints its table: the generative hostile battery per family, runner and
form (bench_hostile.py), false alarms on real upstream fixes (bench_realfix.py, and
bench_reproduce.py's corpus on each case's own Python and runner) and on real
projects' clean suites (bench_clean_suites.py), the collector
compatibility matrix (tests/test_collector_matrix.py, every pytest × Python
this machine has), what issue 33's lines cost a verified candidate against the
commit before them (bench_lines_cost.py), the twins' cost (--twin-cost) and the
tripwire's battery and slowdown (bench_tripwire.py) and the monitor's cost in instructions
(bench_tripwire.py --instructions). The real-project parts need the mirrors (see
bench_context.py) and Docker; it takes hours on a 2-core machine.

The impossible twins (loop/twins.py) are switched off in this process only, for a
row to compare with (`TwinRun.twins` False: no twin runs, every other line stays).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from patchheal.harness.local.harness import LocalHarness
from patchheal.loop.twins import TwinRun
from patchheal.models import CommandResult
from tests.verdict_battery import CASES, LEGIT, Judged, evaluate


class PrintedOnlyHarness(LocalHarness):
    """The local harness with the per-test results dropped: the verdict before this change."""

    def run(self, *args: object, **kwargs: object) -> CommandResult:
        result = super().run(*args, **kwargs)  # type: ignore[arg-type]
        return result.model_copy(update={"tests": None})


def run_all(make: Callable[[], LocalHarness]) -> tuple[list[Judged], float]:
    started = time.monotonic()
    judged = []
    for case in CASES:
        with tempfile.TemporaryDirectory(prefix="bench-verdict-") as root:
            judged.append(evaluate(case, Path(root), make()))
    return judged, time.monotonic() - started


@contextlib.contextmanager
def no_twins() -> Iterator[None]:
    """The verification without its impossible twin, in this process only."""
    TwinRun.twins = False
    try:
        yield
    finally:
        TwinRun.twins = True


def twin_cost(repeats: int) -> None:
    """verify() of each legitimate pytest/unittest fix, with and without its twin,
    interleaved; the ratio of the medians per case and over all of them."""
    cases = [c for c in LEGIT if c.project.split("-")[0] in ("pytest", "unittest")]
    times: dict[str, dict[bool, list[float]]] = {c.name: {True: [], False: []} for c in cases}
    for _ in range(repeats):
        for case in cases:
            for twins in (True, False):
                switch = contextlib.nullcontext() if twins else no_twins()
                with tempfile.TemporaryDirectory(prefix="bench-twin-") as root, switch:
                    judged = evaluate(case, Path(root), LocalHarness())
                assert judged.fixed, judged.reason
                times[case.name][twins].append(judged.verify_seconds)
    print("| legit fix | verify() with twin (median s) | without (median s) | ratio |")
    print("| --- | --- | --- | --- |")
    for name, by in times.items():
        with_, without = statistics.median(by[True]), statistics.median(by[False])
        print(f"| {name} | {with_:.2f} | {without:.2f} | {with_ / without:.2f} |")
    all_with = statistics.median([t for by in times.values() for t in by[True]])
    all_without = statistics.median([t for by in times.values() for t in by[False]])
    print(
        f"| all ({repeats} runs each) | {all_with:.2f} | {all_without:.2f} | "
        f"{all_with / all_without:.2f} |"
    )


def demo_fix_seconds(root: Path) -> float:
    """One `patchheal demo` in `root` (Docker harness, its own store); the wall time of its
    verified candidate (06-fix_boundary: apply, gates, two runs of the failing step, the
    regression step and, with twins, the twin run), as the attempt store recorded it."""
    from patchheal.cli import main as cli_main
    from patchheal.memory.store import AttemptStore
    from patchheal.models import Outcome

    db = root / "attempts.sqlite3"
    argv = ["-q", "demo", "--workdir", str(root / "demo"), "--db", str(db)]
    argv += ["--reports", str(root / "reports")]
    with contextlib.suppress(SystemExit), contextlib.redirect_stdout(io.StringIO()):
        cli_main(argv)
    store = AttemptStore(db)
    attempts = store.attempts(job_id="demo-pricing")
    store.close()
    fixed = [a for a in attempts if a.outcome is Outcome.FIXED]
    assert len(fixed) == 1, [(a.attempt_number, a.outcome, a.reason) for a in attempts]
    return fixed[0].duration_seconds


def twin_cost_heal(repeats: int) -> None:
    """The whole verified candidate of the demo job, with and without its twin, interleaved:
    what the twin adds to a job whose failing step is one test and whose regression step
    is the suite (the demo's job spec), the ratio of the medians."""
    times: dict[bool, list[float]] = {True: [], False: []}
    for _ in range(repeats):
        for twins in (True, False):
            switch = contextlib.nullcontext() if twins else no_twins()
            with tempfile.TemporaryDirectory(prefix="bench-twin-heal-") as root, switch:
                times[twins].append(demo_fix_seconds(Path(root)))
    with_, without = statistics.median(times[True]), statistics.median(times[False])
    print("| verified candidate (demo job, Docker) | with twin (median s) | without | ratio |")
    print("| --- | --- | --- | --- |")
    print(
        f"| 06-fix_boundary ({repeats} runs each) | {with_:.2f} | {without:.2f} | "
        f"{with_ / without:.2f} |"
    )


def row(name: str, judged: list[Judged], seconds: float) -> str:
    spoofs = [j for j in judged if not j.case.legit]
    legit = [j for j in judged if j.case.legit]
    fooled = sum(j.fixed for j in spoofs)
    kept = sum(j.fixed for j in legit)
    return f"| {name} | {len(spoofs)} | {fooled} | {len(legit)} | {kept} | {seconds:.0f} |"


def families(judged: list[Judged]) -> list[str]:
    lines = []
    for family in ("pytest", "unittest", "node", "generic", "flaky"):
        mine = [j for j in judged if j.case.project.split("-")[0] == family]
        spoofs = [j for j in mine if not j.case.legit]
        lines.append(
            f"| {family} | {len(spoofs)} | {sum(j.fixed for j in spoofs)} | "
            f"{len(mine) - len(spoofs)} | {sum(j.fixed for j in mine if j.case.legit)} |"
        )
    return lines


# The costs first, while nothing else of the run has warmed or loaded the machine; the
# long false-alarm corpora after them.
_FULL: tuple[tuple[str, list[str]], ...] = (
    (
        "cost of issue 33's lines: a verified candidate with them over the commit before",
        ["benchmarks/bench_lines_cost.py", "--runs", "5"],
    ),
    ("cost of the twins (issue 24's line)", ["benchmarks/bench_verdict.py", "--twin-cost", "5"]),
    ("tripwire battery and slowdown", ["benchmarks/bench_tripwire.py", "--runs", "5"]),
    (
        # Counted, not timed: the same count for the same run on any load (a timed round of
        # the same suite drifts by a quarter within minutes on this machine).
        "the monitor's cost on a clean suite, in instructions",
        ["benchmarks/bench_tripwire.py", "--instructions", "tests", "--kind", "regression step"],
    ),
    ("hostile candidates per family, runner and form", ["benchmarks/bench_hostile.py"]),
    (
        "false alarms on real upstream fixes",
        # 16 per project: ~100 cases, of which about half reproduce (>= 50 counted fixes);
        # each outcome is kept in var/ so an interrupted run resumes where it stopped. Each
        # job has a regression step too (the test's file): its lines of defence meet them.
        [
            "benchmarks/bench_realfix.py",
            "--per-repo",
            "16",
            "--regression",
            "--runs",
            "var/bench/realfix-regression",
        ],
    ),
    ("false alarms on clean suites", ["benchmarks/bench_clean_suites.py"]),
    (
        "collector matrix (runner version x identical outcomes)",
        ["-m", "pytest", "-q", "-rA", "tests/test_collector_matrix.py"],
    ),
    (
        "false alarms on real jobs on their own Python and runner",
        ["benchmarks/bench_reproduce.py", "--runs", "var/bench/reproduce"],
    ),
)
_SKIPPABLE = {
    "reproduce": "benchmarks/bench_reproduce.py",
    "realfix": "benchmarks/bench_realfix.py",
    "twins": "--twin-cost",  # issue 24's line, 20 minutes
}


def full(skip: tuple[str, ...] = ()) -> int:
    """Every measurement issue 24 asks for, in one run, each table under its heading;
    `skip` names parts left out (their heading says so)."""
    import os
    import subprocess

    root = Path(__file__).resolve().parents[1]
    status = 0
    env = {**os.environ, "PATCHHEAL_COLLECTOR_MATRIX": "full"}
    for title, argv in _FULL:
        print(f"\n## {title}\n", flush=True)
        if any(_SKIPPABLE[name] in argv for name in skip):
            print("(left out of this run: --skip)")
            continue
        started = time.monotonic()
        done = subprocess.run([sys.executable, *argv], cwd=root, env=env, check=False)
        print(f"\n({' '.join(argv)}: exit {done.returncode}, {time.monotonic() - started:.0f} s)")
        status = status or done.returncode
    return status


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--by-id", action="store_true", help="skip the printed-only baseline")
    parser.add_argument(
        "--no-twins", action="store_true", help="add a row: by id without the impossible twins"
    )
    parser.add_argument("--twin-cost", type=int, metavar="N", help="time verify() N times")
    parser.add_argument("--full", action="store_true", help="every table of issue 24, one run")
    parser.add_argument(
        "--skip",
        action="append",
        default=[],
        choices=sorted(_SKIPPABLE),
        help="with --full: leave out a long part (bench_reproduce is over an hour)",
    )
    args = parser.parse_args()
    if args.full:
        return full(tuple(args.skip))
    if args.twin_cost:
        twin_cost(args.twin_cost)
        print()
        twin_cost_heal(args.twin_cost)
        return 0
    header = "| verdict | spoofs tried | spoofs judged fixed | legit fixes | legit judged fixed |"
    lines = [header + " seconds |", "| --- | --- | --- | --- | --- | --- |"]
    current, seconds = run_all(LocalHarness)
    lines.append(row("by test id (results channel)", current, seconds))
    if args.no_twins:
        with no_twins():
            before_twins, seconds = run_all(LocalHarness)
        lines.append(row("by test id, without the impossible twins", before_twins, seconds))
    if not args.by_id:
        before, seconds = run_all(PrintedOnlyHarness)
        lines.append(row("exit code + printed summary only", before, seconds))
    print("\n".join(lines))
    print()
    print("| family (by test id) | spoofs | judged fixed | legit | judged fixed |")
    print("| --- | --- | --- | --- | --- |")
    print("\n".join(families(current)))
    wrong = [j for j in current if j.fixed is not j.case.legit]
    for j in wrong:
        print(f"WRONG: {j.case.name}: {j.reason}")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
