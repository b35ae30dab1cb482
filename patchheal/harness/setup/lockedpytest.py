"""The pytest a repository's lock file pins, for a job whose setup installs none.

When a job's setup leaves the venv without pytest, patchheal provides one
(setup/installer.py). The newest one is not what the project's CI runs when the
project locks its tools: click's CI runs `uv run --group tests pytest`, which
installs the pytest of `uv.lock` (9.0.2 at a commit of 2026-06); with pytest 9.2
the same tests stop at collection, because the project turns warnings into
errors and 9.2 deprecates what its tests do. So the provided pytest is the one
the lock file pins for the image's Python, when one does:

- `uv.lock`, `pdm.lock`, `poetry.lock`: `[[package]]` tables with `name` and
  `version`; uv writes one table per version with the `resolution-markers` each
  applies under (one Python gets 8.3, a newer one 9.0), pdm a `marker`;
- `pylock.toml` (PEP 751): `[[packages]]` with `name`, `version`, `marker`.

Markers are judged for the image's Python (`python_version` and, as `X.Y.0`,
`python_full_version`); a marker this cannot judge, or several versions left,
means no pin, and the newest pytest is provided as before.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# In the order a project is likelier to mean: the lock its own tool reads first.
LOCK_FILES = ("uv.lock", "pylock.toml", "pdm.lock", "poetry.lock")
_MAX_BYTES = 16 * 1024 * 1024  # a lock file is text; a larger one is not read


@dataclass(frozen=True)
class LockedPytest:
    version: str
    lock_file: str

    @property
    def requirement(self) -> str:
        return f"pytest=={self.version}"


def locked_pytest(tree: Path, python: str) -> LockedPytest | None:
    """The pytest the first lock file in `tree`'s root pins for Python `python` ('3.11')."""
    for name in LOCK_FILES:
        path = tree / name
        if not path.is_file() or path.is_symlink() or path.stat().st_size > _MAX_BYTES:
            continue
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
            continue
        versions = _pytest_versions(data, python)
        if len(versions) == 1:
            return LockedPytest(versions.pop(), name)
    return None


def _pytest_versions(data: dict[str, Any], python: str) -> set[str]:
    tables = data.get("packages") or data.get("package") or []
    if not isinstance(tables, list):
        return set()
    found: set[str] = set()
    for table in tables:
        if not isinstance(table, dict) or _canonical(table.get("name")) != "pytest":
            continue
        version = table.get("version")
        if not isinstance(version, str) or not version:
            continue
        markers = table.get("resolution-markers") or table.get("marker") or []
        if isinstance(markers, str):
            markers = [markers]
        applies = [_applies(m, python) for m in markers] if isinstance(markers, list) else [None]
        if not markers or True in applies:
            found.add(version)
        elif None in applies:
            return set()  # a marker not judged here: no pin rather than a wrong one
    return found


def _applies(marker: object, python: str) -> bool | None:
    from packaging.markers import InvalidMarker, Marker, UndefinedEnvironmentName

    if not isinstance(marker, str):
        return None
    environment = {"python_version": python, "python_full_version": f"{python}.0"}
    try:
        return Marker(marker).evaluate(environment)
    except (InvalidMarker, UndefinedEnvironmentName):
        return None


def _canonical(name: object) -> str:
    return str(name).lower().replace("_", "-").replace(".", "-") if name else ""
