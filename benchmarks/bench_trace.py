"""What tracing the reproduction costs: a real project's test suite, untraced and traced.

The reproduction run is the only traced run (`harness.run(..., trace=True)`):
the pytest collector records what each test executed so localization can
contrast the failing tests with the passing ones (see docs/proposers.md).
Measured here on pallets/click's own suite, from the local mirror of its
history (`/work/.mirror/pallets+click/repo`, or `$PATCHHEAL_MIRRORS`; fetch it
first, see benchmarks/README.md), through the local harness, in the same run:

- untraced:       `trace=False`, what every verification run costs;
- functions only: `trace=True` with `PATCHHEAL_TRACE_LINES=0` (calls, depth and
                  the per-function contrast; the collector's escape hatch);
- functions+lines: `trace=True`, the default (statement-level contrast).

Medians of N repetitions, interleaved so that a change of load hits every
variant alike, and the ratio against the untraced run.

Run: python benchmarks/bench_trace.py [--reps N] [--commit REV]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from patchheal.harness.local.harness import LocalHarness

# PYTHONPATH too: some tests run the interpreter in a subprocess, which must import this
# tree's click, not whatever click the host has installed.
STEP = 'PYTHONPATH="$PYTHONPATH:src" python -m pytest -q -p no:cacheprovider tests'


def mirror() -> Path | None:
    path = Path(os.environ.get("PATCHHEAL_MIRRORS", "/work/.mirror")) / "pallets+click" / "repo"
    return path if path.is_dir() else None


def checkout(git_dir: Path, rev: str, into: Path) -> None:
    archive = subprocess.run(
        ["git", f"--git-dir={git_dir}", "archive", rev], capture_output=True, check=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    for args in (["init", "-q"], ["add", "-A"]):
        subprocess.run(["git", *args], cwd=into, check=True, capture_output=True)
    subprocess.run(
        ["git", "-c", "user.name=b", "-c", "user.email=b@b", "commit", "-qm", "suite"],
        cwd=into,
        check=True,
        capture_output=True,
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--commit", default="HEAD", help="the click revision to run")
    args = parser.parse_args()
    git_dir = mirror()
    if git_dir is None:
        print("no mirror of pallets/click: fetch it first (see benchmarks/README.md)")
        return 0
    variants = {
        "untraced": (STEP, False),
        "functions only": (f"PATCHHEAL_TRACE_LINES=0 {STEP}", True),
        "functions+lines": (STEP, True),
    }
    times: dict[str, list[float]] = {name: [] for name in variants}
    tests = 0
    with tempfile.TemporaryDirectory(prefix="bench-trace-") as tmp:
        tree = Path(tmp)
        checkout(git_dir, args.commit, tree)
        harness = LocalHarness()
        for _ in range(args.reps):
            for name, (command, trace) in variants.items():
                started = time.perf_counter()
                result = harness.run(command, tree, timeout=1800, idle_timeout=600, trace=trace)
                times[name].append(time.perf_counter() - started)
                if result.tests is None or result.exit_code != 0:
                    print(f"{name}: the suite did not pass\n{result.output[-2000:]}")
                    return 1
                tests = len(result.tests.outcomes)
    base = statistics.median(times["untraced"])
    commit = subprocess.run(
        ["git", f"--git-dir={git_dir}", "rev-parse", "--short=10", args.commit],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    print(f"pallets/click {commit}: {tests} tests, local harness, {args.reps} runs each\n")
    print("| variant | median s | min s | × untraced |")
    print("| --- | ---: | ---: | ---: |")
    for name, runs in times.items():
        median = statistics.median(runs)
        print(f"| {name} | {median:.2f} | {min(runs):.2f} | {median / base:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
