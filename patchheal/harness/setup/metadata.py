"""A local project's dynamic requirements, read inside a sandbox container.

A project whose `[project] dependencies` are dynamic (or that has only a
setup.py) can tell its requirements only by running its build backend, and
that backend may be the project's own code (`backend-path = ["."]`). It must
never run on the host: pip prepares the metadata in a step-like container (the
step's limits, no network, no capabilities, non-root) over a throwaway copy of
the project, offline from the wheelhouse that already holds the project's
static build requirements. Only the requirement strings come back out.
"""

from __future__ import annotations

import shlex
import shutil
import tempfile
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from patchheal.errors import HarnessError
from patchheal.harness.config import HarnessDef
from patchheal.harness.engine import containers, hostdirs, ownership, sandbox
from patchheal.harness.images import build as images
from patchheal.harness.setup import scmversion

if TYPE_CHECKING:
    from docker import DockerClient

_PREFIX = "PATCHHEAL-REQUIREMENT "
# Runs in the container: the markers are evaluated there, in the target environment.
_READ_REPORT = f"""
import json, sys
from pip._vendor.packaging.requirements import Requirement
extras = sys.argv[1:]
meta = json.load(open("/tmp/patchheal-report.json"))["install"][0]["metadata"]
for text in meta.get("requires_dist", []):
    req = Requirement(text)
    if req.marker is None or any(req.marker.evaluate({{"extra": e}}) for e in ["", *extras]):
        req.marker = None
        print({_PREFIX!r} + str(req))
"""


# The image's pip when it can write a report, else the newer one the host put in the
# wheelhouse, unpacked into /tmp (run from its zip, pip is three times slower) and
# allowed its bytecode: each of pip's subprocesses would compile it all again.
_PIP_CHOICE = (
    'PIP="python3 -m pip"; python3 -m pip install --help 2>/dev/null | grep -q -- --report || '
    f'{{ python3 -m zipfile -e "$(ls {hostdirs.WHEELHOUSE}/pip-*.whl | sort -V | tail -n 1)" '
    "/tmp/patchheal-pip && "
    'PIP="env -u PYTHONDONTWRITEBYTECODE PYTHONPATH=/tmp/patchheal-pip python3 -m pip"; }'
)


def dynamic_requirements(
    client: DockerClient,
    defn: HarnessDef,
    image: str,
    project: Path,
    wheelhouse: Path,
    extras: Sequence[str],
    *,
    build_env: Mapping[str, str] | None = None,
) -> list[str]:
    """The requirements the project's build backend declares, computed in a sandbox.

    `build_env` carries the version a CI checkout would give the backend
    (scmversion.py): the copy has no git metadata, and a backend reading the
    version from git would fail on it. Without one (a tree used as is, not a job's
    worktree: the harness computes none for it), the version the project's own git gives
    is passed, the one its build computes in setup, which runs over it with its `.git`.
    """
    build_env = dict(build_env or {}) or own_version_env(project)
    with tempfile.TemporaryDirectory(prefix="patchheal-metadata-") as tmp:
        copy = Path(tmp) / "project"
        shutil.copytree(project, copy, symlinks=True, ignore=shutil.ignore_patterns(".git"))
        user = sandbox.resolve_user(defn, copy)
        sandbox.make_writable(copy, user)
        pip = (
            f"{_PIP_CHOICE} && "
            "$PIP install --break-system-packages --no-deps --dry-run --quiet "
            f"--no-index --find-links {hostdirs.WHEELHOUSE} "
            "--report /tmp/patchheal-report.json . && "
            f"python3 -c {shlex.quote(_READ_REPORT)} {' '.join(map(shlex.quote, extras))}"
        )
        purpose = f"metadata-{uuid.uuid4().hex[:8]}"
        kwargs = sandbox.step_container_kwargs(
            defn,
            image=image,
            command=pip,
            worktree=copy,
            user=user,
            env=sandbox.environment(defn, (), build_env),
            labels=ownership.owner_labels("metadata", purpose),
            host_mounts=images.host_mounts(client, image),
            # At a container path: the host path may be under a home the sandbox user
            # cannot traverse (root's 0700 /root, which the image has too).
            extra_mounts=((str(wheelhouse), hostdirs.WHEELHOUSE, True),),
            network="none",
            wall_limit=600,
        )
        name = ownership.container_name("metadata", purpose)
        with containers.created(client, name=name, **kwargs) as container:
            done = containers.run_to_completion(container, timeout=600, idle_timeout=300)
    if done.exit_code != 0:
        raise HarnessError(
            f"reading the dynamic requirements of {project} in a sandbox failed "
            f"(exit {done.exit_code}):\n{done.output[-3000:]}"
        )
    lines = done.output.splitlines()
    return [line[len(_PREFIX) :].strip() for line in lines if line.startswith(_PREFIX)]


def own_version_env(project: Path) -> dict[str, str]:
    """The version overrides for what `project`'s own git metadata gives its build (none
    when it has no `.git` or git says no version): the sandbox's copy drops `.git`."""
    if not (project / ".git").exists():
        return {}
    version = scmversion.ci_version(project, "HEAD")
    return scmversion.override_env(version, project) if version else {}
