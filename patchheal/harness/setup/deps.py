"""Job dependencies, installed once per dependency fingerprint and committed as an image.

The fingerprint hashes the dependency files (pyproject, setup.cfg,
requirements, lockfiles, package.json), the setup commands, the base image id
and the user. A setup container runs the harness's and the job's setup over
the worktree (what it runs inside: `installer.py`) and is committed as
`patchheal-deps/<harness>:<fingerprint>`; every attempt with that fingerprint
starts from it. The commit is the state marker: it exists only once setup
finished, so an interrupted setup (even `kill -9`) leaves nothing that looks
ready.

Setup runs without network by default: pip installs come from a wheelhouse
that `wheelhouse.fill` downloaded on the host (and npm from a host-filled
cache), installed with `--no-index`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from patchheal.harness.config import HarnessDef
from patchheal.harness.engine import bytecode, containers, dockerapi, hostdirs, ownership, sandbox
from patchheal.harness.engine.ownership import DEPS_REPOSITORY
from patchheal.harness.images import build as images
from patchheal.harness.images.build import Say
from patchheal.harness.setup import generated, lockedpytest, wheelhouse
from patchheal.harness.setup.installer import (
    _GROUPS_PIP,
    _HAS_PYTEST,
    _MODERN_PIP,
    _VENV,
    EDITABLE_METADATA,
    ProvidedPytest,
    _setup_in,
)

if TYPE_CHECKING:
    from docker import DockerClient
    from docker.models.containers import Container

# The setup container's main process: it reads its stdin (closed by the engine when
# the owning process goes) and, where coreutils' `timeout` exists, stops at the timeout.
_KEEPER = (
    "if command -v timeout >/dev/null; then exec timeout {seconds} cat >/dev/null; "
    "else exec cat >/dev/null; fi"
)
WHEELHOUSE = hostdirs.WHEELHOUSE
NPM_CACHE = hostdirs.NPM_CACHE
DEPENDENCY_GLOBS = (
    "pyproject.toml",
    "setup.cfg",
    "setup.py",
    "requirements*.txt",
    "requirements/*.txt",
    "constraints*.txt",
    "Pipfile.lock",
    "poetry.lock",
    "uv.lock",
    "package.json",
    "package-lock.json",
    "npm-shrinkwrap.json",
    "yarn.lock",
    "pnpm-lock.yaml",
)


def fingerprint(
    worktree: Path,
    defn: HarnessDef,
    setup: Sequence[str],
    image_id: str,
    user: str,
    build_env: Mapping[str, str] | None = None,
) -> str:
    """The dependency fingerprint: what, if changed, needs a new install (`build_env`, the
    version a CI checkout gives git-versioned builds, included: scmversion.py)."""
    digest = hashlib.sha256()
    # patchheal's own part of the setup too: an image made by an older recipe is not reused.
    # The provided pytest follows the project's lock (lockedpytest.py) since LOCK_FILES.
    locks = " ".join(lockedpytest.LOCK_FILES)
    compiled = bytecode.compile_script("")
    parts = (_VENV, _MODERN_PIP, _GROUPS_PIP, _HAS_PYTEST, EDITABLE_METADATA, compiled, locks)
    own = hashlib.sha256("\0".join(parts).encode())
    recipe: list[object] = [defn.deps.kind, list(defn.setup), list(setup), image_id, user]
    recipe.append(own.hexdigest())
    # The generated-files capture is part of the recipe: an image without its archive is
    # not reused.
    recipe += [sorted((build_env or {}).items()), generated.RECIPE]
    digest.update(json.dumps(recipe).encode())
    seen: set[Path] = set()
    for pattern in (*DEPENDENCY_GLOBS, *defn.deps.files):
        for path in sorted(worktree.glob(pattern)):
            if path.is_file() and path not in seen:
                seen.add(path)
                digest.update(str(path.relative_to(worktree)).encode() + b"\0")
                digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def needs_env(defn: HarnessDef, setup: Sequence[str]) -> bool:
    return bool(defn.setup or setup or defn.deps.kind != "none")


def ensure_env(
    client: DockerClient,
    defn: HarnessDef,
    image: str,
    worktree: Path,
    *,
    setup: Sequence[str],
    passthrough: Sequence[str],
    user: str,
    job_id: str,
    say: Say = lambda _msg: None,
    timeout: float = 1800.0,
    build_env: Mapping[str, str] | None = None,
    hold: Callable[[str], object] = lambda _tag: None,
) -> str:
    """The image steps run in: `image` plus the installed dependencies. `hold` is called
    with its tag before it is looked up (so `gc --images` spares it from then on)."""
    if not needs_env(defn, setup):
        return image
    image_id = dockerapi.call(client.images.get, image).id
    build_env = dict(build_env or {})
    key = fingerprint(worktree, defn, setup, image_id, user, build_env)
    tag = f"{DEPS_REPOSITORY}/{defn.name}:{key[:16]}"
    hold(tag)
    if images.exists(client, tag):
        return tag
    with hostdirs.file_lock(tag.replace("/", "_").replace(":", "_")):
        if images.exists(client, tag):
            return tag
        say(f"installing dependencies into {tag} (once per dependency fingerprint)")
        _install(
            client, defn, image, worktree, tag, setup, passthrough, user, job_id, say, timeout,
            build_env,
        )  # fmt: skip
    return tag


def _install(
    client: DockerClient,
    defn: HarnessDef,
    image: str,
    worktree: Path,
    tag: str,
    setup: Sequence[str],
    passthrough: Sequence[str],
    user: str,
    job_id: str,
    say: Say,
    timeout: float,
    build_env: dict[str, str],
) -> None:
    from docker.types import Mount

    commands = [*defn.setup, *setup]
    offline = defn.sandbox.setup_network == "none"
    extra: dict[str, str] = {}
    mounts = [Mount(defn.sandbox.workdir, str(worktree), type="bind", read_only=False)]
    mounts += [Mount(p, p, type="bind", read_only=True) for p in images.host_mounts(client, image)]
    if offline and defn.deps.kind == "pip":
        house = wheelhouse.fill(client, defn, image, worktree, commands, say, build_env)
        mounts.append(Mount(WHEELHOUSE, str(house), type="bind", read_only=True))
        extra = {"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": WHEELHOUSE}

    def provide_pytest() -> ProvidedPytest:
        # The one the project's lock pins, else the newest; online setup finds it in the
        # index, offline the host downloads it now.
        locked = lockedpytest.locked_pytest(worktree, wheelhouse.container_python(client, image))
        provided = ProvidedPytest.of(locked)
        if offline and defn.deps.kind == "pip":
            wheelhouse.fill_pytest(client, image, worktree, say, provided.requirement)
        return provided

    if defn.deps.kind == "npm":
        cache = wheelhouse.fill_npm(worktree, say, offline=offline)
        mounts.append(Mount(NPM_CACHE, str(cache), type="bind", read_only=False))
        extra = {"npm_config_cache": NPM_CACHE, "npm_config_offline": str(offline).lower()}
    # The export is a git repository (versions from git): owned by another uid than setup's.
    env = {**(sandbox.GIT_SAFE_ENV if (worktree / ".git").exists() else {}), **extra, **build_env}
    env = sandbox.environment(defn, passthrough, env)
    sandbox.make_writable(worktree, user)
    before = generated.listing(worktree)  # what setup adds to the tree is carried (generated.py)
    purpose = f"setup-{defn.name}"
    labels = ownership.owner_labels(job_id, purpose, worktree=str(worktree))
    with containers.created(
        client,
        name=ownership.container_name(job_id, purpose),
        stdin_once=True,
        image=image,
        # Lives while this process holds its stdin (so it dies with a killed run), and
        # never past the setup timeout.
        command=["/bin/sh", "-c", _KEEPER.format(seconds=int(timeout))],
        user="0:0",
        labels=labels,
        network_mode=defn.sandbox.setup_network,
        mounts=mounts,
        tmpfs={"/tmp": "rw,exec,nosuid,mode=1777"},
        init=True,
        **setup_limits(defn),
    ) as container:
        stdin = containers.hold_stdin(container)
        try:
            containers.start(container)
            _setup_in(container, defn, commands, env, user, say, provide_pytest)
            generated.store(container, generated.capture(worktree, before, say))
            _commit(container, defn, tag, say)
        finally:
            containers.release_stdin(stdin)


def _commit(container: Container, defn: HarnessDef, tag: str, say: Say) -> None:
    say(f"committing {tag}")
    repository, _, version = tag.partition(":")
    changes = [
        f"ENV PATH={sandbox.STEP_PATH}",
        f"ENV VIRTUAL_ENV={sandbox.VENV}",
        f"LABEL {ownership.LABEL}=1",
        f"WORKDIR {defn.sandbox.workdir}",
    ]
    dockerapi.call(container.commit, repository=repository, tag=version, changes=changes)


def setup_limits(defn: HarnessDef) -> dict[str, object]:
    """The step's limits for the setup container.

    Its root filesystem must stay writable (it is committed as the image) and
    its user starts as root (to make /opt/patchheal the step user's); only
    CHOWN survives the dropped capabilities, every install runs as the step user.
    """
    memory = sandbox.size_bytes(defn.sandbox.memory)
    return {
        "nano_cpus": int(defn.sandbox.cpus * 1e9),
        "mem_limit": memory,
        "memswap_limit": memory,
        "pids_limit": defn.sandbox.pids,
        "cap_drop": ["ALL"],
        "cap_add": ["CHOWN"],
        "security_opt": ["no-new-privileges"],
    }
