"""Harness definitions: where they are found, which one a job gets, and why.

Definitions are looked up in `<repo>/harnesses`, then `./harnesses`, then the
ones bundled with patchheal. Resolution says in a sentence what it chose and
why, so the report and the CLI can show it.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import patchheal
from patchheal.errors import InfraUnavailable, SpecError
from patchheal.harness.config import HarnessDef, load_harness_file

if TYPE_CHECKING:
    from patchheal.config import JobSpec
    from patchheal.harness.base import Harness
    from patchheal.harness.images import Say

COMPOSE_FILES = ("compose.yaml", "compose.yml", "docker-compose.yaml", "docker-compose.yml")
_PYTHON_MARKERS = ("pyproject.toml", "setup.cfg", "setup.py", "requirements.txt")


def bundled_dir() -> Path:
    return Path(patchheal.__file__).resolve().parent.parent / "harnesses"


def harness_search_path(repo: Path | None) -> list[Path]:
    """`<repo>/harnesses`, `./harnesses`, then the bundled definitions, without duplicates."""
    candidates = [*([repo / "harnesses"] if repo is not None else []), Path.cwd() / "harnesses"]
    candidates.append(bundled_dir())
    found: list[Path] = []
    for path in candidates:
        resolved = path.resolve()
        if resolved not in found:
            found.append(resolved)
    return found


def list_harnesses(repo: Path | None = None) -> list[HarnessDef]:
    """Every definition on the search path; an earlier folder hides a same-named later one."""
    seen: dict[str, HarnessDef] = {}
    for folder in harness_search_path(repo):
        for toml in sorted(folder.glob("*/harness.toml")) if folder.is_dir() else []:
            defn = load_harness_file(toml)
            seen.setdefault(defn.name, defn)
    return sorted(seen.values(), key=lambda d: d.name)


def load_harness(name_or_path: str, repo: Path | None = None) -> HarnessDef:
    """A definition by name (search path) or by path (a folder or a harness.toml)."""
    as_path = Path(name_or_path).expanduser()
    if "/" in name_or_path or name_or_path.endswith(".toml"):
        if repo is not None and not as_path.is_absolute() and not as_path.exists():
            as_path = repo / as_path
        toml = as_path / "harness.toml" if as_path.is_dir() else as_path
        if not toml.is_file():
            raise SpecError(f"harness definition {toml} does not exist")
        return load_harness_file(toml)
    for folder in harness_search_path(repo):
        toml = folder / name_or_path / "harness.toml"
        if toml.is_file():
            return load_harness_file(toml)
    known = ", ".join(["local", *(d.name for d in list_harnesses(repo))])
    raise SpecError(f"unknown harness {name_or_path!r}; known: {known}")


def infer(repo: Path) -> tuple[str, str]:
    """The harness name a repository's files suggest, and the sentence saying why."""
    for name in COMPOSE_FILES:
        if (repo / name).is_file():
            return "compose", f"found {name} → compose"
    for name in _PYTHON_MARKERS:
        if (repo / name).is_file():
            return "python", f"found {name} → python"
    requirements = sorted(repo.glob("requirements*.txt"))
    if requirements:
        return "python", f"found {requirements[0].name} → python"
    if (repo / "package.json").is_file():
        return "node", "found package.json → node"
    return (
        "generic",
        "no pyproject, setup.cfg, requirements, package.json or compose file → generic",
    )


def resolve(job: JobSpec, repo: Path) -> tuple[HarnessDef | None, str]:
    """The job's harness definition (None for 'local') and why it was chosen."""
    wanted = job.job.harness
    if wanted == "local":
        return None, "the job names harness = 'local' (host process, no isolation)"
    if wanted == "auto":
        name, why = infer(repo)
        return load_harness(name, repo), why
    return load_harness(wanted, repo), f"the job names harness = {wanted!r}"


def docker_reachable() -> bool:
    """True when a Docker engine answers a ping within a few seconds."""
    from patchheal.harness.containers import docker_reachable as reachable

    return reachable()


def create(job: JobSpec, repo: Path, *, say: Say | None = None) -> tuple[Harness, str]:
    """The harness to use and a sentence saying which one and why.

    Docker (authoritative) when the engine is reachable; the local harness
    otherwise, unless the job named a Docker harness, which then fails with
    `InfraUnavailable` (exit 3).
    """
    from patchheal.harness.local import LocalHarness

    defn, why = resolve(job, repo)
    setup, passthrough = job.job.setup, job.job.env
    local = LocalHarness(setup=setup, env_passthrough=passthrough)
    if defn is None:
        return local, f"local harness: {why}"
    if not docker_reachable():
        if job.job.harness != "auto":
            raise InfraUnavailable(
                f"the job names the Docker harness {defn.name!r} but no Docker engine is "
                "reachable; start the engine (or check DOCKER_HOST), or set harness = 'local'"
            )
        return local, (
            f"local harness: {why}, but no Docker engine is reachable, so the step runs as a "
            "host process without isolation"
        )
    harness = build(
        defn, job_id=job.job.id, setup=setup, passthrough=passthrough, say=say, repo=repo
    )
    return harness, f"{harness.name} in Docker: {why}"


def build(
    defn: HarnessDef,
    *,
    job_id: str,
    setup: tuple[str, ...] = (),
    passthrough: tuple[str, ...] = (),
    say: Say | None = None,
    repo: Path | None = None,
) -> Harness:
    """The harness object for a definition (Docker or compose)."""
    if defn.kind == "compose":
        from patchheal.harness.compose import ComposeHarness

        return ComposeHarness(
            defn, job_id=job_id, setup=setup, env_passthrough=passthrough, say=say, repo=repo
        )
    from patchheal.harness.docker import DockerHarness

    return DockerHarness(defn, job_id=job_id, setup=setup, env_passthrough=passthrough, say=say)
