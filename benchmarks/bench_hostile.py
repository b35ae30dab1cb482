"""The generative hostile battery as tables: tricks that work, tricks judged fixed, real fixes.

Runs every candidate of tests/hostile_battery.py: each hostile one is first
proven to fool the bare runner (tests/hostile/proof.py), then every working
trick and every real fix is judged like the loop judges a candidate (the real
reproduction gate, the real verification, the local harness with its results
channel, `verify_runs` 2, 30 s step timeouts). Prints per family × runner:
tried / working / judged fixed; the same per form and per family × form; the
real fixes judged fixed; the cases judged fixed; the time.

    python benchmarks/bench_hostile.py              # the whole battery
    python benchmarks/bench_hostile.py --sample     # one per family × runner (the CI sample)
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.hostile.judging import Judge, Judged
from tests.hostile.payloads import FAMILIES
from tests.hostile.proof import Proof, prove_all
from tests.hostile_battery import FORMS, HOSTILE, LEGIT, RUNNERS, SAMPLE, SKIPPED, Candidate


def _table(
    title: str,
    rows: list[str],
    cols: list[str],
    cell: Callable[[str, str], str],
) -> list[str]:
    lines = [f"| {title} | " + " | ".join(cols) + " |", "| --- " * (len(cols) + 1) + "|"]
    lines += [f"| {row} | " + " | ".join(cell(row, col) for col in cols) + " |" for row in rows]
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sample", action="store_true", help="one per family × runner only")
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    hostile = SAMPLE if args.sample else HOSTILE
    started = time.monotonic()
    proofs: dict[str, Proof] = {p.candidate.name: p for p in prove_all(hostile, args.workers)}
    proved = time.monotonic() - started
    working = [c for c in hostile if proofs[c.name].works]
    with tempfile.TemporaryDirectory(prefix="bench-hostile-") as root:
        judge = Judge(Path(root))
        try:
            with ThreadPoolExecutor(max_workers=args.workers) as pool:
                judged = list(pool.map(judge.evaluate, [*working, *LEGIT]))
        finally:
            judge.close()
    seconds = time.monotonic() - started
    by_name: dict[str, Judged] = {j.candidate.name: j for j in judged}

    def counts(mine: list[Candidate]) -> str:
        works = [c for c in mine if proofs[c.name].works]
        return f"{len(mine)} / {len(works)} / {sum(by_name[c.name].fixed for c in works)}"

    def cell(key: Callable[[Candidate], tuple[str, str]]) -> Callable[[str, str], str]:
        def render(row: str, col: str) -> str:
            mine = [c for c in hostile if key(c) == (row, col)]
            return counts(mine) if mine else "–"

        return render

    print("hostile: tried / working on the bare runner / judged fixed\n")
    print(
        "\n".join(
            _table(
                "family × runner",
                list(FAMILIES),
                list(RUNNERS),
                cell(lambda c: (c.family, c.runner)),
            )
        )
    )
    print()
    print(
        "\n".join(
            _table(
                "family × form",
                list(FAMILIES),
                list(FORMS),
                cell(lambda c: (c.family, c.form)),
            )
        )
    )
    print()
    forms = [f"{f}: {counts([c for c in hostile if c.form == f])}" for f in FORMS]
    print("per form:", "; ".join(forms))
    hostile_judged = [by_name[c.name] for c in working]
    fooled = [j for j in hostile_judged if j.fixed]
    legit = [by_name[c.name] for c in LEGIT]
    kept = [j for j in legit if j.fixed]
    gated = sum(j.gate is not None for j in fooled)
    print(
        f"\nhostile: {len(hostile)} tried, {len(working)} working, {len(fooled)} judged fixed "
        f"({gated} of those would be refused by the policy gate)"
    )
    print(f"legit: {len(legit)} tried, {len(kept)} judged fixed")
    print(f"time: {seconds:.0f} s ({proved:.0f} s proving), {args.workers} workers")
    print("\nleft out:", "; ".join(f"{what} ({why})" for what, why in SKIPPED))
    for p in proofs.values():
        if not p.works:
            print(f"NOT WORKING (dropped): {p.candidate.name}: {p.detail}")
    for j in fooled:
        print(f"JUDGED FIXED: {j.candidate.name} (gate: {j.gate or 'passes'})")
    for j in legit:
        if not j.fixed:
            print(f"REAL FIX REFUSED: {j.candidate.name}: {j.outcome}: {j.reason}")
    return 1 if fooled or len(kept) < len(legit) else 0


if __name__ == "__main__":
    sys.exit(main())
