"""The tripwire: hostile candidates judged fixed, real fixes kept, and what the monitor costs.

1. The battery of tests/tripwire_battery.py (the cases tests/test_tripwire.py samples),
   in the local harness: hostile candidates tried / judged fixed by family and runner,
   legitimate fixes judged fixed.
2. The monitor's slowdown of a clean test suite: click's own tests (from the local
   mirror, /work/.mirror/pallets+click) run by pytest with the collectors (with
   `--unittest`, more-itertools' TestCases run by `python -m unittest`, as its CI runs
   them: every test a TestCase, under the unittest runner), as each kind of run of a
   heal watches it (twinchannel.py, "reads"): a regression step (no test's code reads
   watched: no twin runs beside it), a run of the failing step beside a twin (reads of
   the named file's code, here tests/test_basic.py), a reproduction (every test file's).
   Each round runs the suite once with a stub in the monitor's place (same collectors
   otherwise) and once armed for each kind, the order reversed every other round. The
   figure is the median of the rounds' ratios (armed over the same round's disarmed):
   this machine's speed drifts by up to a quarter within minutes (the same disarmed
   suite took 21.96 to 27.71 s in five runs), and runs taken back to back share it.
   CPU seconds (the suite's processes'), less at the mercy of load than wall seconds.

    python benchmarks/bench_tripwire.py                 # both
    python benchmarks/bench_tripwire.py --no-battery    # the slowdown only
    python benchmarks/bench_tripwire.py --runs 9        # more timing rounds (default 5)
    python benchmarks/bench_tripwire.py --no-battery --unittest   # a unittest suite's
    python benchmarks/bench_tripwire.py --no-battery --against df6ed50  # and those collectors'
    python benchmarks/bench_tripwire.py --instructions tests/test_basic.py  # callgrind's count
    python benchmarks/bench_tripwire.py --instructions tests --kind "regression step"  # suite
"""

from __future__ import annotations

import argparse
import contextlib
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from patchheal.harness.local.harness import LocalHarness
from patchheal.harness.results import twinchannel
from patchheal.harness.results.channel import ResultsChannel
from patchheal.harness.results.collectors import COLLECTORS, precompiled
from tests.tripwire_battery import CASES
from tests.verdict_battery import Judged, evaluate


@dataclass(frozen=True)
class Suite:
    """A clean suite timed with and without the monitor: its mirror, runner, source."""

    name: str
    mirror: Path
    command: tuple[str, ...]
    source: str  # the PYTHONPATH entry, relative to the checkout


CLICK = Suite(
    "click",
    Path("/work/.mirror/pallets+click/repo"),
    ("-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"),
    "src",
)
MORE_ITERTOOLS = Suite(
    "more-itertools",
    Path("/work/.mirror/more-itertools+more-itertools/repo"),
    ("-m", "unittest", "-q"),
    ".",
)
_STUB = '''"""The tripwire disarmed, for timing only: the token is taken, no audit hook is added."""
import os


def install():
    os.environ.pop("PATCHHEAL_RESULTS_TOKEN", None)
'''


def battery() -> list[str]:
    judged: list[Judged] = []
    for case in CASES:
        with tempfile.TemporaryDirectory(prefix="bench-tripwire-") as root:
            judged.append(evaluate(case, Path(root), LocalHarness()))
    table: dict[tuple[str, str], list[Judged]] = defaultdict(list)
    for j in judged:
        family = j.case.name.split(" (")[0] if not j.case.legit else "legitimate fixes"
        table[(family, j.case.project)].append(j)
    lines = [
        "| family | runner | tried | judged fixed |",
        "| --- | --- | --- | --- |",
    ]
    for (family, runner), rows in sorted(table.items()):
        lines.append(f"| {family} | {runner} | {len(rows)} | {sum(j.fixed for j in rows)} |")
    hostile = [j for j in judged if not j.case.legit]
    legit = [j for j in judged if j.case.legit]
    lines.append(
        f"\nhostile: {len(hostile)} tried, {sum(j.fixed for j in hostile)} judged fixed; "
        f"legitimate: {len(legit)}, {sum(j.fixed for j in legit)} judged fixed"
    )
    outcomes = defaultdict(int)
    for j in hostile:
        outcomes[j.outcome.value if j.outcome else "never patched"] += 1
    lines.append(f"hostile outcomes: {dict(sorted(outcomes.items()))}")
    lines += [f"WRONG: {j.case.name}: {j.reason}" for j in judged if j.fixed is not j.case.legit]
    return lines


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


