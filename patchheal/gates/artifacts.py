"""Build outputs and binaries in a candidate: a patch carries source, not artifacts.

No gate, tripwire or twin reads inside a binary file, so anything can ride in
one: an unchecked-hash `.pyc` under `__pycache__/`, compiled from a fixed
module, was once judged `fixed` and published while the branch's source kept
the bug. A candidate that adds or changes a binary file (a git binary patch,
or text with NUL bytes), compiled Python (`.pyc`, `.pyo`, anything under
`__pycache__/`), a native or packaged build output, a `.pth` file (which
`site` runs at start-up, before the tripwire is armed) or package metadata
(`*.egg-info/`, `*.dist-info/`: a `pytest11` entry point there loads a module
as a pytest plugin) is refused, unless the
job allows that path (`[policy] allow_artifacts`). Deleting one is allowed: a
stray committed `.pyc` removed makes the tree more source-only, not less.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from patchheal.workspace import diffs

if TYPE_CHECKING:
    from unidiff.patch import PatchedFile

# (pattern on the repo-relative path, what the file is), the first match names it.
_BUILD_OUTPUTS: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(pattern, re.IGNORECASE), what)
    for pattern, what in (
        (r"(?:^|/)__pycache__/", "a file under __pycache__/"),
        (r"\.py[co]$", "compiled Python bytecode"),
        (r"\.(?:so(?:\.\d+)*|pyd|dll|dylib)$", "a shared library"),
        (r"\.(?:o|obj|a|lib)$", "a native object file or archive"),
        (r"\.(?:class|jar)$", "compiled Java"),
        (r"\.(?:whl|egg)$", "a built Python package"),
        # Not a build output, but no source either: `site` runs its `import` lines when an
        # interpreter that reads that directory starts, before any of patchheal's checks.
        (r"\.pth$", "a Python path-configuration file (run at interpreter start-up)"),
        # Installed-package metadata in the tree: with the worktree on sys.path (`python -m
        # pytest`), its `pytest11` entry point loads any module of the project as a plugin.
        (
            r"(?:^|/)[^/]+\.(?:egg|dist)-info(?:/|$)",
            "package metadata (its entry points load plugins when a runner starts)",
        ),
    )
)


def artifact_reasons(
    patchset: Iterable[PatchedFile], allowed: Callable[[str], str | None]
) -> list[str]:
    """One sentence per file the candidate adds or changes that is a binary or a build
    output, unless `allowed(path)` names the job's pattern that lets it in."""
    reasons: list[str] = []
    for patched in patchset:
        if diffs.file_status(patched) == "deleted":
            continue
        paths = diffs.file_paths(patched)
        if not paths:
            continue
        path = paths[-1]
        what = _what(patched, path)
        if what and not allowed(path):
            reasons.append(
                f"{path} is {what}: a candidate must change source, not carry binaries or "
                "build outputs (a job that needs this file lists it in [policy] allow_artifacts)"
            )
    return reasons


def _what(patched: PatchedFile, path: str) -> str:
    for pattern, what in _BUILD_OUTPUTS:
        if pattern.search(path):
            return what
    if patched.is_binary_file:
        return "a binary file (a git binary patch)"
    if any("\0" in line.value for hunk in patched for line in hunk if line.is_added):
        return "a binary file (its new lines hold NUL bytes)"
    return ""
