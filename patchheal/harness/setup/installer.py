"""What runs inside the setup container, in order, to install a job's dependencies.

The venv (which does not see the image's packages) and a pip as new as CI's;
for npm, `npm ci`/`npm install` into the image's node directory; the
harness's and the job's setup commands, a failure reported as a dependency
issue; a pytest provided from the wheelhouse when the setup installed none,
said in the setup log; and the metadata of legacy editable installs copied
into the venv, where steps over another worktree find it. `deps.fingerprint`
hashes these scripts: a new recipe makes a new dependency image.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from patchheal.errors import DependencySetupError, HarnessError
from patchheal.harness.config import HarnessDef
from patchheal.harness.engine import bytecode, containers, sandbox
from patchheal.harness.images.build import Say
from patchheal.harness.setup import wheelhouse
from patchheal.harness.setup.lockedpytest import LockedPytest

if TYPE_CHECKING:
    from docker.models.containers import Container


# The venv does not see the image's packages: a requirement of the project is never
# satisfied by what the image happens to carry (Debian's pytest 7.2.1 stood in for the
# pytest a project pinned, so the step ran another pytest than its CI). When the job's
# setup installs no pytest at all, the pytest the project's lock file pins for the image's
# Python (lockedpytest.py), else the newest, is installed from the wheelhouse (the host
# downloads it then, `wheelhouse.fill_pytest`), and the setup log says that patchheal
# provided it and why that one: steps run `python -m pytest` either way.
_VENV = "python3 -m venv {venv}"
_HAS_PYTEST = (
    "import importlib.metadata as m, sys\n"
    "try:\n    m.version('pytest')\nexcept m.PackageNotFoundError:\n    sys.exit(1)\n"
)
PROVIDED_PYTEST = "patchheal provided pytest {version} ({why}): the job's setup installs none"


@dataclass(frozen=True)
class ProvidedPytest:
    """What to install when the job's setup installed no pytest, and why that one."""

    requirement: str = wheelhouse.FALLBACK_PYTEST
    why: str = "the newest for this Python in the wheelhouse"

    @classmethod
    def of(cls, locked: LockedPytest | None) -> ProvidedPytest:
        if locked is None:
            return cls()
        return cls(locked.requirement, f"the version {locked.lock_file} pins")


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

_GROUPS_PIP = (
    "{venv}/bin/python -m pip install --help | grep -q -- --group || "
    f"{{venv}}/bin/python -m pip install --quiet --upgrade '{wheelhouse.GROUPS_PIP}'"
)


def _setup_in(
    container: Container,
    defn: HarnessDef,
    commands: Sequence[str],
    env: dict[str, str],
    user: str,
    say: Say,
    provide_pytest: Callable[[], ProvidedPytest] = ProvidedPytest,
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
        if wheelhouse.uses_groups(commands):
            run(["/bin/sh", "-c", _GROUPS_PIP.format(venv=sandbox.VENV)], "a pip with --group")
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


def _pytest_fallback(
    run: Callable[[list[str], str], str], provide_pytest: Callable[[], ProvidedPytest], say: Say
) -> None:
    """A pytest in the venv when the job's setup installed none, said in the setup log."""
    python = f"{sandbox.VENV}/bin/python"
    try:
        run([python, "-c", _HAS_PYTEST], "is there a pytest")
        return  # the project's own: the one its install resolved to
    except HarnessError:
        pass
    provided = provide_pytest()
    argv = [python, "-m", "pip", "install", "--quiet", provided.requirement]
    run(argv, "a pytest provided by patchheal")
    version = run([python, "-c", _PYTEST_VERSION], "the provided pytest's version").strip()
    say(
        PROVIDED_PYTEST.format(
            version=version.splitlines()[-1] if version else "?", why=provided.why
        )
    )


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
