"""Where the test suite's time goes: per file and per phase, from a pytest log.

Run the suite with `--durations=0` (every test's setup, call and teardown),
then read its log:

    python3 -m pytest -q -n 2 --durations=0 > suite.log
    python3 benchmarks/suite_durations.py suite.log [rows]

Prints the total by phase, a Markdown table of the slowest files (tests,
minutes, share) and the slowest fixture setups. Under `-n 2` the sums are
worker time, about twice the wall time.
"""

from __future__ import annotations

import collections
import re
import sys
from pathlib import Path

_ROW = re.compile(r"^([\d.]+)s (setup|call|teardown)\s+(\S+)", re.MULTILINE)


def main(log: Path, rows: int = 30) -> None:
    per_file: collections.Counter[str] = collections.Counter()
    per_phase: collections.Counter[str] = collections.Counter()
    tests: collections.Counter[str] = collections.Counter()
    setups: collections.Counter[str] = collections.Counter()
    for seconds, phase, node in _ROW.findall(log.read_text(encoding="utf-8", errors="replace")):
        path = node.split("::")[0]
        per_file[path] += float(seconds)
        per_phase[phase] += float(seconds)
        tests[path] += phase == "call"
        if phase == "setup":
            setups[node] = float(seconds)
    total = sum(per_file.values()) or 1.0
    phases = ", ".join(f"{name} {value / 60:.1f} min" for name, value in per_phase.items())
    print(f"total {total / 60:.1f} min; by phase: {phases}\n")
    print("| file | tests | minutes | share |\n| --- | ---: | ---: | ---: |")
    for path, seconds in per_file.most_common(rows):
        print(f"| {path} | {tests[path]} | {seconds / 60:.1f} | {100 * seconds / total:.1f}% |")
    print("\nslowest fixture setups:")
    for node, seconds in setups.most_common(10):
        print(f"  {seconds:7.1f} s  {node}")


if __name__ == "__main__":
    main(Path(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else 30)
