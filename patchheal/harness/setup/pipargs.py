"""What a `pip install` line asks for, read flag by flag.

The `pip install` commands among a setup's shell commands and their
arguments; `-r` files expanded in place (kept inside the worktree); the
`pip download` arguments that fetch the same on the host (flags that only
shape an install dropped, local projects expanded to their static
requirements: `localprojects.py`), the build requirements of those local
projects, which of them are dynamic (left to the metadata sandbox), files the
image ships read from the harness folder, and the tests `wheelhouse._download`
makes of an argument list (where to look, whether it names anything).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from pathlib import Path

from patchheal.errors import HarnessError
from patchheal.harness.config import HarnessDef
from patchheal.harness.setup.hostpip import requirement_file_arguments
from patchheal.harness.setup.localprojects import (
    _build_requires,
    _expand_local,
    _is_dynamic,
    _local_project,
)
from patchheal.harness.setup.markers import for_python

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
