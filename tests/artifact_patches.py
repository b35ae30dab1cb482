"""Candidates that carry artifacts, built as the containment probe built them (issue 33)."""

from __future__ import annotations

import py_compile
import subprocess
import sys
from pathlib import Path


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=cwd, check=True, capture_output=True, text=True
    ).stdout


def staged_binary_diff(repo: Path, files: dict[str, bytes | None]) -> str:
    """The git binary diff (`--binary`) that writes `files` (None deletes) into `repo`,
    the repository left clean."""
    for rel, data in files.items():
        path = repo / rel
        if data is None:
            path.unlink()
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
    git(repo, "add", "-A", "-f")
    diff = git(repo, "diff", "--cached", "--binary")
    git(repo, "reset", "-q", "--hard", "HEAD")
    git(repo, "clean", "-fdxq")
    return diff


def unchecked_pyc(source: str, work: Path, name: str) -> bytes:
    """`source` compiled the probe's way: an unchecked-hash .pyc, which Python loads
    without ever comparing it with the .py beside it."""
    src = work / f"{name}.py"
    src.parent.mkdir(parents=True, exist_ok=True)
    src.write_text(source)
    out = work / f"{name}.pyc"
    py_compile.compile(
        str(src),
        cfile=str(out),
        doraise=True,
        invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH,
    )
    return out.read_bytes()


def pycache_name(module: str) -> str:
    """`pricing/rules` → `pricing/__pycache__/rules.cpython-311.pyc` (this Python's tag)."""
    folder, _, stem = module.rpartition("/")
    prefix = f"{folder}/" if folder else ""
    return f"{prefix}__pycache__/{stem}.{sys.implementation.cache_tag}.pyc"
