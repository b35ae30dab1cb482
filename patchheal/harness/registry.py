"""Which harness a job gets, and why: inference, resolution, and the kind registry.

Resolution says in a sentence what it chose and why, so the report and the
CLI can show it. Harness classes are imported lazily by kind, so the Docker
SDK loads only when a Docker harness is chosen.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import TYPE_CHECKING

from patchheal.errors import InfraUnavailable, SpecError
from patchheal.harness.config import HarnessDef
from patchheal.harness.definitions import list_harnesses, load_harness
from patchheal.harness.images import recipe
from patchheal.harness.inference import kind as inference
from patchheal.harness.inference import nodes, pythons

if TYPE_CHECKING:
    from patchheal.config import JobSpec
    from patchheal.harness.base import Harness
    from patchheal.harness.images.build import Say

# A definition's `kind` -> the class that runs it. Each takes the same keywords (see build()).
_REGISTRY: dict[str, str] = {
    "docker": "patchheal.harness.docker.harness:DockerHarness",
    "compose": "patchheal.harness.compose.harness:ComposeHarness",
}


def infer(repo: Path, base: str = "HEAD", last_green: str | None = None) -> tuple[str, str]:
    """The harness name a repository suggests at `base`, and the sentence saying why."""
    names = {d.name for d in list_harnesses(repo)}
    choice = inference.infer(repo, names.__contains__, base=base, last_green=last_green)
    return choice.harness, choice.reason


def resolve(job: JobSpec, repo: Path) -> tuple[HarnessDef | None, str]:
    """The job's harness definition (None for 'local') and why it was chosen."""
    wanted = job.job.harness
    if wanted == "local":
        return None, "the job names harness = 'local' (host process, no isolation)"
    if wanted == "auto":
        name, why = infer(repo, job.job.base, job.job.last_green)
    else:
        name, why = wanted, f"the job names harness = {wanted!r}"
    defn, python = pythons.choose(
        load_harness(name, repo),
        repo,
        job.job.base,
        job.job.python,
        job.job.python_from_workflow,
        command=job.steps[0].command,
    )
    defn, node = nodes.choose(defn, repo, job.job.base, job.job.node, job.job.node_from_workflow)
    defn = recipe.with_packages(defn, job.job.packages)
    return defn, "; ".join(filter(None, (why, python, node)))


def runtime_versions(harness: Harness) -> tuple[str | None, str | None]:
    """The Python and Node a harness runs its steps on, when its definition offers several
    (what a printed `harness run` names; a compose harness offers one, its base's)."""
    defn = getattr(harness, "defn", None)
    if not isinstance(defn, HarnessDef):
        return None, None
    node = next((v for v, suite in defn.nodes.items() if suite == defn.image.suite), None)
    return pythons.of(defn), node


def docker_reachable() -> bool:
    """True when a Docker engine answers a ping within a few seconds."""
    from patchheal.harness.engine.dockerapi import docker_reachable as reachable

    return reachable()


def create(job: JobSpec, repo: Path, *, say: Say | None = None) -> tuple[Harness, str]:
    """The harness to use and a sentence saying which one and why.

    Docker (authoritative) when the engine is reachable; the local harness
    otherwise, unless the job named a Docker harness, which then fails with
    `InfraUnavailable` (exit 3).
    """
    from patchheal.harness.local.harness import LocalHarness

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
    """The harness object for a definition, by its kind."""
    target = _REGISTRY.get(defn.kind)
    if target is None:
        raise SpecError(
            f"harness {defn.name!r} has unknown kind {defn.kind!r}; "
            f"known: {', '.join(sorted(_REGISTRY))}"
        )
    module_name, _, class_name = target.partition(":")
    cls = getattr(importlib.import_module(module_name), class_name)
    harness: Harness = cls(
        defn, job_id=job_id, setup=setup, env_passthrough=passthrough, say=say, repo=repo
    )
    return harness
