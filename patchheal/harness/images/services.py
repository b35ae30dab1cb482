"""Service images with no registry: `image: postgres:16` served by a harness built from Debian.

A compose file names its services by registry image (`postgres:16`,
`redis:7-alpine`, `docker.io/library/mariadb:11`). With no registry those
cannot be pulled, so the compose harness maps the image's name to a bundled
harness whose image is built offline from Debian's packages and honors the
official image's entrypoint contract (environment variables, default command,
health-check tools).

The mapping matches the repository name only, never the tag: Debian bookworm
ships one major version of each server (PostgreSQL 15, Redis 7.0,
MariaDB 10.11), and a `postgres:16` service gets PostgreSQL 15. A mismatch is
said out loud rather than refused: the services a CI job talks to almost never
depend on the difference, and when one does, a harness of the same name in
the repository's `harnesses/` folder (or an image loaded into the engine,
which always wins) supplies the exact version.

The mapping is overridable per compose harness (`[compose] images`) and per
machine (`PATCHHEAL_SERVICE_IMAGES="postgres=mypg,redis=none"`; `none`
removes an entry).
"""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass

from patchheal.errors import SpecError

# Repository name (after the registry host and `library/` are stripped) -> harness.
DEFAULT_SERVICE_IMAGES: dict[str, str] = {
    "postgres": "postgres",
    "postgis/postgis": "postgres",
    "bitnami/postgresql": "postgres",
    "redis": "redis",
    "bitnami/redis": "redis",
}

# The major version the bundled recipe provides (Debian bookworm), to say when it differs.
PROVIDED_VERSIONS: dict[str, str] = {"postgres": "15", "redis": "7"}

ENV_OVERRIDE = "PATCHHEAL_SERVICE_IMAGES"

_DOCKER_HUB = ("docker.io/", "index.docker.io/", "registry-1.docker.io/")


@dataclass(frozen=True)
class ServiceImage:
    """Which harness serves an image reference, and what to say about it."""

    harness: str
    pattern: str
    note: str


def repository_name(ref: str) -> tuple[str, str]:
    """`docker.io/library/postgres:16-alpine@sha256:..` -> ('postgres', '16-alpine')."""
    ref = ref.split("@", 1)[0].strip()
    for hub in _DOCKER_HUB:
        if ref.startswith(hub):
            ref = ref[len(hub) :]
    ref = ref.removeprefix("library/")
    last = ref.rsplit("/", 1)[-1]
    if ":" in last:
        repo, _, tag = ref.rpartition(":")
        return repo, tag
    return ref, "latest"


def parse_override(text: str) -> dict[str, str]:
    """`name=harness,name2=none` -> {name: harness, name2: 'none'}; bad input is a SpecError."""
    out: dict[str, str] = {}
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        name, sep, harness = item.partition("=")
        if not sep or not name.strip() or not harness.strip():
            raise SpecError(
                f"{ENV_OVERRIDE}: {item!r} is not IMAGE=HARNESS (e.g. 'postgres=postgres')"
            )
        out[name.strip()] = harness.strip()
    return out


def mapping(configured: Mapping[str, str] | None = None) -> dict[str, str]:
    """Defaults, then the harness's `[compose] images`, then the environment; 'none' drops."""
    merged = dict(DEFAULT_SERVICE_IMAGES)
    merged.update(configured or {})
    merged.update(parse_override(os.environ.get(ENV_OVERRIDE, "")))
    return {name: harness for name, harness in merged.items() if harness != "none"}


def lookup(ref: str, configured: Mapping[str, str] | None = None) -> ServiceImage | None:
    """The harness that serves `ref` offline, or None when nothing maps it.

    Exact names win over glob patterns (`bitnami/*`); among patterns, the
    longest wins, so a specific entry overrides a broad one.
    """
    repo, tag = repository_name(ref)
    table = mapping(configured)
    if repo in table:
        pattern = repo
    else:
        matches = [p for p in table if fnmatch.fnmatchcase(repo, p)]
        if not matches:
            return None
        pattern = max(matches, key=len)
    harness = table[pattern]
    return ServiceImage(harness=harness, pattern=pattern, note=_version_note(ref, harness, tag))


def _version_note(ref: str, harness: str, tag: str) -> str:
    provided = PROVIDED_VERSIONS.get(harness)
    wanted = re.match(r"(\d+)", tag)
    base = f"{ref} is not in the engine; serving it with the "
    base += f"offline harness {harness!r}"
    if provided and wanted and wanted.group(1) != provided:
        return (
            f"{base} ({harness} {provided} from Debian, not {wanted.group(1)}: the mapping "
            f"matches the name only; put a harnesses/{harness}/ in the repository or "
            f"`docker load` {ref} for the exact version)"
        )
    return base
