"""Spec fuzzing at scale: seeded malformed job specs through `heal --print-spec`, in-process.

Each case is a spec from tests/specfuzz.py (structural and textual mutations, files
of the wrong kind, symlink loops in every path field, hostile results globs, harness
names and URLs, workflows nested 100,000 deep, alias bombs and cycles). A spec that
loads is then used as a run would (`_what_a_run_does_next` of tests/test_spec_fuzz.py).
Every case must end accepted or refused with exit 2 and a message: an internal error
(exit 1, a crash log, an exception) or a hang (past --per-case seconds) is counted.

    python benchmarks/bench_specfuzz.py [--cases 10000] [--seed 16] [--per-case 10]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import resource
import shutil
import signal
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from types import FrameType

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from patchheal.cli import main as cli_main  # noqa: E402
from patchheal.errors import EXIT_BAD_INPUT, BadInput  # noqa: E402
from tests.specfuzz import cases  # noqa: E402
from tests.test_spec_fuzz import _clear, _what_a_run_does_next  # noqa: E402


class Hung(Exception):
    pass


def _alarm(_signum: int, _frame: FrameType | None) -> None:
    raise Hung


def _print_spec(spec: Path) -> tuple[int, str]:
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            cli_main(["heal", str(spec), "--print-spec"])
            code = 0
        except SystemExit as exc:
            code = int(exc.code or 0)
    return code, err.getvalue()


def run(count: int, seed: int, per_case: int) -> None:
    tally: Counter[str] = Counter()
    codes: Counter[int] = Counter()
    errors: list[str] = []
    slowest = (0.0, "")
    previous = signal.signal(signal.SIGALRM, _alarm)
    started = time.perf_counter()
    root = Path(tempfile.mkdtemp(prefix="bench-specfuzz-"))
    try:
        for name, spec in cases(root, count, seed=seed):
            began = time.perf_counter()
            signal.alarm(per_case)
            try:
                code, err = _print_spec(spec)
                codes[code] += 1
                if code == 0:
                    try:
                        _what_a_run_does_next(spec)
                        tally["accepted"] += 1
                    except BadInput:
                        tally["refused when used"] += 1
                elif code == EXIT_BAD_INPUT and _clear(err):
                    tally["refused (exit 2)"] += 1
                else:
                    tally["internal error"] += 1
                    errors.append(f"{name}: exit {code}: {err[:200]!r}")
            except Hung:
                tally["hang"] += 1
                errors.append(f"{name}: still running after {per_case}s")
            except Exception as exc:
                tally["internal error"] += 1
                errors.append(f"{name}: {exc!r}")
            finally:
                signal.alarm(0)
            took = time.perf_counter() - began
            slowest = max(slowest, (took, name))
            shutil.rmtree(spec.parent, ignore_errors=True)
    finally:
        signal.signal(signal.SIGALRM, previous)
        shutil.rmtree(root, ignore_errors=True)
    wall = time.perf_counter() - started
    rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        f"| specs | seed | {' | '.join(f'exit {c}' for c in sorted(codes))} "
        "| internal errors | hangs | max RSS MiB | slowest case s | wall s |"
    )
    print("| ---: | ---: |" + " ---: |" * (len(codes) + 5))
    print(
        f"| {count} | {seed} | {' | '.join(str(codes[c]) for c in sorted(codes))} "
        f"| {tally['internal error']} | {tally['hang']} | {rss_mib:.0f} | {slowest[0]:.2f} "
        f"| {wall:.0f} |"
    )
    print()
    print("outcomes:", dict(sorted(tally.items())))
    for line in errors[:30]:
        print("  ", line)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--cases", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=16)
    parser.add_argument("--per-case", type=int, default=10)
    args = parser.parse_args()
    run(args.cases, args.seed, args.per_case)


if __name__ == "__main__":
    main()
