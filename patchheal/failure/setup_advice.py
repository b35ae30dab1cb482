"""A job without the setup it needs: what is missing, and the spec line that adds it.

A step that fails because its environment lacks something (the project is not
installed, a test tool or a command is missing) is not a code bug: every patch,
the right one included, fails the same way. The classifier calls it
`env_mismatch` and these helpers say what to add to the job spec, with the
line to write (`setup = ["pip install -e ."]` under `[job]`).

The worktree is untrusted: it is only read here (file existence, a bounded
`pyproject.toml` parsed as data), never imported or executed.
"""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

SOURCE_ROOTS = (".", "src", "lib")
_PYPROJECT_LIMIT = 1024 * 1024
_TEST_EXTRAS = ("test", "tests", "testing", "dev")
# A shell's "not found": bash `bash: line 1: ruff: command not found`, dash
# `sh: 1: ruff: not found`, zsh `zsh: command not found: ruff`.
_SHELL_NOT_FOUND = re.compile(
    r"(?m)^[\w/.-]*sh(?:: line \d+)?(?:: \d+)?: (?P<tool>[\w.+-]+): (?:command )?not found\s*$"
    r"|command not found: (?P<zsh>[\w.+-]+)"
)
# Commands that a pip install provides, by the package that provides them.
_PIP_PACKAGES = {
    "pytest": "pytest",
    "py.test": "pytest",
    "ruff": "ruff",
    "mypy": "mypy",
    "black": "black",
    "flake8": "flake8",
    "isort": "isort",
    "pylint": "pylint",
    "tox": "tox",
    "nox": "nox",
    "coverage": "coverage",
    "pre-commit": "pre-commit",
    "dbt": "dbt-core",
    "alembic": "alembic",
    "django-admin": "django",
    "sphinx-build": "sphinx",
    "nose2": "nose2",
    "pytest_cov": "pytest-cov",
    "xdist": "pytest-xdist",
    "hypothesis": "hypothesis",
    "mock": "mock",
}
# Commands a hosted runner has that come from a Debian package of another name.
_DEBIAN_PACKAGES = {
    "ps": "procps",
    "pkill": "procps",
    "xz": "xz-utils",
    "dot": "graphviz",
    "convert": "imagemagick",
    "pg_config": "libpq-dev",
    "psql": "postgresql-client",
    "cc": "gcc",
    "c++": "g++",
    "locale-gen": "locales",
}
_SYSTEM_TOOLS = frozenset(
    {"less", "more", "make", "gcc", "g++", "git", "unzip", "zip", "bzip2", "curl", "wget", "jq"}
    | {"sqlite3", "file", "patch", "rsync", "ssh", "gpg", "tar", "gzip", "nano", "vim", "vi"}
    | set(_DEBIAN_PACKAGES)
)
_NODE_RUNTIME = frozenset({"node", "npm", "npx", "yarn", "pnpm", "corepack"})
_NODE_TOOLS = frozenset({"jest", "mocha", "vitest", "tsc", "eslint", "ts-node", "prettier"})
_AGAIN = "then heal again: `patchheal heal JOB.toml`"


def spec_line(key: str, commands: list[str]) -> str:
    """`key = ["…"]` as it is written in TOML (JSON strings are valid TOML basic strings)."""
    return f"{key} = [" + ", ".join(json.dumps(c) for c in commands) + "]"


def module_location(module: str, repo_root: str | Path) -> str | None:
    """Where the dotted `module` is a file or package of the project ('src/inventory'), if it is."""
    parts = [p for p in module.split(".") if p]
    if not parts or any(not p.isidentifier() for p in parts):
        return None
    root_path = Path(repo_root)
    for root in SOURCE_ROOTS:
        base = root_path.joinpath(root, *parts)
        if base.with_suffix(".py").is_file():
            return base.with_suffix(".py").relative_to(root_path).as_posix()
        # A package, or a namespace package (a folder of modules without __init__.py).
        if base.is_dir() and any(base.glob("*.py")):
            return base.relative_to(root_path).as_posix()
    return None


def _pyproject(repo_root: Path) -> dict[str, object]:
    path = repo_root / "pyproject.toml"
    try:
        if not path.is_file() or path.stat().st_size > _PYPROJECT_LIMIT:
            return {}
        return tomllib.loads(path.read_text(encoding="utf-8", errors="replace"))
    except (OSError, tomllib.TOMLDecodeError, RecursionError):
        return {}


