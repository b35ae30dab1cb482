"""Which Python a job's step runs on, and the harness image that has it.

A harness offers several Pythons in its `[pythons]` table (version -> the
Debian suite whose python3 it is: bullseye 3.9, bookworm 3.11, trixie 3.13),
each image built offline from its suite and tagged by content like any other.
The job chooses with `python = "3.9"` ([job], `[tool.patchheal]`, `--python`):
a Python it names that is not offered is refused naming the nearest. Else
what CI says decides (the failing CI job's own `python-version`, then the
repository, `pythonsource.py`), within `requires-python`: a version CI wants
that is not offered becomes the nearest offered one the range allows, and the
sentence saying why says so; only when no offered Python satisfies
`requires-python` is the job refused.
"""

from __future__ import annotations

import re
from pathlib import Path

from patchheal.errors import SpecError
from patchheal.harness.config import HarnessDef
from patchheal.harness.inference import runtimes
from patchheal.harness.inference.pythonsource import allows, evidence_at
from patchheal.harness.inference.runtimes import Evidence, Runtime

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


def of(defn: HarnessDef) -> str | None:
    """The Python `defn`'s image has, when it offers several (None: one only, no table)."""
    return next((v for v, suite in defn.pythons.items() if suite == defn.image.suite), None)


def choose(
    defn: HarnessDef,
    repo: Path,
    base: str,
    wanted: str | None,
    workflow_python: str | None = None,
    command: str | None = None,
) -> tuple[HarnessDef, str]:
    """The definition with the job's Python, and the sentence saying which and why.

    `wanted` is the job's own `python` (never substituted); `workflow_python` what the
    failing CI job's setup-python asked for; `command` the failing step's command (the
    workflow job that runs it speaks for the repository).
    """
    if wanted is not None or not defn.pythons:
        return runtimes.choose(PYTHON, defn, repo, base, wanted)
    found = evidence_at(repo, base, command)
    if workflow_python is not None:
        found.insert(0, Evidence("the failing CI job's setup-python", [workflow_python], None))
    version, why = pick(defn, found)
    return with_python(defn, version, why), f"Python {version}: {why}"


def pick(defn: HarnessDef, found: list[Evidence]) -> tuple[str, str]:
    """The offered Python the evidence points at, in order of trust, and why.

    The first range (`requires-python`) bounds every other source. A source naming
    versions gives the harness's default when it names it, else the newest offered one
    it names, else (none offered) the offered one nearest its newest, said so. tox's
    and nox's lists narrow a CI workflow's. Without a naming source, the range keeps the
    default when it allows it, else the newest offered it allows.
    """
    offers = offered(defn)
    base = default(defn) or offers[-1]
    ranges = [item for item in found if item.spec is not None and not item.versions]
    bound = ranges[0] if ranges else None
    within = [v for v in offers if bound is None or allows(bound.spec or "", v)]
    if bound is not None and not within:
        raise SpecError(_refusal(defn, bound))
    bounded = "" if bound is None else f" within {bound.source} {bound.spec!r}"
    narrowers = [i for i in found if i.source.startswith(("tox.ini", "noxfile.py"))]
    for item in found:
        named = _named(item)
        inside = [v for v in named if bound is None or allows(bound.spec or "", v)]
        if not inside:
            continue  # '3.x', 'pypy-3.10', or only versions the range excludes
        listing = ", ".join(sorted(set(named), key=_key))
        why = f"{item.source} names {listing}"
        if item.source.startswith("the CI workflow"):
            inside, why = _narrowed(inside, narrowers, why)
        usable = [v for v in inside if v in offers]
        if base in usable:
            return base, f"{why} (the harness's default among them)"
        if usable:
            return max(usable, key=_key), why
        wish = max(inside, key=_key)
        near = _nearest(within, wish)
        return near, (
            f"{why}; {wish} is not offered (offered: {', '.join(offers)}), so the nearest "
            f"offered{bounded}: {near}"
        )
    if bound is not None:
        if base in within:
            return base, f"{bound.source} {bound.spec!r} allows the default {base}"
        return within[-1], f"{bound.source} {bound.spec!r} allows {', '.join(within)}"
    return base, "nothing in the repository names a Python; the harness's default"


def _named(item: Evidence) -> list[str]:
    return sorted({v for v in (minor(text) for text in item.versions) if v}, key=_key)


def _narrowed(versions: list[str], narrowers: list[Evidence], why: str) -> tuple[list[str], str]:
    """A workflow's versions that tox's envlist or nox's sessions also name (CI runs tox or
    nox, whose envs are what run), when any are."""
    for item in narrowers:
        common = [v for v in versions if v in _named(item)]
        if common and common != versions:
            return common, f"{why}, of which {item.source} has {', '.join(common)}"
    return versions, why


def _nearest(candidates: list[str], version: str) -> str:
    """The candidate closest to `version` (the newer one on a tie)."""
    wanted = _key(version)[1]
    return min(candidates, key=lambda v: (abs(_key(v)[1] - wanted), -_key(v)[1]))


def _refusal(defn: HarnessDef, bound: Evidence) -> str:
    offers = offered(defn)
    lowest = next((v for v in PYTHON.plausible if allows(bound.spec or "", v)), None)
    near = _nearest(offers, lowest) if lowest else offers[-1]
    oldest = f"; the oldest it allows is {lowest}" if lowest else ""
    return (
        f"{bound.source} {bound.spec!r} allows none of the Pythons harness {defn.name!r} "
        f"offers ({', '.join(offers)}{oldest}); the nearest is "
        f'{near}: set python = "{near}" in [job] to run on it anyway '
        "(docs/harnesses.md says how to add one)"
    )
