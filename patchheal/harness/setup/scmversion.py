"""The version a project's CI checkout gives tools that read it from git, and how to pass it.

setuptools-scm, hatch-vcs, pdm-backend's `scm` source and poetry-dynamic-versioning
compute the project's version from `git describe`. The job's private repository
holds the base commit at depth 1 without tags, and the metadata sandbox gets a
copy of the tree without git metadata: there they compute `0.1.dev1` (a pin like
pluggy's `pytest` then resolves to nothing) or fail outright. CI's checkout of a
project that versions from git has its tags (such projects check out with
`fetch-depth: 0`), so the version is computed here, on the host, from the
user's repository, as setuptools-scm's default scheme (`guess-next-dev`,
`node-and-date`) computes it for the base commit:

* on a tag: the tag's version (`v1.4.2` → `1.4.2`);
* N commits after the tag: its last number bumped, `.devN`, and the node
  (`1.4.3.dev3+gabc1234`);
* no tag: `0.1.devN+gHASH`, N the number of commits.

It reaches the tools through their documented overrides, never through a git
directory the step could see: `SETUPTOOLS_SCM_PRETEND_VERSION_FOR_<NAME>` for
the project's own distribution (setuptools-scm); the unscoped
`SETUPTOOLS_SCM_PRETEND_VERSION` only where the project builds with hatch-vcs
(it calls setuptools-scm without the distribution's name) or its name is
unknown, since the unscoped variable would also version every other sdist
setup builds from source; `PDM_BUILD_SCM_VERSION` for pdm-backend and
`POETRY_DYNAMIC_VERSIONING_BYPASS` for poetry-dynamic-versioning (dunamai), each
only where the project's build requirements name it. Versioneer has no
override: it runs `git describe` itself and gets the export's depth-1
repository (`0+untagged.N.gHASH`); not covered.

The version is of the base commit, the commit CI checked out, whatever
patchheal committed on top of it: a verified fix does not change the
dependency fingerprint. The workflow's `fetch-depth` is not read (the harness
does not know which workflow a job came from).
"""

from __future__ import annotations

import configparser
import re
import tomllib
from pathlib import Path

from packaging.version import InvalidVersion, Version

from patchheal import proc
from patchheal.harness.engine import gitmeta

# setuptools-scm's `git describe` (its default `--match` keeps tags with a digit).
_DESCRIBE = ("describe", "--tags", "--long", "--match", "*[0-9]*")
# setuptools-scm's default tag_regex: an optional `name-` prefix, an optional v.
_TAG = re.compile(r"^(?:[\w-]+-)?(?P<version>[vV]?\d+(?:\.\d+){0,2}[^\+]*)(?:\+.*)?$")
_DESCRIBED = re.compile(r"^(?P<tag>.+)-(?P<distance>\d+)-g(?P<node>[0-9a-f]+)$")
# How many of the worktree's newest commits are looked at for one the user's repository has.
_SEARCH_DEPTH = 200


def base_commit(repo: Path, worktree: Path) -> str | None:
    """The commit CI checked out under `worktree`'s history: the private repository's
    grafted base (its `shallow` file), else the newest commit the user's `repo` has.
    patchheal's own commits on top of the base do not count, published ones included."""
    recorded = gitmeta.recorded(worktree)
    shallow = recorded[1] / "shallow" if recorded else None
    if shallow is not None and shallow.is_file():
        for sha in shallow.read_text(encoding="ascii", errors="replace").split():
            under = proc.git("merge-base", "--is-ancestor", sha, "HEAD", cwd=worktree, check=False)
            if under.passed and _has(repo, sha):
                return sha
    newest = f"--max-count={_SEARCH_DEPTH}"
    listing = proc.git("rev-list", newest, "HEAD", cwd=worktree, check=False)
    if not listing.passed:
        return None
    return next((sha for sha in listing.output.split() if _has(repo, sha)), None)


def _has(repo: Path, sha: str) -> bool:
    found = proc.git("cat-file", "-e", f"{sha}^{{commit}}", cwd=repo, check=False, location={})
    return found.passed


