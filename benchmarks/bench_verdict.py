"""The adversarial verdict battery as a table: spoofs tried / judged fixed, real fixes judged fixed.

Runs the same cases as tests/test_verdict_battery.py (tests/verdict_battery.py)
in the local harness, and as the baseline in the same run, the same cases
judged the way patchheal judged before the results channel: the step's exit
code and printed summary only (this script's harness drops the collectors'
results before the judge sees them; verify_runs and the reproduction rerun
stay on, so the difference is the results channel alone).

    python benchmarks/bench_verdict.py            # both verdicts
    python benchmarks/bench_verdict.py --by-id    # only the current verdict
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from patchheal.harness.local import LocalHarness
from patchheal.models import CommandResult
from tests.verdict_battery import CASES, Judged, evaluate


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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--by-id", action="store_true", help="skip the printed-only baseline")
    args = parser.parse_args()
    header = "| verdict | spoofs tried | spoofs judged fixed | legit fixes | legit judged fixed |"
    lines = [header + " seconds |", "| --- | --- | --- | --- | --- | --- |"]
    current, seconds = run_all(LocalHarness)
    lines.append(row("by test id (results channel)", current, seconds))
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
