"""Scrubbing cost with a job's secrets: real diff hunks and number-heavy test logs.

Run once with this checkout and once with an older one on PYTHONPATH (the script only
imports `Scrubber`) to see what disguised-secret masking (scrub/variants.py) costs:

    python benchmarks/bench_scrub_variants.py
    PYTHONPATH=/path/to/older/checkout python benchmarks/bench_scrub_variants.py
"""

from __future__ import annotations

import random
import string
import time
from pathlib import Path

from patchheal.scrub.scrubber import Scrubber

HUNKS = Path(__file__).resolve().parents[1] / "tests" / "data" / "real_hunks_not_secrets.txt"


def main() -> None:
    rng = random.Random(1)
    secrets = [
        "".join(rng.choice(string.ascii_letters + string.digits) for _ in range(32))
        for _ in range(5)
    ]
    scrubber = Scrubber(secrets)
    texts = {
        "real diff hunks": HUNKS.read_text() * 600,
        "test log, a row of numbers per line": "\n".join(
            f"test_{i} PASSED [ {i % 100}%] 1 2 3 4 5 6 7 8 9 10 took 0.{i} s  0x{i % 256:02x}"
            for i in range(50_000)
        ),
    }
    print("| text | MB | best of 3, s | MB/s |")
    print("| --- | ---: | ---: | ---: |")
    for name, text in texts.items():
        samples = []
        for _ in range(3):
            started = time.perf_counter()
            scrubber.scrub(text)
            samples.append(time.perf_counter() - started)
        size = len(text) / 1e6
        print(f"| {name} | {size:.1f} | {min(samples):.3f} | {size / min(samples):.1f} |")


if __name__ == "__main__":
    main()
