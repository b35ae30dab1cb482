"""Bounds on a job spec's raw data, checked before pydantic, the file system or git see it.

Each check here exists because a malformed spec once crashed or hung a run
instead of being refused: a table nested thousands deep overflows the
recursion of a merge or of pydantic, a NUL byte makes every `os` call raise
`ValueError`, a path component over 255 bytes makes `stat` raise, a FIFO
where a file is expected blocks the reader forever.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from patchheal.errors import SpecError

# A job spec is a few KB and a pyproject.toml tens of KB. tomllib reads ~3-6 s per MiB of
# many short keys on a loaded machine, so the cap also bounds the parser's time.
MAX_SPEC_BYTES = 256 * 1024
# Parts of one dotted key or table name (`[a.b.c]`, `a.b.c = 1`). tomllib's time grows
# with the square of it: a 200 KB spec naming a 100,000-part table took 18-27 s to be
# refused. A spec nests at most MAX_NESTING deep, so more parts than this is no spec
# (nor any tool's table in a pyproject.toml).
MAX_KEY_PARTS = 64
MAX_NESTING = 16
MAX_STRING_CHARS = 64 * 1024
MAX_ITEMS = 1000
MAX_PATH_CHARS = 4096
MAX_NAME_BYTES = 255
MAX_REF_CHARS = 256
MAX_GLOB_CHARS = 1024
# As deep as harness/results/untrusted.py matches a declared results glob.
MAX_GLOB_PARTS = 32

# The spec's top-level tables and the type each must have.
TABLES: dict[str, type] = {
    "job": dict,
    "steps": list,
    "regression": dict,
    "proposer": dict,
    "proposers": list,
    "budget": dict,
    "policy": dict,
}


def read_spec_bytes(path: Path) -> bytes:
    """The bytes of a spec file: a regular file of at most MAX_SPEC_BYTES (a FIFO would block)."""
    try:
        info = path.stat()
    except (OSError, ValueError) as exc:
        raise SpecError(f"cannot read job spec {_show(path)}: {_reason(exc)}") from None
    if not stat.S_ISREG(info.st_mode):
        raise SpecError(f"job spec {_show(path)} is not a regular file")
    if info.st_size > MAX_SPEC_BYTES:
        raise SpecError(f"job spec {_show(path)} is over {MAX_SPEC_BYTES} bytes")
    try:
        return path.read_bytes()
    except OSError as exc:
        raise SpecError(f"cannot read job spec {_show(path)}: {_reason(exc)}") from None


# One part of a dotted key: bare, or quoted (escapes kept inside a basic string).
_PART = r"""(?:[A-Za-z0-9_-]++|"(?:\\.|[^"\\\n])*+"|'[^'\n]*+')"""
# More than MAX_KEY_PARTS parts joined by dots, where TOML has keys: at the start of a
# line, or after the `[` of a table name or the `{` or `,` of an inline table (a string
# value holding dotted words is not a key; an attacker's key has to be in such a place
# for tomllib to read it as one). A quoted part counts (tomllib is as slow on
# `"a"."a"...`). Possessive, so a failed start never backtracks, and starts are only
# where keys can be: the scan stays linear, a 1 MiB spec read in well under a second.
_LONG_KEY = re.compile(
    r"(?:^|[\[{,])[ \t]*+" + _PART + r"(?:[ \t]*+\.[ \t]*+" + _PART + f"){{{MAX_KEY_PARTS}}}",
    re.MULTILINE,
)


def check_toml_text(text: str, source: str) -> None:
    """Refuse TOML text the parser would take unbounded time on, before it is parsed:
    a dotted key or table name of more than MAX_KEY_PARTS parts."""
    found = _LONG_KEY.search(text)
    if found:
        line = text.count("\n", 0, found.start()) + 1
        raise SpecError(
            f"invalid job spec {source}: line {line}: a dotted key or table name of more "
            f"than {MAX_KEY_PARTS} parts (a spec nests at most {MAX_NESTING} deep)"
        )


def check_raw(data: Any, source: str) -> None:
    """Refuse data whose shape no spec model could accept without crashing or hanging."""
    if not isinstance(data, dict):
        raise SpecError(f"invalid job spec {source}: the top level must be a table")
    for where, value, depth in _walk(data):
        if depth > MAX_NESTING:
            raise SpecError(f"invalid job spec {source}: {where}: nested deeper than {MAX_NESTING}")
        if isinstance(value, str):
            if "\0" in value:
                raise SpecError(f"invalid job spec {source}: {where}: contains a NUL byte")
            if len(value) > MAX_STRING_CHARS:
                raise SpecError(
                    f"invalid job spec {source}: {where}: longer than {MAX_STRING_CHARS} characters"
                )
        elif isinstance(value, list | dict) and len(value) > MAX_ITEMS:
            raise SpecError(f"invalid job spec {source}: {where}: more than {MAX_ITEMS} entries")
    for name, kind in TABLES.items():
        if name in data and not isinstance(data[name], kind):
            shape = "a table" if kind is dict else "an array of tables"
            raise SpecError(f"invalid job spec {source}: [{name}] must be {shape}")


