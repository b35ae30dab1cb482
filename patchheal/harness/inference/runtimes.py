"""A harness's table of runtimes (Pythons, Nodes): version -> the Debian suite that has it.

What `pythons.py` and `nodes.py` share: which versions a definition offers, its
default (the one of its own [image] suite), the nearest offered one to a
version it lacks, the definition with another version's image (or a
`SpecError` naming the nearest offered one: never a silent substitute), and
the choice among what the job and the repository say, most trusted first.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from patchheal.errors import SpecError
from patchheal.harness.config import HarnessDef


@dataclass
class Evidence:
    """One source in the repository: the versions it names, or the range it allows (`spec`)."""

    source: str
    versions: list[str]
    spec: str | None


@dataclass(frozen=True)
class Runtime:
    """One kind of runtime a harness may offer several of."""

    label: str  # "Python", shown in messages
    field: str  # "python": the [job] key, and the harness's table is `field + "s"`
    example: str  # "3.11": a version as the job writes it
    key: Callable[[str], tuple[int, ...]]  # orders versions ("3.9" < "3.11")
    parse: Callable[[str], str | None]  # "3.9.18" -> "3.9"; None: names no version
    allows: Callable[[str, str], bool]  # does the range (spec) allow this version
    evidence: Callable[[Path, str], list[Evidence]]  # what the repository says, at a commit
    setup_action: str  # the CI action whose version input the failing job asked for
    plausible: tuple[str, ...]  # versions that exist, oldest first (to name a range's lowest)

    def table(self, defn: HarnessDef) -> dict[str, str]:
        return dict(getattr(defn, self.field + "s"))


def offered(runtime: Runtime, defn: HarnessDef) -> list[str]:
    """The versions `defn` offers, oldest first."""
    return sorted(runtime.table(defn), key=runtime.key)


def default(runtime: Runtime, defn: HarnessDef) -> str | None:
    """The version of `defn`'s own image (the one whose suite it names)."""
    return next((v for v, s in runtime.table(defn).items() if s == defn.image.suite), None)


def nearest(runtime: Runtime, defn: HarnessDef, version: str) -> str:
    """The offered version closest to `version` (the newer one on a tie)."""
    wanted = runtime.key(version)

    def distance(offer: str) -> tuple[int, ...]:
        have = runtime.key(offer)
        apart = [abs(a - b) for a, b in zip(have, wanted, strict=False)]
        weighted = sum(d * 100 ** (len(apart) - 1 - i) for i, d in enumerate(apart))
        return (weighted, *(-part for part in have))

    return min(offered(runtime, defn), key=distance)


def with_version(runtime: Runtime, defn: HarnessDef, version: str, source: str) -> HarnessDef:
    """`defn` with the image of `version`; `SpecError` naming the nearest offered one."""
    table, name = runtime.table(defn), runtime.field
    if not table:
        raise SpecError(
            f"{source} asks for {runtime.label} {version}, but harness {defn.name!r} offers "
            f"one {runtime.label} only (no [{name}s] table); remove `{name}` or choose a "
            "harness that offers several"
        )
    if version not in table:
        near = nearest(runtime, defn, version)
        raise SpecError(
            f"{source} asks for {runtime.label} {version}, which harness {defn.name!r} does "
            f"not offer (offered: {', '.join(offered(runtime, defn))}); the nearest is {near}: "
            f'set {name} = "{near}" in [job] to run on it (docs/harnesses.md says how to add one)'
        )
    suite = table[version]
    if suite == defn.image.suite:
        return defn
    return defn.model_copy(update={"image": defn.image.model_copy(update={"suite": suite})})


def choose(
    runtime: Runtime,
    defn: HarnessDef,
    repo: Path,
    base: str,
    wanted: str | None,
    from_workflow: str | None = None,
) -> tuple[HarnessDef, str]:
    """The definition with the job's version, and the sentence saying which and why.

    `wanted` is the job's own (`python = "3.9"`); `from_workflow` what the failing
    CI job's setup action asked for. A harness without a table is unchanged unless
    the job names a version.
    """
    label, name = runtime.label, runtime.field
    if wanted is not None:
        version = runtime.parse(wanted)
        if version is None:
            raise SpecError(f"[job] {name} = {wanted!r} is not a version like {runtime.example!r}")
        return with_version(runtime, defn, version, f"[job] {name} = {wanted!r}"), (
            f"{label} {version}: the job names {name} = {wanted!r}"
        )
    if not runtime.table(defn):
        return defn, ""
    found = runtime.evidence(repo, base)
    if from_workflow is not None:
        source = f"the failing CI job's {runtime.setup_action}"
        found.insert(0, Evidence(source, [from_workflow], None))
    version, why = pick(runtime, defn, found)
    return with_version(runtime, defn, version, why), f"{label} {version}: {why}"


def pick(runtime: Runtime, defn: HarnessDef, found: list[Evidence]) -> tuple[str, str]:
    """The version the evidence points at, in order of trust, and why.

    A source naming versions (a setup action, a pin file, a CI matrix, tox,
    classifiers) gives the harness's default when it names it, else the newest
    offered one it names, else (none offered) the newest it names, which
    `with_version` refuses with the nearest offered. A range (requires-python,
    engines) keeps the default when it allows it, else the newest offered it
    allows.
    """
    base = default(runtime, defn) or offered(runtime, defn)[-1]
    for item in found:
        named = [v for v in (runtime.parse(text) for text in item.versions) if v is not None]
        if item.versions and not named and item.spec is None:
            continue  # '3.x', 'pypy3.9', 'lts/*': says nothing about which version
        if named:
            ordered = sorted(set(named), key=runtime.key)
            listing = ", ".join(ordered)
            if base in ordered:
                return base, f"{item.source} names {listing} (the harness's default among them)"
            usable = [v for v in ordered if v in runtime.table(defn)]
            chosen = usable[-1] if usable else ordered[-1]
            return chosen, f"{item.source} names {listing}"
        if item.spec is not None:
            allowed = [v for v in offered(runtime, defn) if runtime.allows(item.spec, v)]
            if base in allowed:
                return base, f"{item.source} {item.spec!r} allows the default {base}"
            if allowed:
                return allowed[-1], f"{item.source} {item.spec!r} allows {', '.join(allowed)}"
            oldest = _lowest(runtime, item.spec) or base
            offers = ", ".join(offered(runtime, defn))
            return oldest, f"{item.source} {item.spec!r} allows none of {offers}"
    return base, f"nothing in the repository names a {runtime.label}; the harness's default"


def _lowest(runtime: Runtime, spec: str) -> str | None:
    """The oldest plausible version a range allows (named when no offered one fits)."""
    return next((v for v in runtime.plausible if runtime.allows(spec, v)), None)
