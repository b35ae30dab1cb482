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

from patchheal.errors import SpecError
from patchheal.harness.config import HarnessDef
from patchheal.harness.pythonsource import Evidence, evidence_at

_VERSION = re.compile(r"^\s*(?:python|cpython|py)?-?(3)\.(\d+)(?:\.\S*)?\s*$", re.IGNORECASE)


def minor(text: str) -> str | None:
    """'3.9' for '3.9', '3.9.18', 'python3.9', 'cpython-3.9.1'; None for '3.x', 'pypy3.9', ''."""
    match = _VERSION.match(text)
    return f"{match.group(1)}.{match.group(2)}" if match else None


def _key(version: str) -> tuple[int, int]:
    major, _, rest = version.partition(".")
    return int(major), int(rest)


def offered(defn: HarnessDef) -> list[str]:
    """The Pythons `defn` offers, oldest first."""
    return sorted(defn.pythons, key=_key)


def default(defn: HarnessDef) -> str | None:
    """The Python of `defn`'s own image (the one whose suite it names)."""
    return next((v for v, suite in defn.pythons.items() if suite == defn.image.suite), None)


def nearest(defn: HarnessDef, version: str) -> str:
    """The offered Python closest to `version` (the newer one on a tie)."""
    wanted = _key(version)
    return min(
        offered(defn),
        key=lambda v: (
            abs(_key(v)[1] - wanted[1]) + 100 * abs(_key(v)[0] - wanted[0]),
            -_key(v)[1],
        ),
    )


def with_python(defn: HarnessDef, version: str, source: str) -> HarnessDef:
    """`defn` with the image of Python `version`; `SpecError` naming the nearest offered one."""
    if not defn.pythons:
        raise SpecError(
            f"{source} asks for Python {version}, but harness {defn.name!r} offers one Python "
            "only (no [pythons] table); remove `python` or choose the python harness"
        )
    if version not in defn.pythons:
        near = nearest(defn, version)
        raise SpecError(
            f"{source} asks for Python {version}, which harness {defn.name!r} does not offer "
            f"(offered: {', '.join(offered(defn))}); the nearest is {near}: set "
            f'python = "{near}" in [job] to run on it (docs/harnesses.md says how to add one)'
        )
    suite = defn.pythons[version]
    if suite == defn.image.suite:
        return defn
    return defn.model_copy(update={"image": defn.image.model_copy(update={"suite": suite})})


def choose(
    defn: HarnessDef, repo: Path, base: str, wanted: str | None, workflow_python: str | None = None
) -> tuple[HarnessDef, str]:
    """The definition with the job's Python, and the sentence saying which and why.

    `wanted` is the job's own `python`; `workflow_python` what the failing CI
    job's setup-python asked for. A harness without `[pythons]` is unchanged
    unless the job names a Python.
    """
    if wanted is not None:
        version = minor(wanted)
        if version is None:
            raise SpecError(f"[job] python = {wanted!r} is not a version like '3.11'")
        return with_python(defn, version, f"[job] python = {wanted!r}"), (
            f"Python {version}: the job names python = {wanted!r}"
        )
    if not defn.pythons:
        return defn, ""
    found = evidence_at(repo, base)
    if workflow_python is not None:
        found.insert(0, Evidence("the failing CI job's setup-python", [workflow_python], None))
    version, why = pick(defn, found)
    return with_python(defn, version, why), f"Python {version}: {why}"


def pick(defn: HarnessDef, found: list[Evidence]) -> tuple[str, str]:
    """The Python the evidence points at, in order of trust, and why.

    A source naming versions (setup-python, .python-version, CI matrix, tox,
    classifiers) gives the harness's default when it names it, else the newest
    offered one it names, else (none offered) the newest it names, which
    `with_python` refuses with the nearest offered. A range (requires-python)
    keeps the default when it allows it, else the newest offered it allows.
    """
    base = default(defn) or offered(defn)[-1]
    for item in found:
        named = [v for v in (minor(text) for text in item.versions) if v is not None]
        if item.versions and not named and item.spec is None:
            continue  # '3.x', 'pypy3.9': says nothing about which CPython
        if named:
            ordered = sorted(set(named), key=_key)
            listing = ", ".join(ordered)
            if base in ordered:
                return base, f"{item.source} names {listing} (the harness's default among them)"
            usable = [v for v in ordered if v in defn.pythons]
            chosen = usable[-1] if usable else ordered[-1]
            return chosen, f"{item.source} names {listing}"
        if item.spec is not None:
            allowed = [v for v in offered(defn) if item.allows(v)]
            if base in allowed:
                return base, f"{item.source} {item.spec!r} allows the default {base}"
            if allowed:
                return allowed[-1], f"{item.source} {item.spec!r} allows {', '.join(allowed)}"
            oldest = item.lowest() or base
            return oldest, f"{item.source} {item.spec!r} allows none of {', '.join(offered(defn))}"
    return base, "nothing in the repository names a Python; the harness's default"
