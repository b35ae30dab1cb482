"""YAML (workflows, compose files) is read through a bounded loader (issue 25, item 6)."""

from __future__ import annotations

import os
import resource
from pathlib import Path

import pytest

from patchheal.errors import SpecError
from patchheal.intake.yamlsafe import MAX_DEPTH, load_yaml_file
from tests.specfuzz import ALIAS_BOMB


def _file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "ci.yml"
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("jobs: " + "[" * 100_000 + "]" * 100_000, f"nested deeper than {MAX_DEPTH}"),
        ("jobs: " + "{a: " * 3000 + "1" + "}" * 3000, f"nested deeper than {MAX_DEPTH}"),
        (ALIAS_BOMB + "jobs: {x: *i}\n", "aliases expand to more than"),
        ("jobs: &j {test: {again: *j}}\n", "a cycle"),
        ("jobs: [unclosed\n", "is not valid YAML"),
        ("\udcff", "cannot read"),
    ],
)
def test_hostile_yaml_is_refused_in_one_line(tmp_path: Path, text: str, why: str) -> None:
    """A workflow nested 100,000 deep raised RecursionError; a 412-byte alias bomb grew to
    5.7 GB, then MemoryError. Each is now a SpecError (exit 2) naming what is wrong, and
    loading the bomb stays small."""
    path = tmp_path / "ci.yml"
    path.write_bytes(text.encode("utf-8", "surrogateescape"))
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(SpecError, match=why) as caught:
        load_yaml_file(path, "workflow")
    assert "\n" not in str(caught.value)
    grown_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    assert grown_kib < 200_000


def test_a_fifo_or_an_oversized_file_is_refused(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo.yml"
    os.mkfifo(fifo)
    with pytest.raises(SpecError, match="not a regular file"):
        load_yaml_file(fifo, "workflow")
    big = _file(tmp_path, "a: " + "x" * (2 * 1024 * 1024))
    with pytest.raises(SpecError, match="over"):
        load_yaml_file(big, "workflow")


def test_ordinary_anchors_and_aliases_still_load(tmp_path: Path) -> None:
    """GitHub Actions workflows may use anchors: a shared step list loads as before."""
    path = _file(
        tmp_path,
        "x-steps: &steps\n  - run: pip install -e .\n  - run: pytest -q\n"
        "jobs:\n  a: {runs-on: ubuntu-latest, steps: *steps}\n"
        "  b: {runs-on: ubuntu-latest, steps: *steps}\n",
    )
    data = load_yaml_file(path, "workflow")
    assert data["jobs"]["b"]["steps"][1] == {"run": "pytest -q"}