def install_command(repo_root: str | Path) -> str | None:
    """The pip command that installs the project with its test extra, if it can be installed."""
    root = Path(repo_root)
    pyproject = _pyproject(root)
    project = pyproject.get("project")
    tool = pyproject.get("tool")
    poetry = isinstance(tool, dict) and "poetry" in tool
    packaged = (
        isinstance(project, dict)
        or poetry
        or (root / "setup.py").is_file()
        or (root / "setup.cfg").is_file()
    )
    if not packaged:
        return None
    extras = project.get("optional-dependencies") if isinstance(project, dict) else None
    extra = next((e for e in _TEST_EXTRAS if isinstance(extras, dict) and e in extras), None)
    return f"pip install -e '.[{extra}]'" if extra else "pip install -e ."


def project_not_importable(module: str, where: str, repo_root: str | Path) -> tuple[str, ...]:
    """Next actions for a project module present in the tree that the step cannot import."""
    command = install_command(repo_root)
    if command is not None:
        return (
            f"Install the project in the job's setup: the step imports `{module}` ({where}), "
            f"which nothing installs. Add under [job] in the job spec: "
            f"`{spec_line('setup', [command])}`; {_AGAIN}.",
        )
    top = where.split("/")[0] if where.startswith(("src/", "lib/")) else "."
    return (
        f"Put the project on the path: the step imports `{module}` ({where}), and the project "
        "has no packaging metadata (pyproject [project], setup.py, setup.cfg) to install. "
        f"Prefix the step's command under [[steps]] with `PYTHONPATH={top}` "
        f'or add `pythonpath = ["{top}"]` under [tool.pytest.ini_options]; {_AGAIN}.',
    )


def tool_missing(tool: str) -> tuple[str, ...]:
    """Next actions for a command or Python module the step needs and the harness lacks."""
    if tool in _NODE_RUNTIME:
        return (
            f"Run the job in a harness that has `{tool}`: under [job] in the job spec, "
            f'`harness = "node"` (or a harness of your own whose image has it); {_AGAIN}.',
        )
    if tool in _NODE_TOOLS:
        return (
            f"Install the project's node dependencies (which provide `{tool}`) in the job's "
            f"setup: under [job], `{spec_line('setup', ['npm ci'])}`, with "
            f'`harness = "node"`; {_AGAIN}.',
        )
    if tool in _SYSTEM_TOOLS:
        return (system_package(f"the command `{tool}`", _DEBIAN_PACKAGES.get(tool, tool)),)
    package = _PIP_PACKAGES.get(tool) or _PIP_PACKAGES.get(tool.split(".")[0])
    if package is not None:
        return (
            f"Install `{package}` (it provides `{tool}`) in the job's setup: under [job] in the "
            f"job spec, `{spec_line('setup', [f'pip install {package}'])}` (or add it to "
            f"the project's test dependencies and install those); {_AGAIN}.",
        )
    return (
        f"Install `{tool}` in the job's setup (under [job] in the job spec, e.g. "
        f"`{spec_line('setup', [f'pip install {tool}'])}` for a Python tool), or choose a "
        f"harness whose image has it (`harness = ...`, docs/harnesses.md); {_AGAIN}.",
    )


def tool_not_found(text: str) -> str | None:
    """The command a shell said it could not find in `text`, if one did."""
    found = _SHELL_NOT_FOUND.search(text)
    if found is None:
        return None
    return found["tool"] or found["zsh"]


def system_package(what: str, package: str) -> str:
    """The next action for a system file or command the harness image lacks."""
    return (
        f"Add the Debian package that provides {what} to the harness: under [job] in the job "
        f"spec, `{spec_line('packages', [package])}` (a hosted CI runner has it), or a setup "
        f"line that provides it; {_AGAIN}."
    )


# A program a test runs through subprocess that is not on the PATH: Python's
# `FileNotFoundError: [Errno 2] No such file or directory: 'less'` (a bare name, no path).
_EXEC_MISSING = re.compile(r"No such file or directory: '(?P<tool>[\w+-][\w.+-]*)'")
# Where the error came from: subprocess's child-exec frames or its location line
# (`…/subprocess.py:1950: FileNotFoundError`), not any mention of subprocess in the log.
_EXEC_CONTEXT = re.compile(
    r"_execute_child|child_exception_type|\bPopen\b|os\.exec|\bexecvpe?\b|subprocess\.py[:\"]"
)
# The error as raised (`E   zoneinfo._common.ZoneInfoNotFoundError: 'No time zone found with
# key America/Chicago'`, pytz's `UnknownTimeZoneError: 'America/Chicago'`), not the
# `raise` line of a traceback's source listing.
_ZONE = re.compile(
    r"(?:ZoneInfoNotFoundError|UnknownTimeZoneError):\s*'(?:No time zone found with key )?"
    r"(?P<key>[A-Za-z][\w/+-]*)"
)
_SHARED_LIBRARY = re.compile(
    r"(?P<lib>lib[\w+-][\w.+-]*\.so[\w.]*): cannot open shared object file"
)
_LOCALE = re.compile(r"unsupported locale setting|locale: Cannot set LC_\w+")


