"""What a repository says about its Python, read at the failing commit.

Each source gives the versions it names (`.python-version`, the CI
workflows' `python-version`, tox's envlist, trove classifiers) or a range
(`requires-python`, `python_requires`), most trusted first: a pin, then what
CI runs, then what the package claims. Files are read at the base commit
(`git show`), like harness inference, or from the folder when it is not a
git repository. Nothing is executed: setup.py is read as text.
"""

from __future__ import annotations

import configparser
import re
import tomllib
from pathlib import Path
from typing import Any

from patchheal import proc
from patchheal.harness.runtimes import Evidence

_READ_CHARS = 256 * 1024
_CLASSIFIER = re.compile(r"Programming Language :: Python :: (3\.\d+)\b")
_PYTHON_REQUIRES = re.compile(r"python_requires\s*=\s*['\"]([^'\"]+)['\"]")
_TOX_ENV = re.compile(r"\bpy(3)(\d{1,2})\b")


def allows(spec: str, version: str) -> bool:
    """Whether a `requires-python` range allows Python `version` ('3.9'); an invalid
    range says nothing, so it allows every version."""
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    try:
        specifier = SpecifierSet(spec)
    except InvalidSpecifier:
        return True
    return specifier.contains(version) or specifier.contains(f"{version}.99")


def evidence_at(repo: Path, base: str) -> list[Evidence]:
    """Every source in the repository at `base` that names a Python, most trusted first."""
    read = reader(repo, base)
    found: list[Evidence] = []
    pinned = read(".python-version")
    if pinned:
        lines = [ln.strip() for ln in pinned.splitlines() if ln.strip() and ln[0] != "#"]
        found.append(Evidence(".python-version", lines, None))
    for name in workflow_files(repo, base):
        versions = workflow_versions(read(name) or "")
        if versions:
            found.append(Evidence(f"the CI workflow {name}", versions, None))
    tox = read("tox.ini")
    if tox:
        envs = tox_versions(tox)
        if envs:
            found.append(Evidence("tox.ini's envlist", envs, None))
    texts = {name: read(name) or "" for name in ("pyproject.toml", "setup.cfg", "setup.py")}
    for name, text in texts.items():
        classifiers = sorted(set(_CLASSIFIER.findall(text)))
        if classifiers:
            found.append(Evidence(f"{name}'s classifiers", classifiers, None))
    for name, spec in _ranges(texts):
        found.append(Evidence(f"{name}", [], spec))
    return found


def workflow_versions(
    text: str,
    keys: tuple[str, ...] = ("python-version", "python", "python_version", "py"),
    action: str = "setup-python",
) -> list[str]:
    """The versions a GitHub workflow names under `keys` (`python-version` by default): its
    matrices (and their `include` entries) and the `with` of its `action` steps."""
    import yaml

    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError:
        return []
    jobs = data.get("jobs") if isinstance(data, dict) else None
    found: list[str] = []
    for body in (jobs or {}).values() if isinstance(jobs, dict) else ():
        if not isinstance(body, dict):
            continue
        matrix = (body.get("strategy") or {}).get("matrix")
        if isinstance(matrix, dict):
            for key in keys:
                found += _strings(matrix.get(key))
            for extra in matrix.get("include") or []:
                if isinstance(extra, dict):
                    found += _strings(extra.get(keys[0]) or extra.get(keys[1]))
        for step in body.get("steps") or []:
            if isinstance(step, dict) and action in str(step.get("uses", "")):
                wanted = str((step.get("with") or {}).get(keys[0], ""))
                if wanted and "${{" not in wanted:
                    found.append(wanted)
    return list(dict.fromkeys(found))


def tox_versions(text: str) -> list[str]:
    """3.X for every pyXY in tox.ini's envlist."""
    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read_string(text)
    except configparser.Error:
        return []
    envlist = parser.get("tox", "envlist", fallback="")
    return list(dict.fromkeys(f"{a}.{b}" for a, b in _TOX_ENV.findall(envlist)))


def _strings(value: Any) -> list[str]:
    items = value if isinstance(value, list) else [value] if value is not None else []
    # YAML reads `3.10` as the float 3.1: a matrix written that way means 3.10.
    return [("3.10" if item == 3.1 else str(item)) for item in items if item is not None]


def _ranges(texts: dict[str, str]) -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    try:
        project = tomllib.loads(texts["pyproject.toml"]).get("project", {})
    except tomllib.TOMLDecodeError:
        project = {}
    if isinstance(project, dict) and isinstance(project.get("requires-python"), str):
        found.append(("pyproject.toml's requires-python", project["requires-python"]))
    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read_string(texts["setup.cfg"])
        cfg = parser.get("options", "python_requires", fallback="").strip()
    except configparser.Error:
        cfg = ""
    if cfg:
        found.append(("setup.cfg's python_requires", cfg))
    match = _PYTHON_REQUIRES.search(texts["setup.py"])
    if match:
        found.append(("setup.py's python_requires", match.group(1)))
    return found


def reader(repo: Path, base: str) -> Any:
    is_git = proc.git("rev-parse", "--verify", f"{base}^{{commit}}", cwd=repo, check=False).passed

    def read(path: str) -> str | None:
        if is_git:
            shown = proc.git("show", f"{base}:{path}", cwd=repo, check=False)
            return shown.output[:_READ_CHARS] if shown.passed else None
        try:
            return (repo / path).read_text(encoding="utf-8", errors="replace")[:_READ_CHARS]
        except OSError:
            return None

    return read


def workflow_files(repo: Path, base: str) -> list[str]:
    where = ".github/workflows"
    listed = proc.git("ls-tree", "--name-only", f"{base}:{where}", cwd=repo, check=False)
    if listed.passed:
        names = listed.output.split()
    else:
        folder = repo / where
        names = sorted(p.name for p in folder.glob("*")) if folder.is_dir() else []
    return [f"{where}/{n}" for n in names if n.endswith((".yml", ".yaml"))]
