"""Precision of the secret gate and the scrubber on real diffs, and recall on seeded secrets.

    python benchmarks/bench_secret_precision.py [--cache DIR] [--show N] [--dump FILE]

Real diffs: the sdists of consecutive releases of well-known PyPI packages,
downloaded once with `pip download --no-deps --no-binary NAME` into a cache
outside the repository (default ~/.cache/patchheal-bench/sdists; nothing
downloaded is committed), unpacked, diffed with `git diff --no-index` and split
into hunks. Every hunk, as a one-file patch, goes through the patch secret gate
(`patchheal.gates.secrets.credentials_in`) and through the scrubber; a hunk is
"refused" when the gate names a credential in it, a line is "redacted" when the
scrubber changes it. Both should be 0: these are upstream releases, not leaks.

Recall: every seeded secret of tests/test_scrub.py, written as an added line of a
patch, must still be refused by the gate and masked by the scrubber.
"""

from __future__ import annotations

import argparse
import sys
import tarfile
import tempfile
import time
from pathlib import Path

from patchheal import proc
from patchheal.gates.secrets import credentials_in
from patchheal.gates.tampering import runner_tampering
from patchheal.scrub.scrubber import Scrubber
from patchheal.workspace import diffs

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from test_scrub import _secret_of, seeded

# (package, older release, next release): pairs with many changed hunks.
PAIRS: tuple[tuple[str, str, str], ...] = (
    ("requests", "2.31.0", "2.32.0"),
    ("click", "8.0.4", "8.1.0"),
    ("attrs", "22.2.0", "23.1.0"),
    ("flask", "2.2.5", "2.3.0"),
    ("jinja2", "3.0.3", "3.1.0"),
    ("httpx", "0.24.1", "0.25.0"),
    ("rich", "13.3.5", "13.4.0"),
    ("packaging", "21.3", "22.0"),
    ("urllib3", "1.26.18", "2.0.0"),
    ("pluggy", "1.0.0", "1.2.0"),
)
DEFAULT_CACHE = Path.home() / ".cache" / "patchheal-bench" / "sdists"


def sdist(cache: Path, name: str, version: str, unpacked: Path) -> None:
    """Unpack the sdist of name==version into `unpacked`, downloaded into `cache` on first use."""
    found = [p for p in cache.glob("*.tar.gz") if _is_release(p.name, name, version)]
    if not found:
        proc.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "-q",
                "--no-deps",
                "--no-binary",
                name,
                "-d",
                str(cache),
                f"{name}=={version}",
            ],
            timeout=600,
            check=True,
        )
        found = [p for p in cache.glob("*.tar.gz") if _is_release(p.name, name, version)]
    with tempfile.TemporaryDirectory(dir=cache) as tmp, tarfile.open(found[0]) as tar:
        tar.extractall(tmp, filter="data")
        (top,) = Path(tmp).iterdir()
        unpacked.parent.mkdir(parents=True, exist_ok=True)
        top.rename(unpacked)


def _is_release(filename: str, name: str, version: str) -> bool:
    norm = filename.lower().replace("-", "_")
    return norm == f"{name.lower().replace('-', '_')}_{version}.tar.gz"


def hunks_between(base: Path) -> list[str]:
    """Each hunk of the diff from `base/a` to `base/b`, as a one-file, one-hunk patch."""
    done = proc.run(
        ["git", "diff", "--no-index", "--no-color", "--no-ext-diff", "a/", "b/"],
        cwd=base,
        timeout=600,
        output_cap=1 << 28,
        env=proc.no_git_env(),
    )
    out: list[str] = []
    header: list[str] = []
    hunk: list[str] = []
    for line in done.output.splitlines(keepends=True):
        if line.startswith("diff --git "):
            if hunk:
                out.append("".join(header + hunk))
            header, hunk = [line], []
        elif line.startswith("@@ "):
            if hunk:
                out.append("".join(header + hunk))
            hunk = [line]
        elif hunk:
            hunk.append(line)
        else:
            header.append(line)
    if hunk:
        out.append("".join(header + hunk))
    return out


