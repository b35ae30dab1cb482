"""The pytest a lock file pins, read from real lock files' shapes (setup/lockedpytest.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from patchheal.harness.setup.lockedpytest import LockedPytest, locked_pytest

# uv's lock as click's is written: one table per pytest, each with the Pythons it is for.
UV_LOCK = """\
version = 1
revision = 3
requires-python = ">=3.9"
resolution-markers = [
    "python_full_version >= '3.10'",
    "python_full_version < '3.10'",
]

[[package]]
name = "pytest"
version = "8.3.5"
source = { registry = "https://pypi.org/simple" }
resolution-markers = [
    "python_full_version >= '3.10'",
]

[[package]]
name = "pytest"
version = "8.0.2"
source = { registry = "https://pypi.org/simple" }
resolution-markers = [
    "python_full_version < '3.10'",
]
"""

POETRY_LOCK = """\
[[package]]
name = "pytest"
version = "7.4.4"
description = "pytest: simple powerful testing with Python"
optional = false
python-versions = ">=3.7"

[[package]]
name = "pluggy"
version = "1.5.0"
"""

PDM_LOCK = """\
[metadata]
groups = ["default", "test"]

[[package]]
name = "pytest"
version = "8.1.1"
requires_python = ">=3.8"
groups = ["test"]
marker = "python_version >= \\"3.8\\""
"""

PYLOCK = """\
lock-version = "1.0"
created-by = "pip"

[[packages]]
name = "Pytest"
version = "8.2.0"
marker = "python_version >= '3.8'"

[[packages]]
name = "iniconfig"
version = "2.0.0"
"""


def _tree(tmp_path: Path, **files: str) -> Path:
    for name, text in files.items():
        (tmp_path / name.replace("_", ".")).write_text(text)
    return tmp_path


@pytest.mark.parametrize(
    ("python", "version"), [("3.11", "8.3.5"), ("3.10", "8.3.5"), ("3.9", "8.0.2")]
)
def test_uv_lock_gives_the_entry_for_the_images_python(
    tmp_path: Path, python: str, version: str
) -> None:
    (tmp_path / "uv.lock").write_text(UV_LOCK)
    assert locked_pytest(tmp_path, python) == LockedPytest(version, "uv.lock")


@pytest.mark.parametrize(
    ("name", "text", "version"),
    [
        ("poetry.lock", POETRY_LOCK, "7.4.4"),
        ("pdm.lock", PDM_LOCK, "8.1.1"),
        ("pylock.toml", PYLOCK, "8.2.0"),
    ],
)
def test_each_lock_format_names_its_pytest(
    tmp_path: Path, name: str, text: str, version: str
) -> None:
    (tmp_path / name).write_text(text)
    found = locked_pytest(tmp_path, "3.11")
    assert found == LockedPytest(version, name)
    assert found.requirement == f"pytest=={version}"


def test_uv_lock_comes_before_poetry_lock(tmp_path: Path) -> None:
    (tmp_path / "uv.lock").write_text(UV_LOCK)
    (tmp_path / "poetry.lock").write_text(POETRY_LOCK)
    assert locked_pytest(tmp_path, "3.11") == LockedPytest("8.3.5", "uv.lock")


@pytest.mark.parametrize(
    "text",
    [
        "",  # no lock content
        '[[package]]\nname = "pluggy"\nversion = "1.5.0"\n',  # no pytest locked
        "[[package]\nname = 'pytest'",  # not TOML
        "\udc80\x00binary",  # not even text (an undecodable byte)
        '[[package]]\nname = "pytest"\n',  # no version
        'package = "pytest"\n',  # not a list of tables
        # Two pytests whose markers both hold: which one CI gets is not known here.
        '[[package]]\nname = "pytest"\nversion = "8.0.0"\n'
        '[[package]]\nname = "pytest"\nversion = "8.1.0"\n',
        # A marker this cannot judge: no pin rather than a wrong one.
        '[[package]]\nname = "pytest"\nversion = "8.0.0"\nmarker = "python_version >>> 3"\n',
        # Locked only for Pythons the image is not.
        '[[package]]\nname = "pytest"\nversion = "8.0.0"\n'
        "resolution-markers = [\"python_full_version < '3.10'\"]\n",
    ],
)
def test_no_pin_when_the_lock_says_none_for_this_python(tmp_path: Path, text: str) -> None:
    (tmp_path / "uv.lock").write_bytes(text.encode("utf-8", "surrogateescape"))
    assert locked_pytest(tmp_path, "3.11") is None


def test_a_lock_file_that_is_a_link_or_a_folder_is_not_read(tmp_path: Path) -> None:
    outside = tmp_path / "outside.lock"
    outside.write_text(UV_LOCK)
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "uv.lock").symlink_to(outside)  # a candidate cannot point setup elsewhere
    (tree / "poetry.lock").mkdir()
    assert locked_pytest(tree, "3.11") is None
