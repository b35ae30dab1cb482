"""Job dependencies, installed once per dependency fingerprint and committed as an image.

The fingerprint hashes the dependency files (pyproject, setup.cfg,
requirements, lockfiles, package.json), the setup commands, the base image id
and the user. A setup container runs the harness's and the job's setup over
the worktree and is committed as `patchheal-deps/<harness>:<fingerprint>`;
every attempt with that fingerprint starts from it. The commit is the state
marker: it exists only once setup finished, so an interrupted setup (even
`kill -9`) leaves nothing that looks ready.

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

from patchheal.errors import DependencySetupError, HarnessError
from patchheal.harness.config import HarnessDef
from patchheal.harness.engine import bytecode, containers, dockerapi, hostdirs, ownership, sandbox
from patchheal.harness.engine.ownership import DEPS_REPOSITORY
from patchheal.harness.images import build as images
from patchheal.harness.images.build import Say
from patchheal.harness.setup import generated, wheelhouse

if TYPE_CHECKING:
    from docker import DockerClient
    from docker.models.containers import Container

# The setup container's main process: it reads its stdin (closed by the engine when
# the owning process goes) and, where coreutils' `timeout` exists, stops at the timeout.
_KEEPER = (
    "if command -v timeout >/dev/null; then exec timeout {seconds} cat >/dev/null; "
    "else exec cat >/dev/null; fi"
)
# The venv does not see the image's packages: a requirement of the project is never
# satisfied by what the image happens to carry (Debian's pytest 7.2.1 stood in for the
# pytest a project pinned, so the step ran another pytest than its CI). When the job's
# setup installs no pytest at all, the newest pytest for the image's Python is installed
# from the wheelhouse (the host downloads it then, `wheelhouse.fill_pytest`), and the
# setup log says that patchheal provided it: steps run `python -m pytest` either way.
_VENV = "python3 -m venv {venv}"
_HAS_PYTEST = (
    "import importlib.metadata as m, sys\n"
    "try:\n    m.version('pytest')\nexcept m.PackageNotFoundError:\n    sys.exit(1)\n"
)
PROVIDED_PYTEST = (
    "patchheal provided pytest {version} (the newest for this Python in the wheelhouse): "
    "the job's setup installs none"
)
_PYTEST_VERSION = "import importlib.metadata as m; print(m.version('pytest'))"
# A legacy editable install (`setup.py develop`: a setup.py project without PEP 660,
# pip's fallback) writes the project's metadata, `NAME.egg-info`, into the source tree,
# here the export that setup ran over, and puts that tree on sys.path. Steps run over
# another worktree, which has no egg-info: the project imports but
# `importlib.metadata.version(NAME)`, its entry points (plugins found by group) and
# `pkg_resources.require` fail, where its CI, which installs in the tree it tests, has
# them. Every egg-info directory on a sys.path entry inside the worktree is copied into
# the venv's site-packages, where the step finds it.
EDITABLE_METADATA = """
import os, shutil, sys, sysconfig
work = os.path.realpath(sys.argv[1]) + os.sep
site = sysconfig.get_paths()["purelib"]
for entry in sys.path[1:]:
    real = os.path.realpath(entry)
    if not (real + os.sep).startswith(work) or not os.path.isdir(real):
        continue
    for name in sorted(os.listdir(real)):
        source, target = os.path.join(real, name), os.path.join(site, name)
        if name.endswith(".egg-info") and os.path.isdir(source) and not os.path.exists(target):
            shutil.copytree(source, target)
            print("kept the editable install's metadata in the venv:", name)
