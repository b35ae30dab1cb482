"""Which Python a job's step runs on, and the harness image that has it.

A harness offers several Pythons in its `[pythons]` table (version -> the
Debian suite whose python3 it is: bullseye 3.9, bookworm 3.11, trixie 3.13),
each image built offline from its suite and tagged by content like any other.
The job chooses with `python = "3.9"` ([job], or `[tool.patchheal]`); else the
repository says it (`pythonsource.py`), the failing CI job's own
`python-version` first. A Python the harness does not offer is refused with
the nearest one it does, never silently replaced.
"""

from __future__ import annotations

import re
from pathlib import Path

from patchheal.harness import runtimes
from patchheal.harness.config import HarnessDef
from patchheal.harness.pythonsource import allows, evidence_at
from patchheal.harness.runtimes import Runtime

_VERSION = re.compile(r"^\s*(?:python|cpython|py)?-?(3)\.(\d+)(?:\.\S*)?\s*$", re.IGNORECASE)


def minor(text: str) -> str | None:
    """'3.9' for '3.9', '3.9.18', 'python3.9', 'cpython-3.9.1'; None for '3.x', 'pypy3.9', ''."""
    match = _VERSION.match(text)
    return f"{match.group(1)}.{match.group(2)}" if match else None


def _key(version: str) -> tuple[int, ...]:
    major, _, rest = version.partition(".")
    return int(major), int(rest)


PYTHON = Runtime(
    label="Python",
    field="python",
    example="3.11",
    key=_key,
    parse=minor,
    allows=allows,
    evidence=evidence_at,
    setup_action="setup-python",
    plausible=tuple(f"3.{m}" for m in range(6, 30)),
)


def offered(defn: HarnessDef) -> list[str]:
    """The Pythons `defn` offers, oldest first."""
    return runtimes.offered(PYTHON, defn)


def default(defn: HarnessDef) -> str | None:
    """The Python of `defn`'s own image (the one whose suite it names)."""
    return runtimes.default(PYTHON, defn)


def nearest(defn: HarnessDef, version: str) -> str:
    """The offered Python closest to `version` (the newer one on a tie)."""
    return runtimes.nearest(PYTHON, defn, version)


def with_python(defn: HarnessDef, version: str, source: str) -> HarnessDef:
    """`defn` with the image of Python `version`; `SpecError` naming the nearest offered one."""
    return runtimes.with_version(PYTHON, defn, version, source)


def choose(
    defn: HarnessDef, repo: Path, base: str, wanted: str | None, workflow_python: str | None = None
) -> tuple[HarnessDef, str]:
    """The definition with the job's Python (`wanted`: its `python`; `workflow_python`: what
    the failing CI job's setup-python asked for), and the sentence saying which and why."""
    return runtimes.choose(PYTHON, defn, repo, base, wanted, workflow_python)
