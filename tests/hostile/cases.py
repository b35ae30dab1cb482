"""A candidate of the battery: a project, a runner, the files the candidate writes."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from tests.hostile.projects import Project, command

PY = sys.executable
# The console script next to the interpreter: `pytest` as a user types it.
_SCRIPT = Path(PY).with_name("pytest")
PYTEST = str(_SCRIPT) if _SCRIPT.exists() else "pytest"


@dataclass(frozen=True)
class Candidate:
    """One candidate: its edits (path -> new content) over `project`, run by `runner`."""

    name: str
    project: Project
    runner: str
    edits: Mapping[str, str]
    legit: bool
    family: str
    """A hostile family (payloads.FAMILIES), or what kind of real fix it is."""
    variant: str = ""
    form: str = ""
    proof: str = ""
    """How proof.py shows a hostile trick works on the bare runner (payloads.Variant)."""

    def command(self, *, python: str = PY, pytest: str = PYTEST) -> str:
        return command(self.project, self.runner, python=python, pytest=pytest)


def write_tree(root: Path, files: Mapping[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
