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
import shlex
import shutil
import sys
import tempfile
import tomllib
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
from patchheal.harness.setup.hostpip import HostPipArgs, requirement_file_arguments

if TYPE_CHECKING:
    from docker import DockerClient

_PIP = re.compile(r"^(?:\S*/)?(?:pip3?(?:\.\d+)?|python3?(?:\.\d+)?\s+-m\s+pip)\s+install\s+(.*)$")
_DROP_FLAG = {
    "-U",
    "--upgrade",
    "--user",
    "-q",
    "--quiet",
    "-v",
    "--verbose",
    "--force-reinstall",
    "--no-cache-dir",
    "--no-build-isolation",
    "--break-system-packages",
    "--no-index",
    "--ignore-installed",
    "-I",
    "--compile",
    "--no-compile",
    "--no-warn-script-location",
}
_DROP_WITH_VALUE = {
    "-t",
    "--target",
    "--prefix",
    "--root",
    "--upgrade-strategy",
    "--progress-bar",
    "--cache-dir",
    "--src",
}
_KEEP_WITH_VALUE = {
    "-r",
    "--requirement",
    "-c",
    "--constraint",
    "-i",
    "--index-url",
    "--extra-index-url",
    "-f",
    "--find-links",
    "--trusted-host",
}
_DEFAULT_BUILD = ("setuptools>=40.8.0", "wheel")
# What a backend's `get_requires_for_build_wheel` / `_editable` hooks add at build time
# to `build-system.requires`, which pip then installs into the isolated build
# environment (offline: from the wheelhouse). setuptools before 70.1 asks for wheel
# (its `requires` often omits it since PEP 517's examples did); hatchling and the older
# pdm backend ask for editables for an editable install. Downloading them regardless
# costs two small wheels; missing, the setup fails as "No matching distribution".
_HOOK_REQUIRES: dict[str, tuple[str, ...]] = {
    "setuptools.build_meta": ("wheel",),
    "hatchling.build": ("editables",),
    "pdm.pep517.api": ("editables",),
}
MODERN_PIP = "pip>=22.2"
# What a step's `python -m pytest` gets when the job's setup installs no pytest: pip
# resolves the newest release whose `Requires-Python` allows the image's Python.
FALLBACK_PYTEST = "pytest"


def pip_install_args(commands: Sequence[str]) -> list[list[str]]:
    """The argument lists of every `pip install` among shell commands (split on && ; ||)."""
    found: list[list[str]] = []
    for command in commands:
        for part in re.split(r"&&|\|\||;|\n", command):
            match = _PIP.match(part.strip())
            if match:
                found.append(shlex.split(match.group(1)))
    return found


_MAX_REQUIREMENT_DEPTH = 8


def expand_requirement_files(
    args: Sequence[str], worktree: Path, *, base: Path | None = None, depth: int = 0
) -> list[str]:
    """`pip install` arguments with every `-r FILE` replaced by the file's own arguments.

    A requirements file may name the project itself (`-e .`, `.`): left to
    `pip download` on the host, that would run the project's build backend
    there. Expanded, its local projects go the way of any other (static
    requirements read as text, dynamic ones in a sandbox). A nested `-r` or
    `-c` is relative to the file that names it, as pip has it, and must stay
    in the worktree: the file is the candidate's, the host reads what it names.
    """
    out: list[str] = []
    items = list(args)
    here = base or worktree
    while items:
        arg = items.pop(0)
        option, name = _file_option(arg, items)
        if option is None or (option == "-c" and depth == 0):
            out += [arg] if option is None else ["-c", name]
            continue
        path = (here / name).resolve()
        if depth >= _MAX_REQUIREMENT_DEPTH or not path.is_relative_to(worktree.resolve()):
            raise HarnessError(
                f"{_FILE_KIND[option]} {name}: outside the worktree or nested too deep"
            )
        # hostpip reads a constraints file; pip names a missing or unreadable one (a FIFO
        # is not a file: opening it would block).
        lines = requirement_file_arguments(path) if option == "-r" and path.is_file() else None
        if lines is None:
            out += [option, str(path)]
            continue
        out += expand_requirement_files(lines, worktree, base=path.parent, depth=depth + 1)
    return out


_FILE_OPTIONS = {"-r": "-r", "--requirement": "-r", "-c": "-c", "--constraint": "-c"}
_FILE_KIND = {"-r": "requirements file", "-c": "constraints file"}


def _file_option(arg: str, items: list[str]) -> tuple[str | None, str]:
    """("-r" or "-c", the file) when `arg` (with the next item, or attached) names one."""
    flag, equals, value = arg.partition("=")
    if equals and flag.startswith("--") and flag in _FILE_OPTIONS:
        return _FILE_OPTIONS[flag], value
    if arg in _FILE_OPTIONS:
        return (_FILE_OPTIONS[arg], items.pop(0)) if items else (None, "")
    if arg[:2] in ("-r", "-c") and not arg.startswith("--"):
        return arg[:2], arg[2:]
    return None, ""