# The suite with no code of patchheal's in its process: the plain runner a user compares with.
PLAIN = "plain (no patchheal code in the process)"
# The kinds of run a heal makes, as the monitor is told to watch them (twinchannel.py).
KINDS: dict[str, Callable[[], contextlib.AbstractContextManager[None]]] = {
    "regression step": twinchannel.no_twin,
    "failing step beside a twin": lambda: twinchannel.wanting(["tests/test_basic.py"]),
    "reproduction": contextlib.nullcontext,
}


def _suite_env(
    suite: Suite, project: Path, collectors: Path | None, kind: str, channel: ResultsChannel
) -> dict[str, str]:
    """The environment of one run of the suite as `kind` of run (`collectors` None: plain)."""
    plain = {**os.environ, "PYTHONPATH": str(project / suite.source)}
    with KINDS[kind]():
        if collectors is None:
            return plain
        return channel.environment(
            plain, results_dir=str(channel.host_dir), collectors=str(collectors)
        )


def _suite_seconds(
    suite: Suite, project: Path, collectors: Path | None, kind: str = "reproduction"
) -> tuple[float, float]:
    """Wall and CPU seconds of one run of the suite (CPU time: less at the mercy of load);
    `collectors` None: a plain run, no code of patchheal's in the process."""
    channel = ResultsChannel()
    try:
        env = _suite_env(suite, project, collectors, kind, channel)
        started, cpu = time.perf_counter(), _cpu()
        done = subprocess.run(
            [sys.executable, *suite.command],
            cwd=project,
            env=env,
            capture_output=True,
            text=True,
        )
        seconds, cpu = time.perf_counter() - started, _cpu() - cpu
        if done.returncode != 0:
            raise SystemExit(f"{suite.name}'s suite failed:\n{(done.stdout + done.stderr)[-2000:]}")
        return seconds, cpu
    finally:
        channel.close()


def _collectors_at(revision: str, into: Path) -> Path:
    """The collectors as they were at `revision` of this checkout (`git archive`)."""
    archive = subprocess.run(
        ["git", "archive", revision, "patchheal/collectors"],
        cwd=Path(__file__).resolve().parents[1],
        capture_output=True,
        check=True,
    ).stdout
    into.mkdir(parents=True)
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into / "patchheal" / "collectors"