def missing_system_piece(text: str) -> tuple[str, tuple[str, ...]] | None:
    """(what the environment lacks, the next actions) when `text` says a system file or
    command is missing: a time zone, a shared library, a locale, a program a test runs."""
    zone = next((z for z in _ZONE.finditer(text) if _known_zone(z["key"])), None)
    if zone:
        return (
            f"the environment has no time-zone database (no key {zone['key']!r})",
            (system_package("the time-zone database", "tzdata"),),
        )
    library = _SHARED_LIBRARY.search(text)
    if library:
        lib = library["lib"]
        return (
            f"the environment lacks the shared library {lib}",
            (system_package(f"`{lib}` (`apt-file search {lib}` names it)", "PACKAGE"),),
        )
    if _LOCALE.search(text):
        return (
            "the environment lacks the locale the step sets",
            (system_package("the locales", "locales-all"),),
        )
    program = _EXEC_MISSING.search(text)
    if program and "." not in program["tool"] and _EXEC_CONTEXT.search(text):
        tool = program["tool"]
        return f"the environment lacks the command {tool!r} a test runs", tool_missing(tool)
    return None


def _known_zone(key: str) -> bool:
    """Whether `key` names a real time zone (the host's database says; without one it is
    taken as real): a misspelt key is the project's bug."""
    try:
        import zoneinfo

        zones = zoneinfo.available_timezones()
    except Exception:  # no database on the host at all: nothing to check against
        return True
    return not zones or key in zones


_GENERATED_SOURCES = (".pyx", ".c", ".cpp", ".cc", ".rs", ".f90")
_CONFIG_FILES = ("pyproject.toml", "setup.py", "setup.cfg", "hatch.toml")
_CONFIG_LIMIT = 1024 * 1024


def generated_module(module: str, repo_root: str | Path) -> str | None:
    """Why the dotted `module`, absent from the tree while its package is there, is a file
    the project's setup makes (a version file, an extension module), or None.

    Absent and not made by setup (nothing names it), it is the project's own mistake,
    a misspelt import: a code bug, as before.
    """
    parts = [p for p in module.split(".") if p]
    if len(parts) < 2 or any(not p.isidentifier() for p in parts):
        return None
    root = Path(repo_root)
    if module_location(module, root) is not None:
        return None
    for source_root in SOURCE_ROOTS:
        package = root.joinpath(source_root, *parts[:-1])
        if not (package.is_dir() and any(package.glob("*.py"))):
            continue
        leaf = parts[-1]
        relative = (package / f"{leaf}.py").relative_to(root).as_posix()
        for suffix in _GENERATED_SOURCES:
            if (package / f"{leaf}{suffix}").is_file():
                built = (package / f"{leaf}{suffix}").relative_to(root).as_posix()
                return f"it is an extension module built at install from {built}"
        for name in _CONFIG_FILES:
            if relative in _bounded_text(root / name):
                return f"{name} names {relative}: the project's setup writes it"
        if _ignored(root, relative):
            return f"{relative} is in the project's .gitignore: a file its setup generates"
    return None


def _bounded_text(path: Path) -> str:
    try:
        if not path.is_file() or path.stat().st_size > _CONFIG_LIMIT:
            return ""
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def _ignored(root: Path, relative: str) -> bool:
    """Whether the top `.gitignore` lists `relative` (plain patterns; negations ignored)."""
    from fnmatch import fnmatch

    name = relative.rsplit("/", 1)[-1]
    for raw in _bounded_text(root / ".gitignore").splitlines():
        pattern = raw.strip()
        if not pattern or pattern.startswith(("#", "!")) or pattern.endswith("/"):
            continue
        if "/" in pattern.rstrip("/"):
            if fnmatch(relative, pattern.lstrip("/")) or fnmatch(relative, "*/" + pattern):
                return True
        elif fnmatch(name, pattern):
            return True
    return False


def generated_missing(module: str, why: str, repo_root: str | Path) -> tuple[str, ...]:
    """Next actions for a module the project's setup generates that the step lacks."""
    command = install_command(repo_root) or "pip install -e ."
    return (
        f"Run the project's install in the job's setup, which generates `{module}` ({why}): "
        f"under [job] in the job spec, `{spec_line('setup', [command])}`; the Docker "
        f"harness carries what setup generates in the tree into every run. {_AGAIN[0].upper()}"
        f"{_AGAIN[1:]}.",
    )
