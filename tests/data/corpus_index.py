"""The recorded failure corpus under tests/data/corpus (written by gen_corpus.py), for tests."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path

CORPUS = Path(__file__).resolve().parent / "corpus"


@dataclass(frozen=True)
class Run:
    bug: str
    expected_class: str
    kind: str
    log: Path
    junit: Path | None
    exit_code: int | None
    timed_out: str | None
    passed: bool


@cache
def manifest() -> dict[str, dict]:  # type: ignore[type-arg]
    return json.loads((CORPUS / "manifest.json").read_text())


def runs(*, failing_only: bool = True) -> list[Run]:
    out = []
    for bug, info in manifest().items():
        for run in info["runs"]:
            if failing_only and run["passed"]:
                continue
            out.append(Run(bug, info["expected_class"], info["kind"], CORPUS / run["log"],
                           CORPUS / run["junit"] if "junit" in run else None,
                           run["exit_code"], run["timed_out"], run["passed"]))  # fmt: skip
    return out


def pass_counts(bug: str) -> tuple[int, int]:
    info = manifest()[bug]
    return sum(1 for r in info["runs"] if r["passed"]), len(info["runs"])
