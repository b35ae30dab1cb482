"""Local projects among pip's arguments (`.`, `-e .[test]`), read without building them.

Which directory and extras an argument names; whether only the project's
build backend can tell its dependencies (no `pyproject.toml` `[project]`, or
dynamic `dependencies`); its static `[project]` requirements (with extras)
for the image's Python; its `build-system.requires`, with what the backend's
hooks are known to add at build time.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from patchheal.harness.setup.markers import for_python

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
    `pipargs.dynamic_projects`; its build requirements: `pipargs.build_requirements`);
    anything else unchanged. The project path itself never reaches the host's pip, which
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
    reqs += _extras(meta, extras)
    return for_python(reqs, python)


def _extras(meta: dict[str, object], extras: list[str]) -> list[str]:
    """The requirements of the project's `extras`. An extra may name the project itself
    (attrs: `tests = ["attrs[tests-mypy]", ...]`): that is its own other extras, read here,
    never a release of the project that pip would fetch from the index instead."""
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.utils import canonicalize_name

    optional = meta.get("optional-dependencies", {})
    if not isinstance(optional, dict):
        return []
    itself = canonicalize_name(str(meta.get("name", "")))
    reqs: list[str] = []
    pending, seen = list(extras), set()
    while pending:
        extra = pending.pop(0)
        if extra in seen:
            continue
        seen.add(extra)
        for text in optional.get(extra, []):
            try:
                requirement = Requirement(text)
            except InvalidRequirement:
                reqs.append(text)  # pip names what is wrong with it
                continue
            if itself and canonicalize_name(requirement.name) == itself:
                pending += sorted(requirement.extras)
            else:
                reqs.append(text)
    return reqs