"""
# A venv pip older than 22.2 (bullseye's 20.3.4) is upgraded from the wheelhouse, where
# the host put one (`wheelhouse.MODERN_PIP`): CI's setup-python has a recent pip, and
# editable installs of pyproject-only projects (PEP 660) need one.
_MODERN_PIP = (
    "{venv}/bin/python -m pip install --help | grep -q -- --report || "
    f"{{venv}}/bin/python -m pip install --quiet --upgrade '{wheelhouse.MODERN_PIP}'"
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
    parts = (_VENV, _MODERN_PIP, _HAS_PYTEST, EDITABLE_METADATA, bytecode.compile_script(""))
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
) -> str:
    """The image steps run in: `image` plus the installed dependencies."""
    if not needs_env(defn, setup):
        return image
    image_id = dockerapi.call(client.images.get, image).id
    build_env = dict(build_env or {})
    key = fingerprint(worktree, defn, setup, image_id, user, build_env)
    tag = f"{DEPS_REPOSITORY}/{defn.name}:{key[:16]}"
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

    def provide_pytest() -> None:
        # Online setup finds a pytest in the index; offline, the host downloads one now.
        if offline and defn.deps.kind == "pip":
            wheelhouse.fill_pytest(client, image, worktree, say)

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


def _setup_in(
    container: Container,
    defn: HarnessDef,
    commands: Sequence[str],
    env: dict[str, str],
    user: str,
    say: Say,
    provide_pytest: Callable[[], None] = lambda: None,
) -> None:
    """Install the dependencies in the running setup container."""

    def say_lines(text: str) -> None:
        # One message per line: a chunk of several lines would get one prefix on a terminal.
        for line in text.rstrip().splitlines():
            say(line)

    def run(argv: list[str], what: str, as_user: str = user, cwd: str = "") -> str:
        return containers.exec_checked(
            container,
            argv,
            user=as_user,
            environment=env,
            workdir=cwd or defn.sandbox.workdir,
            what=what,
            on_output=lambda chunk: say_lines(chunk.decode("utf-8", "replace")),
        )

    # The bytecode folder stays root's (engine/bytecode.py): only root's compile below adds to it.
    prep = f"mkdir -p {bytecode.PREFIX} && chown {user} /opt/patchheal"
    run(["sh", "-c", prep], "prep", "0:0")
    if defn.deps.kind == "pip":
        run(["/bin/sh", "-c", _VENV.format(venv=sandbox.VENV)], "venv")
        run(["/bin/sh", "-c", _MODERN_PIP.format(venv=sandbox.VENV)], "a pip as new as CI's")
    if defn.deps.kind == "npm":
        _npm_install(run, defn.sandbox.workdir)
    for command in commands:
        say(f"setup: {command}")
        try:
            run(["/bin/sh", "-c", command], f"dependency setup of harness {defn.name}")
        except HarnessError as exc:
            # The setup command ran and failed: the job's environment, not the engine.
            raise DependencySetupError.from_pip(
                f"setup command failed in harness {defn.name}: {command}", str(exc)
            ) from None
    if defn.deps.kind == "pip":
        _pytest_fallback(run, provide_pytest, say)
        run(
            [f"{sandbox.VENV}/bin/python", "-c", EDITABLE_METADATA, defn.sandbox.workdir],
            "editable installs' metadata into the venv",
        )
        script = bytecode.compile_script(defn.sandbox.workdir)
        run([f"{sandbox.VENV}/bin/python", "-I", "-c", script], "the venv's bytecode", "0:0")


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


def _pytest_fallback(
    run: Callable[[list[str], str], str], provide_pytest: Callable[[], None], say: Say
) -> None:
    """A pytest in the venv when the job's setup installed none, said in the setup log."""
    python = f"{sandbox.VENV}/bin/python"
    try:
        run([python, "-c", _HAS_PYTEST], "is there a pytest")
        return  # the project's own: the one its install resolved to
    except HarnessError:
        pass
    provide_pytest()
    run([python, "-m", "pip", "install", "--quiet", "pytest"], "a pytest provided by patchheal")
    version = run([python, "-c", _PYTEST_VERSION], "the provided pytest's version").strip()
    say(PROVIDED_PYTEST.format(version=version.splitlines()[-1] if version else "?"))


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


def _npm_install(run: object, workdir: str) -> None:
    # node_modules lives in the image, not the worktree (a reset would wipe it);
    # /node_modules makes Node's parent-directory lookup from the worktree find it.
    assert callable(run)
    script = (
        f"mkdir -p {sandbox.NODE_DIR} && cp {workdir}/package.json {sandbox.NODE_DIR}/ && "
        f"(cp {workdir}/package-lock.json {sandbox.NODE_DIR}/ 2>/dev/null || true) && "
        f"cd {sandbox.NODE_DIR} && if [ -f package-lock.json ]; then "
        "npm ci --ignore-scripts --no-audit --no-fund; else "
        "npm install --ignore-scripts --no-audit --no-fund; fi"
    )
    run(["/bin/sh", "-c", script], "npm install")
    run(["ln", "-sfn", f"{sandbox.NODE_DIR}/node_modules", "/node_modules"], "npm link", "0:0")