def pair_dir(cache: Path, name: str, old: str, new: str) -> Path:
    """A directory holding `a` (old) and `b` (new) so that diff paths read a/... and b/..."""
    base = cache / "pairs" / f"{name}-{old}-{new}"
    for side, version in (("a", old), ("b", new)):
        if not (base / side).is_dir():
            sdist(cache, name, version, base / side)
    return base


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE)
    parser.add_argument("--show", type=int, default=5, help="print up to N false positives")
    parser.add_argument("--dump", type=Path, help="write every false-positive hunk here")
    args = parser.parse_args()
    args.cache.mkdir(parents=True, exist_ok=True)
    scrubber = Scrubber()
    rows = []
    false_positives: list[tuple[str, str, str]] = []
    started = time.perf_counter()
    for name, old, new in PAIRS:
        base = pair_dir(args.cache, name, old, new)
        hunks = hunks_between(base)
        refused = redacted = tampering = 0
        for hunk in hunks:
            # Runner-tampering rules on the same real hunks (without the pre-patch file: the
            # gate's fallback; new files are judged on their whole syntax tree).
            for patched in diffs.parse(hunk):
                found = runner_tampering(patched, None)
                if found:
                    tampering += 1
                    false_positives.append((f"{name} {old}->{new}", "tampering: " + found[0], hunk))
            reasons = credentials_in(hunk, scrubber)
            if reasons:
                refused += 1
                false_positives.append((f"{name} {old}->{new}", "refused: " + reasons[0], hunk))
            scrubbed = scrubber.scrub(hunk)
            if scrubbed != hunk:
                changed = [
                    a
                    for a, b in zip(hunk.splitlines(), scrubbed.splitlines(), strict=False)
                    if a != b
                ]
                redacted += len(changed)
                for line in changed:
                    false_positives.append((f"{name} {old}->{new}", "redacted: " + line, hunk))
        rows.append((f"{name} {old}→{new}", len(hunks), refused, redacted, tampering))
    seconds = time.perf_counter() - started

    cases = seeded()
    caught = 0
    missed = []
    for fmt, text, secret in cases:
        lines = text.count("\n") + 2
        patch = f"--- a/cfg.py\n+++ b/cfg.py\n@@ -1,1 +1,{lines} @@\n x = 1\n"
        patch += "".join(f"+{line}\n" for line in text.split("\n"))
        gate = bool(credentials_in(patch, scrubber))
        masked = _secret_of(text, secret) not in scrubber.scrub(patch)
        if gate and masked:
            caught += 1
        else:
            missed.append(f"{fmt} (gate {gate}, scrubber {masked})")

    print(
        "| package | hunks | patches refused (secret) | lines redacted | runner-tampering flags |"
    )
    print("| --- | ---: | ---: | ---: | ---: |")
    for row in rows:
        print(f"| {row[0]} | {row[1]} | {row[2]} | {row[3]} | {row[4]} |")
    total = [sum(r[i] for r in rows) for i in (1, 2, 3, 4)]
    print(f"| **all {len(rows)} packages** | {total[0]} | {total[1]} | {total[2]} | {total[3]} |")
    print()
    print(f"seeded secrets caught (gate refuses and scrubber masks): {caught} of {len(cases)}")
    for miss in missed:
        print(f"  missed: {miss}")
    print(f"{total[0]} hunks gated and scrubbed in {seconds:.1f} s")
    for where, what, _ in false_positives[: args.show]:
        print(f"  {where}: {what[:160]}")
    if args.dump:
        args.dump.write_text(
            "".join(f"### {where}: {what}\n{hunk}\n" for where, what, hunk in false_positives)
        )
    return 0 if total[1] == total[2] == 0 and not missed else 1


if __name__ == "__main__":
    raise SystemExit(main())