def _walk(data: Any) -> Iterator[tuple[str, Any, int]]:
    """(dotted location, value, depth) of every value, iteratively: no recursion to overflow."""
    stack: list[tuple[str, Any, int]] = [("", data, 0)]
    while stack:
        where, value, depth = stack.pop()
        yield where or "(top level)", value, depth
        if depth > MAX_NESTING:
            continue  # reported by the caller; do not descend further
        if isinstance(value, dict):
            for key, item in value.items():
                if isinstance(key, str) and "\0" in key:
                    raise SpecError(f"a key under {where or '(top level)'} contains a NUL byte")
                stack.append((f"{where}.{key}" if where else str(key), item, depth + 1))
        elif isinstance(value, list):
            stack.extend((f"{where}.{i}", item, depth + 1) for i, item in enumerate(value))


def check_path(value: str, where: str) -> Path:
    """A path the file system can take: bounded length and components, `~user` that exists."""
    if len(value) > MAX_PATH_CHARS:
        raise SpecError(f"{where}: path longer than {MAX_PATH_CHARS} characters")
    try:
        path = Path(value).expanduser()
    except RuntimeError:
        raise SpecError(f"{where}: {value!r}: no such user's home directory") from None
    long = [p for p in path.parts if len(os.fsencode(p)) > MAX_NAME_BYTES]
    if long:
        raise SpecError(f"{where}: a path component is longer than {MAX_NAME_BYTES} bytes")
    return path


def resolve(path: Path, where: str) -> Path:
    """`path` made absolute with its symlinks resolved; a symlink loop (pathlib raises
    RuntimeError) or a name the file system refuses is a SpecError."""
    try:
        return path.resolve()
    except (RuntimeError, OSError) as exc:
        why = "a symlink loop" if isinstance(exc, RuntimeError) else _reason(exc)
        raise SpecError(f"{where}: cannot use {_show(path)}: {why}") from None


def check_name(value: str, where: str) -> None:
    """A name that becomes a path component (a harness name): bounded like a path."""
    check_path(value, where)
    if len(os.fsencode(value)) > MAX_PATH_CHARS:
        raise SpecError(f"{where}: longer than {MAX_PATH_CHARS} bytes")


def results_glob_problem(pattern: str) -> str | None:
    """Why a step's `results` glob cannot be matched in a worktree, or None."""
    parts = [p for p in pattern.replace("\\", "/").split("/") if p not in ("", ".")]
    if not parts:
        return "matches no file (empty, '.' or only separators)"
    if len(parts) > MAX_GLOB_PARTS:
        return f"more than {MAX_GLOB_PARTS} path components"
    if any(len(os.fsencode(p)) > MAX_NAME_BYTES for p in parts):
        return f"a component is longer than {MAX_NAME_BYTES} bytes"
    # pathlib's syntax, matched name by name with fnmatch (harness/results/untrusted.py), not
    # gitignore's: fnmatch reads any bracket text, so only the length can be wrong.
    if len(pattern) > MAX_GLOB_CHARS:
        return f"longer than {MAX_GLOB_CHARS} characters"
    return None


def check_regular_file(path: Path, where: str) -> None:
    """An existing path given as a file must be a regular file (a FIFO or device blocks)."""
    try:
        info = path.stat()
    except FileNotFoundError:
        return
    except (OSError, ValueError, RuntimeError) as exc:
        raise SpecError(f"{where}: cannot use {_show(path)}: {_reason(exc)}") from None
    if not stat.S_ISREG(info.st_mode):
        raise SpecError(f"{where}: {_show(path)} is not a regular file")


# A revision (`main`, `v1.2`, `HEAD~1`, a commit id): no whitespace or control
# characters, and no leading '-', which git would read as an option.
_BAD_REF = re.compile(r"[\x00-\x20\x7f]|^-")


def check_ref(value: str, where: str) -> None:
    if not value or len(value) > MAX_REF_CHARS or _BAD_REF.search(value):
        raise SpecError(
            f"{where}: {_short(value)} is not a usable git revision "
            f"(1-{MAX_REF_CHARS} characters, no whitespace or control characters, "
            "not starting with '-')"
        )


def normal_glob(pattern: str) -> str:
    """A policy glob as the gitignore matcher reads it (`./x` is `x`)."""
    return pattern.strip().removeprefix("./")


def glob_problem(pattern: str) -> str | None:
    """Why the policy gate could not match with `pattern`, or None (a blank one is skipped).

    Compiled by the gate's own matcher (pathspec, gitignore rules), so a pattern
    that loads here is one the gate can use.
    """
    if len(pattern) > MAX_GLOB_CHARS:
        return f"longer than {MAX_GLOB_CHARS} characters"
    if not pattern.strip():
        return None
    import pathspec  # only where a spec sets globs: loading the spec models stays light

    try:
        compiled = pathspec.GitIgnoreSpec.from_lines([normal_glob(pattern)]).patterns
    except (ValueError, re.error) as exc:
        return f"not a gitignore pattern: {exc}"
    if not compiled or compiled[0].regex is None:
        return "matches nothing under gitignore rules ('#' comment, lone '/', unclosed '[')"
    return None


def _short(value: str) -> str:
    return repr(value if len(value) <= 80 else value[:77] + "...")


def _show(path: Path) -> str:
    return _short(str(path))


def _reason(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc)
