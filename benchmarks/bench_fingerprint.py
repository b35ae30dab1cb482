"""Fingerprint + classify throughput and memory on large logs, against a read+sha256 floor.

    python benchmarks/bench_fingerprint.py [--sizes 10,30,100] [--repeat 3]

For each size, a log is generated (CI noise, a failure in the middle, the failing
pytest run at the end). Each measurement runs in a fresh child process so that
its peak RSS is its own: the floor reads the file in 4 MiB chunks and hashes it
with SHA-256; patchheal streams it (`analyze_file`) and classifies the excerpt.
Medians of --repeat runs; ratio = patchheal time / floor time (target <= 3).
Peak memory is the child's ru_maxrss, and the Python heap peak from tracemalloc
in a separate run, so that tracing does not slow the timed runs.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

CHILD = r"""
import hashlib, json, resource, sys, time, tracemalloc
from pathlib import Path
mode, path, trace = sys.argv[1], Path(sys.argv[2]), sys.argv[3] == "1"
from patchheal.failure.classify import classify
from patchheal.failure.analysis import from_text, read_log
setup = time.perf_counter()
from_text("Traceback (most recent call last):\nValueError: warm-up")  # one-time setup, untimed
setup = time.perf_counter() - setup
if trace:
    tracemalloc.start()
start = time.perf_counter()
if mode == "floor":
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while chunk := fh.read(4 * 1024 * 1024):
            digest.update(chunk)
    result = digest.hexdigest()[:16]
else:
    excerpt = read_log(path)
    failure = from_text(excerpt.text)
    result = f"{failure.fingerprint} {classify(failure, excerpt.text).failure_class.value}"
seconds = time.perf_counter() - start
peak = tracemalloc.get_traced_memory()[1] if trace else 0
rss_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"seconds": seconds, "setup": setup, "rss_kb": rss_kb, "heap_peak": peak,
                  "result": result}))
"""

FAILURE_MIDDLE = """\
Traceback (most recent call last):
  File "/home/runner/work/shop/shop/app/sync.py", line 41, in pull
    rows = client.fetch(batch)
  File "/home/runner/work/shop/shop/app/client.py", line 12, in fetch
    raise RuntimeError(f"batch {batch} rejected")
RuntimeError: batch 17 rejected
WARNING retrying batch 17 in 2.0s
"""

FAILURE_END = """\
============================= test session starts ==============================
rootdir: /home/runner/work/shop/shop
collected 412 items

tests/test_pricing.py ........F.........                                 [100%]

=================================== FAILURES ===================================
_________________________ test_total_applies_discount __________________________

    def test_total_applies_discount():
>       assert total([10, 20], 0.1) == 27
E       assert 3.0 == 27
E        +  where 3.0 = total([10, 20], 0.1)

tests/test_pricing.py:9: AssertionError
=========================== short test summary info ============================
FAILED tests/test_pricing.py::test_total_applies_discount - assert 3.0 == 27
1 failed, 411 passed in 12.31s
Error: Process completed with exit code 1.
"""

WORDS = ["resolving", "downloading", "collected", "compiling", "linking", "cache", "hit", "miss"]
WORDS += ["step", "layer", "artifact", "upload", "worker", "batch", "ok", "done", "waiting"]


def make_log(path: Path, size_mb: int, seed: int = 7) -> None:
    rng = random.Random(seed)
    block_lines = []
    for i in range(5000):
        level = rng.choice(("INFO", "INFO", "INFO", "DEBUG", "WARN"))
        words = " ".join(rng.choice(WORDS) for _ in range(rng.randrange(4, 12)))
        block_lines.append(f"2026-01-01T10:{i // 60 % 60:02d}:{i % 60:02d}.{i % 1000:03d}Z {level} "
                           f"[{rng.choice(WORDS)}-{i % 9}] {words} id={rng.getrandbits(40):x} "
                           f"took {rng.random() * 900:.1f}ms\n")  # fmt: skip
    block = "".join(block_lines).encode()
    target = size_mb * 1024 * 1024
    with path.open("wb") as out:
        written = 0
        middle_done = False
        while written < target - len(FAILURE_END):
            out.write(block)
            written += len(block)
            if not middle_done and written >= target // 2:
                out.write(FAILURE_MIDDLE.encode())
                middle_done = True
        out.write(FAILURE_END.encode())


def child(mode: str, path: Path, trace: bool = False) -> dict[str, float | str]:
    done = subprocess.run([sys.executable, "-c", CHILD, mode, str(path), "1" if trace else "0"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="10,30,100", help="log sizes in MB")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for size in sizes:
            log = Path(tmp) / f"ci-{size}mb.log"
            make_log(log, size)
            mb = log.stat().st_size / 1e6
            child("floor", log)  # warm the page cache
            floor = [child("floor", log) for _ in range(args.repeat)]
            ours = [child("ours", log) for _ in range(args.repeat)]
            traced = child("ours", log, trace=True)
            t_floor = statistics.median(float(r["seconds"]) for r in floor)
            t_ours = statistics.median(float(r["seconds"]) for r in ours)
            rows.append((size, mb / t_floor, mb / t_ours, t_ours / t_floor,
                         max(float(r["rss_kb"]) for r in floor) / 1024,
                         max(float(r["rss_kb"]) for r in ours) / 1024,
                         float(traced["heap_peak"]) / 1e6, str(ours[0]["result"]),
                         statistics.median(float(r["setup"]) for r in ours)))  # fmt: skip
    print(
        f"{'log MB':>7} {'floor MB/s':>11} {'ours MB/s':>10} {'ratio':>6} "
        f"{'floor RSS':>10} {'ours RSS':>9} {'heap peak':>10} {'setup':>6}  result"
    )
    for size, floor_mbs, ours_mbs, ratio, floor_rss, ours_rss, heap, result, setup in rows:
        print(
            f"{size:>7} {floor_mbs:>11.0f} {ours_mbs:>10.0f} {ratio:>5.2f}x "
            f"{floor_rss:>8.0f}MB {ours_rss:>7.0f}MB {heap:>8.1f}MB "
            f"{setup * 1000:>4.0f}ms  {result}"
        )
    print(
        "floor = read in 4 MiB chunks + sha256; ours = analyze_file + classify (streaming). "
        "RSS includes the interpreter and imports; heap peak is tracemalloc's; setup is the "
        "one-time first call (detect-secrets import, regex compilation), not in the timings."
    )


if __name__ == "__main__":
    main()