def download_args(args: Sequence[str], worktree: Path, python: str | None = None) -> list[str]:
    """`pip install` arguments → `pip download` arguments, local projects expanded to their
    static requirements (for the image's `python`; their build requirements: see
    `build_requirements`)."""
    out: list[str] = []
    items = list(args)
    while items:
        arg = items.pop(0)
        if arg in _DROP_FLAG:
            continue
        if arg in _DROP_WITH_VALUE:
            items[:1] = []
            continue
        if arg in _KEEP_WITH_VALUE and items:
            out += [arg, items.pop(0)]
            continue
        if arg in ("-e", "--editable") and items:
            arg = items.pop(0)
        if arg.startswith("-"):
            out.append(arg)
            continue
        out += _expand_local(arg, worktree, python)
    return out


_INDEX_FLAGS = {"-i", "--index-url", "--extra-index-url", "-f", "--find-links", "--trusted-host"}


def build_requirements(args: Sequence[str], worktree: Path, python: str | None = None) -> list[str]:
    """What building the local projects among `args` needs, as `pip download` arguments.

    pip builds a project in an isolated environment that it fills with the
    build requirements *and everything they require*, whatever the install's
    own flags say (`--no-deps` included): setuptools-scm needs vcs-versioning
    (with a pre-release constraint, `>=2.5.0.dev0`), which must be in the
    wheelhouse too. So these are downloaded apart from the install's other
    arguments, transitively, keeping only where to look (index and links).
    """
    wanted: list[str] = []
    for arg in args:
        local = _local_project(arg, worktree)
        if local is not None:
            wanted += for_python(_build_requires(local[0]), python)
    if not wanted:
        return []
    where: list[str] = []
    items = list(args)
    while items:
        arg = items.pop(0)
        if arg in _INDEX_FLAGS and items:
            where += [arg, items.pop(0)]
        elif arg == "--pre":
            where.append(arg)
    return [*where, *dict.fromkeys(wanted)]


def target_environment(python: str) -> dict[str, str]:
    """PEP 508 marker variables of the image's CPython `python` ('3.9') on Linux."""
    from packaging.markers import default_environment

    return {
        **{key: str(value) for key, value in default_environment().items()},
        "python_version": python,
        "python_full_version": f"{python}.0",
        "implementation_name": "cpython",
        "platform_python_implementation": "CPython",
        "sys_platform": "linux",
        "platform_system": "Linux",
        "os_name": "posix",
    }


def for_python(requirements: Sequence[str], python: str | None) -> list[str]:
    """`requirements` whose markers hold for the image's Python `python` ('3.11'), markers
    dropped: on the host, pip would evaluate them for the host's interpreter instead."""
    if python is None:
        return list(requirements)
    from packaging.requirements import InvalidRequirement, Requirement

    environment = target_environment(python)
    kept: list[str] = []
    for text in requirements:
        try:
            requirement = Requirement(text)
        except InvalidRequirement:
            kept.append(text)  # pip names what is wrong with it
            continue
        if requirement.marker is None or requirement.marker.evaluate(environment):
            requirement.marker = None
            kept.append(str(requirement))
    return kept


def only_for_target(metadata_text: str, python: str) -> list[str]:
    """The requirements of a wheel's METADATA that the image's Python needs and the host's
    pip left out: their markers hold for `python` but not for the host (`tomli;
    python_version < "3.11"` of pytest 8, for 3.9 from a 3.11 host). Markers dropped."""
    from email.parser import HeaderParser

    from packaging.markers import default_environment
    from packaging.requirements import InvalidRequirement, Requirement

    target = {**target_environment(python), "extra": ""}
    host = {**{k: str(v) for k, v in default_environment().items()}, "extra": ""}
    wanted: list[str] = []
    for text in HeaderParser().parsestr(metadata_text).get_all("Requires-Dist") or []:
        try:
            requirement = Requirement(text)
        except InvalidRequirement:
            continue
        marker = requirement.marker
        if requirement.url:
            continue  # a direct reference is no name from an index (hostpip.py): never here
        if marker is not None and marker.evaluate(target) and not marker.evaluate(host):
            requirement.marker = None
            wanted.append(str(requirement))
    return wanted


def _wheel_metadata(wheel: Path) -> str:
    """A wheel's `*.dist-info/METADATA`, or '' (an sdist, a broken file)."""
    import zipfile

    try:
        with zipfile.ZipFile(wheel) as archive:
            names = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
            return archive.read(names[0]).decode("utf-8", "replace") if names else ""
    except (OSError, zipfile.BadZipFile, KeyError):
        return ""


# pip download's words for each file it resolved: saved now, or found in --dest.
_RESOLVED_FILE = re.compile(r"^(?:Saved|File was already downloaded) (\S+)$", re.MULTILINE)


_LOCAL = re.compile(r"^(\.{1,2}(?:/[^\[]*)?|/[^\[]*)(?:\[([^\]]*)\])?$")


def _local_project(arg: str, worktree: Path) -> tuple[Path, list[str]] | None:
    """(project directory, extras) when `arg` names a local project, else None."""
    match = _LOCAL.match(arg)
    if not match:
        return None
    extras = [e.strip() for e in (match.group(2) or "").split(",") if e.strip()]
    return (worktree / match.group(1)).resolve(), extras


