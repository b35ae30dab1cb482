"""Resolve and download on the host, install in the container with no network.

Setup commands run unchanged inside the container; `PIP_NO_INDEX` and
`PIP_FIND_LINKS` point pip at a wheelhouse that the host filled with
`pip download` for the container's Python version. Local projects
(`pip install -e .[test]`) contribute their static `[project]` dependencies
and build requirements, so the project itself is never built on the host: a
project whose dependencies are dynamic (or a setup.py) has its build backend
run inside a sandbox container (`metadata.py`), and only the requirement
strings it names are downloaded here.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
import tempfile
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from patchheal import proc
from patchheal.atomic import atomic_write
from patchheal.errors import DependencySetupError, HarnessError
from patchheal.harness.config import HarnessDef
from patchheal.harness.engine import containers, dockerapi, hostdirs, ownership
from patchheal.harness.images import build as images
from patchheal.harness.images.build import Say
from patchheal.harness.setup import metadata
from patchheal.harness.setup.hostpip import HostPipArgs
from patchheal.harness.setup.markers import _wheel_metadata, only_for_target
from patchheal.harness.setup.pipargs import (
    _is_location,
    _names_something,
    build_requirements,
    download_args,
    dynamic_projects,
    expand_requirement_files,
    host_paths,
    pip_install_args,
)

if TYPE_CHECKING:
    from docker import DockerClient

MODERN_PIP = "pip>=22.2"
# `pip install --group NAME` (PEP 735 dependency groups) is new in pip 25.1; CI's
# setup-python pip has it, Debian's (bookworm: 23.0.1) has not.
GROUPS_PIP = "pip>=25.1"
# What a step's `python -m pytest` gets when the job's setup installs no pytest: pip
# resolves the newest release whose `Requires-Python` allows the image's Python.
FALLBACK_PYTEST = "pytest"


# pip download's words for each file it resolved: saved now, or found in --dest.
_RESOLVED_FILE = re.compile(r"^(?:Saved|File was already downloaded) (\S+)$", re.MULTILINE)


def container_python(client: DockerClient, image: str) -> str:
    """'3.11' for the image's python3, cached per image id."""
    image_id = dockerapi.call(client.images.get, image).id
    cache = hostdirs.cache_dir() / "python-versions.json"
    known = json.loads(cache.read_text()) if cache.is_file() else {}
    if image_id in known:
        return str(known[image_id])
    with containers.created(
        client,
        name=f"patchheal-probe-{uuid.uuid4().hex[:12]}",
        image=image,
        command=["python3", "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
        labels=ownership.owner_labels("probe", "probe"),
        network_mode="none",
        mounts=images.ro_binds(images.host_mounts(client, image)),
    ) as container:
        done = containers.run_to_completion(container, timeout=60, idle_timeout=60)
    version = done.output.strip().splitlines()[-1] if done.output.strip() else ""
    if done.exit_code != 0 or not re.fullmatch(r"\d+\.\d+", version):
        raise HarnessError(f"image {image} has no usable python3: {done.output[-500:]}")
    known[image_id] = version
    atomic_write(cache, json.dumps(known))
    return version


def uses_groups(commands: Sequence[str]) -> bool:
    """Whether a pip install of `commands` names a dependency group (`--group`)."""
    return any(
        arg == "--group" or arg.startswith("--group=")
        for args in pip_install_args(commands)
        for arg in args
    )


def fill(
    client: DockerClient,
    defn: HarnessDef,
    image: str,
    worktree: Path,
    commands: Sequence[str],
    say: Say,
    build_env: Mapping[str, str] | None = None,
) -> Path:
    """Download what the pip commands need into the shared wheelhouse; returns its path.
    `build_env` reaches the project's build backend in the metadata sandbox (scmversion.py)."""
    version = container_python(client, image)
    house = _house(version)
    installs = [expand_requirement_files(a, worktree) for a in pip_install_args(commands)]
    builds = [build_requirements(a, worktree, version) for a in installs]
    if uses_groups(commands):
        builds.append([GROUPS_PIP])
    elif tuple(map(int, version.split("."))) < (3, 11):
        # Debian's pip before bookworm (bullseye: 20.3.4) has no `--dry-run --report` (the
        # metadata sandbox) nor PEP 660 editables, which CI's setup-python pip has.
        builds.append([MODERN_PIP])
    _download(house, version, builds, worktree, say)
    wanted = [host_paths(download_args(a, worktree, version), defn) for a in installs]
    _download(house, version, wanted, worktree, say)
    # Build requirements are in the wheelhouse now: the backend can run offline.
    for args in installs:
        for project, extras in dynamic_projects(args, worktree):
            say(f"reading the dynamic requirements of {project} in a sandbox container")
            reqs = metadata.dynamic_requirements(
                client, defn, image, project, house, extras, build_env=build_env
            )
            _download(house, version, [reqs], worktree, say)
    return house


def fill_pytest(
    client: DockerClient, image: str, worktree: Path, say: Say, requirement: str = FALLBACK_PYTEST
) -> Path:
    """`requirement` (the newest pytest, or the one the project locks) for the image's Python,
    and what it needs, into the wheelhouse: for a job whose setup installs none (the venv
    does not see the image's own)."""
    version = container_python(client, image)
    house = _house(version)
    try:
        _download(house, version, [[requirement]], worktree, say)
    except DependencySetupError:
        # No index from the host (offline machine): a pytest an earlier download left
        # serves, as the image's own did before; without one, the setup fails saying why.
        pinned = requirement.partition("==")[2]
        if not any(house.glob(f"pytest-{pinned}-*.whl" if pinned else "pytest-*.whl")):
            raise
        what = f"pytest {pinned}" if pinned else "newest pytest"
        say(f"no index reachable from the host: the wheelhouse's {what} is used")
    return house


def _house(version: str) -> Path:
    house = hostdirs.cache_dir() / "wheelhouse" / f"cp{version.replace('.', '')}"
    house.mkdir(parents=True, exist_ok=True)
    # pip writes with the host's umask (077 makes its wheels 0600): a container user
    # other than the owner must read them.
    hostdirs.share_readable(house)
    return house


def _download(house: Path, version: str, wanted: list[list[str]], worktree: Path, say: Say) -> None:
    """`pip download` on the host of named requirements only (never a local project)."""
    wanted = [args for args in wanted if _names_something(args)]
    if not wanted:
        return
    host = f"{sys.version_info[0]}.{sys.version_info[1]}"
    target = (
        []
        if host == version
        else [
            "--python-version",
            version,
            "--implementation",
            "cp",
            "--only-binary=:all:",
            "--platform",
            "manylinux2014_x86_64",
            "--platform",
            f"manylinux_2_36_{_machine()}",
        ]
    )
    with hostdirs.file_lock(f"wheelhouse-{house.name}"), HostPipArgs(worktree) as pip:
        for args in wanted:
            args = pip.filter(args)  # names from an index only (hostpip.py)
            if pip.dropped:
                say(f"not for the host's pip (left to the sandbox): {'; '.join(pip.dropped)}")
                pip.dropped.clear()
            if not _names_something(args):
                continue
            seen: set[str] = set()
            while True:
                say(f"pip download on the host into {house}: {' '.join(args)}")
                argv = [sys.executable, "-m", "pip", "download", "--dest", str(house)]
                result = proc.run([*argv, *target, *args], cwd=pip.cwd, timeout=1800)
                if not result.passed:
                    raise DependencySetupError.from_pip(
                        "pip download for the dependency wheelhouse failed", result.output
                    )
                if not target:
                    break
                # The host's pip evaluates markers for the host's Python whatever
                # --python-version says: what only the image's Python needs is added here,
                # from the metadata of every wheel this download resolved, until nothing is.
                missing = [
                    req
                    for name in _RESOLVED_FILE.findall(result.output)
                    if name.endswith(".whl")
                    for req in only_for_target(_wheel_metadata(house / Path(name).name), version)
                    if req not in seen
                ]
                if not missing:
                    break
                seen.update(missing)
                where = [a for i, a in enumerate(args) if _is_location(args, i)]
                # Through the host filter like every other argument: names from an index.
                args = pip.filter([*where, *dict.fromkeys(missing)])
                if not _names_something(args):
                    break
        hostdirs.share_readable(house)


def _machine() -> str:
    import platform

    return platform.machine()


def fill_npm(worktree: Path, say: Say, *, offline: bool) -> Path:
    """Fill the shared npm cache on the host from package.json (+ lockfile)."""
    cache = hostdirs.cache_dir() / "npm-cache"
    cache.mkdir(parents=True, exist_ok=True)
    if not offline or not (worktree / "package.json").is_file():
        return cache
    npm = shutil.which("npm")
    if npm is None:
        raise HarnessError(
            "the node harness installs dependencies offline from an npm cache filled on the host, "
            "but npm is not installed here; install it or set [sandbox] setup_network = 'bridge'"
        )
    with tempfile.TemporaryDirectory(prefix="patchheal-npm-") as tmp, hostdirs.file_lock("npm"):
        for name in ("package.json", "package-lock.json", "npm-shrinkwrap.json"):
            if (worktree / name).is_file():
                shutil.copy2(worktree / name, Path(tmp) / name)
        verb = "ci" if (Path(tmp) / "package-lock.json").is_file() else "install"
        say(f"npm {verb} on the host to fill {cache}")
        argv = [npm, verb, "--ignore-scripts", "--no-audit", "--no-fund", "--cache", str(cache)]
        result = proc.run(argv, cwd=tmp, timeout=1800)
        if not result.passed:
            raise HarnessError(f"npm {verb} on the host failed:\n{result.output[-3000:]}")
    hostdirs.share_readable(cache)
    return cache