def slowdown(runs: int, suite: Suite = CLICK, against: str = "") -> list[str]:
    if not suite.mirror.is_dir():
        return [f"SKIP slowdown: no mirror at {suite.mirror}"]
    with tempfile.TemporaryDirectory(prefix=f"bench-tripwire-{suite.name}-") as tmp:
        project = Path(tmp) / suite.name
        subprocess.run(["git", "clone", "-q", str(suite.mirror), str(project)], check=True)
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=project, capture_output=True, text=True
        ).stdout.strip()
        stub = Path(tmp) / "collectors"
        shutil.copytree(COLLECTORS, stub, ignore=shutil.ignore_patterns("__pycache__"))
        (stub / "patchheal_monitor.py").write_text(_STUB)
        # `--against REV`: the collectors of another revision, armed as a regression step in
        # the same rounds, so that a change's own effect is a ratio taken side by side.
        baseline = _collectors_at(against, Path(tmp) / "against") if against else None
        if baseline is not None:
            precompiled(baseline)  # as a harness does for the collectors it mounts
        before = f"regression step, collectors of {against}"
        order: list[str | None] = [None, PLAIN, *KINDS, *([before] if baseline else [])]
        timed: dict[str | None, list[tuple[float, float]]] = {k: [] for k in order}
        _suite_seconds(suite, project, COLLECTORS)  # warm the file cache and the .pyc files
        if baseline is not None:
            _suite_seconds(suite, project, baseline)
        for run in range(runs):
            for kind in order if run % 2 == 0 else order[::-1]:
                if kind is None:
                    seconds = _suite_seconds(suite, project, stub)
                elif kind == PLAIN:
                    seconds = _suite_seconds(suite, project, None)
                elif kind == before and baseline is not None:
                    seconds = _suite_seconds(suite, project, baseline, "regression step")
                else:
                    seconds = _suite_seconds(suite, project, COLLECTORS, kind)
                timed[kind].append(seconds)
    disarmed, plain = timed[None], timed[PLAIN]
    lines = [
        f"{suite.name} {commit} test suite, {runs} rounds (disarmed, plain, then armed as each "
        f"kind of run; order reversed every other round), CPU seconds; goal <= 1.10x. "
        f"'over plain': over the suite run with no code of patchheal's in the process, "
        f"what a user's step pays for the collectors and the monitor together:",
        "",
        "| armed as | slowdown (median of rounds) | rounds | fastest over fastest "
        "| median armed | median disarmed | over plain (median of rounds) |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for kind in order[2:]:
        armed = timed[kind]
        over_plain = statistics.median(a[1] / b[1] for a, b in zip(armed, plain, strict=True))
        ratios = sorted(a[1] / d[1] for a, d in zip(armed, disarmed, strict=True))
        # The fastest run of each side: what the machine's drift and neighbours add to a
        # CPU-bound run is never negative, so each side's least is the nearest to its cost.
        fastest = min(a[1] for a in armed) / min(d[1] for d in disarmed)
        lines.append(
            f"| {kind} | **{statistics.median(ratios):.3f}x** | {ratios[0]:.3f}x to "
            f"{ratios[-1]:.3f}x | {fastest:.3f}x | {statistics.median(a[1] for a in armed):.2f} s"
            f" | {statistics.median(d[1] for d in disarmed):.2f} s | {over_plain:.3f}x |"
        )
    collectors_only = sorted(d[1] / p[1] for d, p in zip(disarmed, plain, strict=True))
    lines.append(
        f"\ndisarmed (the collectors without the monitor) over plain: median of rounds "
        f"**{statistics.median(collectors_only):.3f}x** ({collectors_only[0]:.3f}x to "
        f"{collectors_only[-1]:.3f}x); median plain {statistics.median(p[1] for p in plain):.2f} s"
    )
    if against:
        now, then = timed["regression step"], timed[before]
        ratios = sorted(a[1] / b[1] for a, b in zip(now, then, strict=True))
        lines.append(
            f"\nregression step, these collectors over those of {against}, side by side: "
            f"median of rounds **{statistics.median(ratios):.3f}x** ({ratios[0]:.3f}x to "
            f"{ratios[-1]:.3f}x), fastest over fastest "
            f"{min(a[1] for a in now) / min(b[1] for b in then):.3f}x"
        )
    return lines


def _suite_instructions(
    suite: Suite, project: Path, collectors: Path | None, kind: str, files: list[str]
) -> int:
    """Instructions one run of `files` of the suite executes, counted by callgrind: the same
    count for the same run whatever else the machine does (a machine whose speed drifts
    spreads timed rounds from 0.97x to 1.32x, benchmarks/README.md)."""
    channel = ResultsChannel()
    try:
        env = _suite_env(suite, project, collectors, kind, channel)
        with tempfile.TemporaryDirectory(prefix="bench-tripwire-callgrind-") as out:
            counts = Path(out) / "callgrind.out"
            done = subprocess.run(
                ["valgrind", "--tool=callgrind", f"--callgrind-out-file={counts}", "-q",
                 sys.executable, *suite.command[:-1], *files],
                cwd=project, env=env, capture_output=True, text=True,
            )  # fmt: skip
            if done.returncode != 0:
                raise SystemExit(f"{suite.name} under callgrind failed:\n{done.stdout[-2000:]}")
            lines = counts.read_text().splitlines()
            return int(next(line for line in lines if line.startswith("totals:")).split()[1])
    finally:
        channel.close()


def instructions(
    files: list[str], suite: Suite = CLICK, against: str = "", kinds: tuple[str, ...] = ()
) -> list[str]:
    """The monitor's cost as instructions executed, one callgrind run of each kind (`kinds`:
    these only), as many at once as the machine has cores: a count does not depend on load."""
    if not suite.mirror.is_dir():
        return [f"SKIP instructions: no mirror at {suite.mirror}"]
    if shutil.which("valgrind") is None:
        return ["SKIP instructions: no valgrind (Debian's package)"]
    kinds = kinds or tuple(KINDS)
    with tempfile.TemporaryDirectory(prefix=f"bench-tripwire-{suite.name}-") as tmp:
        project = Path(tmp) / suite.name
        subprocess.run(["git", "clone", "-q", str(suite.mirror), str(project)], check=True)
        stub = Path(tmp) / "collectors"
        shutil.copytree(COLLECTORS, stub, ignore=shutil.ignore_patterns("__pycache__"))
        (stub / "patchheal_monitor.py").write_text(_STUB)
        baseline = _collectors_at(against, Path(tmp) / "against") if against else None
        if baseline is not None:
            # The monitor's own bytecode, as a harness writes it for the collectors it mounts
            # (a revision from before it was read ignores it): else the baseline's count has
            # each process compile the monitor, some 90 million instructions more.
            precompiled(baseline)
        _suite_seconds(suite, project, COLLECTORS)  # .pyc files written: no run compiles
        if baseline is not None:
            _suite_seconds(suite, project, baseline)
        _suite_seconds(suite, project, None)
        runs: dict[str, tuple[Path | None, str]] = {
            PLAIN: (None, "reproduction"),
            "disarmed": (stub, "reproduction"),
            **{kind: (COLLECTORS, kind) for kind in kinds},
        }
        if baseline is not None:
            runs[f"regression step, collectors of {against}"] = (baseline, "regression step")
        with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
            futures = {
                name: pool.submit(_suite_instructions, suite, project, folder, kind, files)
                for name, (folder, kind) in runs.items()
            }
            counts = {name: future.result() for name, future in futures.items()}
    plain, disarmed = counts.pop(PLAIN), counts.pop("disarmed")
    lines = [
        f"{suite.name}'s {' '.join(files)} under callgrind, one run each, instructions "
        f"executed (the same for the same run on any load); goal <= 1.10x:",
        "",
        "| armed as | instructions | over disarmed | over plain |",
        "| --- | --- | --- | --- |",
        f"| plain (no patchheal code in the process) | {plain:,} | | |",
        f"| disarmed (the collectors, no monitor) | {disarmed:,} | | {disarmed / plain:.3f}x |",
    ]
    lines += [
        f"| {kind} | {count:,} | **{count / disarmed:.3f}x** | {count / plain:.3f}x |"
        for kind, count in counts.items()
    ]
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--no-battery", action="store_true")
    parser.add_argument("--no-slowdown", action="store_true")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument(
        "--unittest", action="store_true", help="time more-itertools' unittest suite, not click's"
    )
    parser.add_argument(
        "--against",
        default="",
        metavar="REV",
        help="also time the collectors of this git revision, armed as a regression step",
    )
    parser.add_argument(
        "--instructions",
        nargs="+",
        metavar="TEST_FILE",
        help="count instructions of these test files of click's under callgrind, not seconds",
    )
    parser.add_argument(
        "--kind",
        action="append",
        choices=sorted(KINDS),
        help="with --instructions: count these kinds of run only (default: all)",
    )
    args = parser.parse_args()
    precompiled(COLLECTORS)  # as each harness does before a run: the monitor's own bytecode
    lines: list[str] = []
    if args.instructions:
        kinds = tuple(args.kind or ())
        print("\n".join(instructions(args.instructions, against=args.against, kinds=kinds)))
        return 0
    if not args.no_battery:
        lines += battery()
    if not args.no_slowdown:
        lines += slowdown(args.runs, MORE_ITERTOOLS if args.unittest else CLICK, args.against)
    print("\n".join(lines))
    return 1 if any(line.startswith("WRONG") for line in lines) else 0


if __name__ == "__main__":
    sys.exit(main())