def _is_dynamic(project: Path) -> bool:
    """Whether only the project's build backend can tell its dependencies."""
    pyproject = project / "pyproject.toml"
    if not pyproject.is_file():
        return True
    meta = tomllib.loads(pyproject.read_text(encoding="utf-8")).get("project", {})
    return not meta or "dependencies" in meta.get("dynamic", ())


def dynamic_projects(args: Sequence[str], worktree: Path) -> list[tuple[Path, list[str]]]:
    """The local projects among `pip install` arguments whose requirements are dynamic."""
    found: list[tuple[Path, list[str]] | None] = []
    items = list(args)
    while items:
        arg = items.pop(0)
        if arg in _KEEP_WITH_VALUE or arg in _DROP_WITH_VALUE:
            items[:1] = []  # a constraints file or an index URL, never a project
            continue
        found.append(_local_project(arg, worktree))
    return [item for item in found if item is not None and _is_dynamic(item[0])]


def _build_requires(project: Path) -> list[str]:
    """`build-system.requires` of a local project (setuptools and wheel when it has none),
    with what its backend's hooks are known to add (`_HOOK_REQUIRES`)."""
    pyproject = project / "pyproject.toml"
    if not pyproject.is_file():
        return list(_DEFAULT_BUILD)
    system = tomllib.loads(pyproject.read_text(encoding="utf-8")).get("build-system", {})
    requires = list(system.get("requires", _DEFAULT_BUILD))
    # No `build-backend`: pip runs setuptools' legacy backend.
    backend = str(system.get("build-backend", "setuptools.build_meta")).split(":")[0]
    return requires + [r for r in _HOOK_REQUIRES.get(backend, ()) if r not in requires]


def _expand_local(arg: str, worktree: Path, python: str | None = None) -> list[str]:
    """A local project's static requirements (none when they are dynamic: see
    `dynamic_projects`; its build requirements: `build_requirements`); anything
    else unchanged. The project path itself never reaches the host's pip, which
    would run its build backend."""
    local = _local_project(arg, worktree)
    if local is None:
        return [arg]
    project, extras = local
    pyproject = project / "pyproject.toml"
    if not pyproject.is_file() or _is_dynamic(project):
        return []
    meta = tomllib.loads(pyproject.read_text(encoding="utf-8")).get("project", {})
    reqs = list(meta.get("dependencies", ()))
    for extra in extras:
        reqs += meta.get("optional-dependencies", {}).get(extra, [])
    return for_python(reqs, python)


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


def host_paths(args: Sequence[str], defn: HarnessDef) -> list[str]:
    """Arguments naming a file the harness's image ships (`[deps] image_files`, e.g. the
    airflow harness's constraints) → that file in the harness folder, for the host's pip."""
    if defn.path is None or not defn.deps.image_files:
        return list(args)
    shipped = {inside: str(defn.path / local) for inside, local in defn.deps.image_files.items()}
    out: list[str] = []
    for arg in args:
        flag, equals, value = arg.partition("=")
        if equals and flag.startswith("--") and value in shipped:
            out.append(f"{flag}={shipped[value]}")
        else:
            out.append(shipped.get(arg, arg))
    return out


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
    if tuple(map(int, version.split("."))) < (3, 11):
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


def fill_pytest(client: DockerClient, image: str, worktree: Path, say: Say) -> Path:
    """The newest pytest for the image's Python, and what it needs, into the wheelhouse: for
    a job whose setup installs none (the venv does not see the image's own)."""
    version = container_python(client, image)
    house = _house(version)
    try:
        _download(house, version, [[FALLBACK_PYTEST]], worktree, say)
    except DependencySetupError:
        # No index from the host (offline machine): a pytest an earlier download left
        # serves, as the image's own did before; without one, the setup fails saying why.
        if not any(house.glob("pytest-*.whl")):
            raise
        say("no index reachable from the host: the wheelhouse's newest pytest is used")
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


def _is_location(args: Sequence[str], index: int) -> bool:
    """Whether `args[index]` says where to look (an index or links option, or its value) or
    what is allowed (a constraints file): the requirements the marker closure adds are
    looked for where the first ones were, under the same constraints."""
    here = args[index]
    before = args[index - 1] if index else ""
    flags = {*_INDEX_FLAGS, "-c", "--constraint"}
    return (
        here in flags
        or before in flags
        or here in ("--no-index", "--pre")
        or here.startswith(tuple(f"{flag}=" for flag in _INDEX_FLAGS if flag.startswith("--")))
    )


def _names_something(args: Sequence[str]) -> bool:
    """Whether `pip download args` would have anything to download (not flags alone, as
    `pip install --no-deps -e .` leaves once its local project is expanded)."""
    items = list(args)
    while items:
        arg = items.pop(0)
        if arg in ("-r", "--requirement") or not arg.startswith("-"):
            return True
        if arg in _KEEP_WITH_VALUE and items:
            items.pop(0)
    return False


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
