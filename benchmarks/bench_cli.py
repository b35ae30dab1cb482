"""CLI start-up: `patchheal --help` against a bare `python -c pass` in the same run.

Heavy libraries (SQLModel, the Docker SDK, pydantic models of the loop) load
only inside the commands that need them; this measures that it stays so.

    python benchmarks/bench_cli.py [--runs 15]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import time


def timed(argv: list[str], runs: int) -> list[float]:
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        samples.append(time.perf_counter() - started)
    return samples


def imported_modules(argv_module: str) -> int:
    code = (
        f"import sys; import {argv_module}; "
        "print(len([m for m in sys.modules if m.split('.')[0] in "
        "('sqlmodel','sqlalchemy','docker','jinja2','pydantic','git')]))"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    return int(out.stdout.strip())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    script = shutil.which("patchheal")
    rows = [
        ("python -c pass (floor)", [sys.executable, "-c", "pass"]),
        ("python -m patchheal --help", [sys.executable, "-m", "patchheal", "--help"]),
    ]
    if script:
        rows.append(("patchheal --help (console script)", [script, "--help"]))
    rows.append(
        (
            "patchheal fingerprint --help",
            [sys.executable, "-m", "patchheal", "fingerprint", "--help"],
        )
    )
    results = [(name, timed(argv, args.runs)) for name, argv in rows]
    floor = statistics.median(results[0][1])
    print(f"{'command':<36} {'median ms':>10} {'p90 ms':>8} {'x floor':>8}")
    for name, samples in results:
        median = statistics.median(samples)
        p90 = sorted(samples)[int(0.9 * (len(samples) - 1))]
        print(f"{name:<36} {median * 1000:>10.1f} {p90 * 1000:>8.1f} {median / floor:>8.2f}")
    heavy = imported_modules("patchheal.cli")
    print(f"\nheavy modules imported by `import patchheal.cli`: {heavy}")
    print("target: patchheal --help under 150 ms")


if __name__ == "__main__":
    main()
