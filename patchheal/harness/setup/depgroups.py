"""A dependency group's requirements (PEP 735), read from a worktree's pyproject.toml.

`pip install --group test` (pip 25.1+) installs the `[dependency-groups]` table's
`test` list, following `{include-group = "..."}` entries: how tox-dev/filelock's
and other projects' CI install their test tools. The host's `pip download` runs
in an empty folder (hostpip.py), where `--group` finds no pyproject.toml, so the
group is expanded here into its requirements, which then go through the same
filter as any other argument. `--group path:name` names another pyproject.toml.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def group_requirements(worktree: Path, spec: str) -> list[str] | None:
    """The requirements of group `spec` (`name` or `path:name`, relative to `worktree`);
    None when the file or the group is missing or malformed (pip says why in setup)."""
    path_part, _, name = spec.rpartition(":")
    pyproject = worktree / (path_part or "pyproject.toml")
    if not pyproject.resolve().is_relative_to(worktree.resolve()):
        return None  # read only the tree's own files, never one a link or `..` points at
    try:
        data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return None
    table = data.get("dependency-groups")
    if not isinstance(table, dict):
        return None
    groups = {_normalized(str(key)): value for key, value in table.items()}
    return _expand(groups, _normalized(name), seen=())


def _expand(groups: dict[str, object], name: str, seen: tuple[str, ...]) -> list[str] | None:
    entries = groups.get(name)
    if name in seen or not isinstance(entries, list):
        return None  # a cycle or a missing group: malformed, as pip would say
    found: list[str] = []
    for entry in entries:
        if isinstance(entry, str):
            found.append(entry)
        elif isinstance(entry, dict) and isinstance(entry.get("include-group"), str):
            included = _expand(groups, _normalized(entry["include-group"]), (*seen, name))
            if included is None:
                return None
            found += included
        else:
            return None
    return found