def ci_version(repo: Path, commit: str) -> str | None:
    """The version setuptools-scm's default scheme gives `commit` of `repo` with its tags;
    None when `repo` cannot say (not a repository, a tag that is no version)."""
    described = proc.git(*_DESCRIBE, commit, cwd=repo, check=False, location={})
    if described.passed:
        found = _DESCRIBED.match(described.output.strip())
        if found is None:
            return None
        return scm_version(found["tag"], int(found["distance"]), found["node"])
    counted = proc.git("rev-list", "--count", commit, cwd=repo, check=False, location={})
    short = proc.git("rev-parse", "--short", commit, cwd=repo, check=False, location={})
    if not (counted.passed and short.passed and counted.output.strip().isdigit()):
        return None
    return scm_version(None, int(counted.output.strip()), short.output.strip())


def scm_version(tag: str | None, distance: int, node: str) -> str | None:
    """setuptools-scm's `guess-next-dev` + `node-and-date` version of a clean checkout
    `distance` commits after `tag` (None: no tag, as if `0.0`)."""
    if tag is None:
        release = "0.0"
    else:
        matched = _TAG.match(tag)
        if matched is None:
            return None
        try:
            release = str(Version(matched["version"]))
        except InvalidVersion:
            return None
    if distance == 0 and tag is not None:
        return release
    following = _next(release)
    return f"{following}.dev{distance}+g{node}" if following else None


def _next(version: str) -> str | None:
    """setuptools-scm's `guess_next_version`: a `.dev0` release is its own next (another dev
    number it refuses), else the last number goes up (`1.4.2` → `1.4.3`, `2.0rc1` → `2.0rc2`)."""
    version = version.split("+", 1)[0]
    if ".dev" in version:
        head, _, number = version.rpartition(".dev")
        return head if number == "0" else None
    bumped = re.match(r"(.*?)(\d+)$", version)
    if bumped is None:
        return None
    return f"{bumped[1]}{int(bumped[2]) + 1}"


def override_env(version: str, tree: Path) -> dict[str, str]:
    """The variables that hand `version` to the version tools `tree`'s build uses."""
    name, requires = _build_facts(tree)
    env: dict[str, str] = {}
    if name:
        normalized = re.sub(r"[-_.]+", "_", name).upper()
        env[f"SETUPTOOLS_SCM_PRETEND_VERSION_FOR_{normalized}"] = version
    if not name or _names(requires, "hatch-vcs"):
        env["SETUPTOOLS_SCM_PRETEND_VERSION"] = version
    if _names(requires, "pdm-backend", "pdm-pep517"):
        env["PDM_BUILD_SCM_VERSION"] = version
    if _names(requires, "poetry-dynamic-versioning"):
        env["POETRY_DYNAMIC_VERSIONING_BYPASS"] = version
    return env


def _names(requires: list[str], *wanted: str) -> bool:
    heads = {re.split(r"[\s<>=!~;\[@(]", r.strip(), maxsplit=1)[0] for r in requires}
    canonical = {re.sub(r"[-_.]+", "-", head).lower() for head in heads}
    return any(name in canonical for name in wanted)


def _build_facts(tree: Path) -> tuple[str, list[str]]:
    """(the distribution's name, the build requirements) from pyproject.toml / setup.cfg;
    empty where they do not say (a setup.py computing its name, a file that does not parse)."""
    name, requires = "", []
    pyproject = tree / "pyproject.toml"
    if pyproject.is_file():
        try:
            data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError):
            data = {}
        project = data.get("project")
        if isinstance(project, dict) and isinstance(project.get("name"), str):
            name = project["name"]
        tool = data.get("tool")
        poetry = tool.get("poetry") if isinstance(tool, dict) else None
        if not name and isinstance(poetry, dict) and isinstance(poetry.get("name"), str):
            name = poetry["name"]
        build = data.get("build-system")
        if isinstance(build, dict) and isinstance(build.get("requires"), list):
            requires = [str(r) for r in build["requires"]]
    setup_cfg = tree / "setup.cfg"
    if not name and setup_cfg.is_file():
        parser = configparser.ConfigParser(interpolation=None)
        try:
            parser.read_string(setup_cfg.read_text(encoding="utf-8"))
            name = parser.get("metadata", "name", fallback="").strip()
        except (configparser.Error, UnicodeDecodeError):
            name = ""
    return name, requires
