"""Harness definitions: where they are found and how one is loaded by name or path.

Definitions are looked up in `<repo>/harnesses`, then `./harnesses`, then the
ones bundled with patchheal.
"""

from __future__ import annotations

from pathlib import Path

import patchheal
from patchheal.errors import SpecError
from patchheal.harness.config import HarnessDef, load_harness_file


def bundled_dir() -> Path:
    """The definitions shipped inside the package (package data, so a wheel has them too)."""
    return Path(patchheal.__file__).resolve().parent / "harnesses"


def harness_search_path(repo: Path | None) -> list[Path]:
    """`<repo>/harnesses`, `./harnesses`, then the bundled definitions, without duplicates."""
    candidates = [*([repo / "harnesses"] if repo is not None else []), Path.cwd() / "harnesses"]
    candidates.append(bundled_dir())
    found: list[Path] = []
    for path in candidates:
        resolved = path.resolve()
        if resolved not in found:
            found.append(resolved)
    return found


def list_harnesses(repo: Path | None = None) -> list[HarnessDef]:
    """Every definition on the search path; an earlier folder hides a same-named later one."""
    seen: dict[str, HarnessDef] = {}
    for folder in harness_search_path(repo):
        for toml in sorted(folder.glob("*/harness.toml")) if folder.is_dir() else []:
            defn = load_harness_file(toml)
            seen.setdefault(defn.name, defn)
    return sorted(seen.values(), key=lambda d: d.name)


def load_harness(name_or_path: str, repo: Path | None = None) -> HarnessDef:
    """A definition by name (search path) or by path (a folder or a harness.toml)."""
    try:
        return _load_harness(name_or_path, repo)
    except OSError as exc:  # a name too long for the file system, a symlink loop
        raise SpecError(
            f"cannot use harness {name_or_path[:200]!r}: {exc.strerror or exc}"
        ) from None


def _load_harness(name_or_path: str, repo: Path | None) -> HarnessDef:
    as_path = Path(name_or_path).expanduser()
    if "/" in name_or_path or name_or_path.endswith(".toml"):
        if repo is not None and not as_path.is_absolute() and not as_path.exists():
            as_path = repo / as_path
        toml = as_path / "harness.toml" if as_path.is_dir() else as_path
        if not toml.is_file():
            raise SpecError(f"harness definition {toml} does not exist")
        return load_harness_file(toml)
    for folder in harness_search_path(repo):
        toml = folder / name_or_path / "harness.toml"
        if toml.is_file():
            return load_harness_file(toml)
    known = ", ".join(["local", *(d.name for d in list_harnesses(repo))])
    raise SpecError(f"unknown harness {name_or_path!r}; known: {known}")
