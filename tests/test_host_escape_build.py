"""Issue 17: filling the wheelhouse must not run a candidate's build backend on the host."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest
from harness_support import engine, python_def, python_image

from patchheal.harness import wheelhouse
from patchheal.harness.config import HarnessDef

__all__ = ["engine", "python_def", "python_image"]

pytestmark = [pytest.mark.docker, pytest.mark.slow]


def hostile_project(root: Path, marker: Path) -> Path:
    """A project whose in-tree build backend writes `marker` wherever it runs."""
    root.mkdir()
    (root / "pyproject.toml").write_text(
        '[build-system]\nrequires = []\nbuild-backend = "backend"\nbackend-path = ["."]\n'
        '[project]\nname = "evil"\nversion = "0.1"\ndynamic = ["dependencies"]\n'
    )
    (root / "backend.py").write_text(
        textwrap.dedent(f"""
        import os
        try:
            with open({str(marker)!r}, "w") as out:
                out.write("the build backend ran here")
        except OSError:
            pass  # in the sandbox the host path does not exist

        def get_requires_for_build_wheel(config_settings=None):
            return []

        def prepare_metadata_for_build_wheel(directory, config_settings=None):
            info = os.path.join(directory, "evil-0.1.dist-info")
            os.makedirs(info)
            with open(os.path.join(info, "METADATA"), "w") as out:
                out.write("Metadata-Version: 2.1\\nName: evil\\nVersion: 0.1\\n"
                          "Requires-Dist: iniconfig\\n"
                          "Requires-Dist: pluggy; extra == 'test'\\n"
                          "Requires-Dist: six; extra == 'docs'\\n")
            return "evil-0.1.dist-info"
        """)
    )
    return root


def test_a_dynamic_project_is_read_in_a_sandbox_not_built_on_the_host(
    engine: Any,
    python_def: HarnessDef,
    python_image: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PATCHHEAL_CACHE_DIR", str(tmp_path / "cache"))
    marker = tmp_path / "pwned"
    project = hostile_project(tmp_path / "project", marker)
    said: list[str] = []
    house = wheelhouse.fill(
        engine, python_def, python_image, project, ["pip install -e '.[test]'"], said.append
    )
    assert not marker.exists(), "the candidate's build backend ran on the host"
    names = {p.name.split("-")[0].lower() for p in house.iterdir()}
    # Legitimate use still works: the backend's requirements (and the extra's) arrive.
    assert {"iniconfig", "pluggy"} <= names, (names, said)
    assert "six" not in names
    assert any("sandbox" in line for line in said)


def test_a_requirements_file_naming_the_project_does_not_build_it_on_the_host(
    engine: Any,
    python_def: HarnessDef,
    python_image: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`pip install -r requirements.txt` whose file says `-e .[test]` (nested, even)."""
    monkeypatch.setenv("PATCHHEAL_CACHE_DIR", str(tmp_path / "cache"))
    marker = tmp_path / "pwned"
    project = hostile_project(tmp_path / "project", marker)
    (project / "requirements").mkdir()
    (project / "requirements" / "dev.txt").write_text("# the project, editable\n-e .[test]\n")
    (project / "requirements.txt").write_text("-r requirements/dev.txt  # nested\n")
    said: list[str] = []
    house = wheelhouse.fill(
        engine, python_def, python_image, project, ["pip install -r requirements.txt"], said.append
    )
    assert not marker.exists(), "the candidate's build backend ran on the host"
    names = {p.name.split("-")[0].lower() for p in house.iterdir()}
    assert {"iniconfig", "pluggy"} <= names, (names, said)


def test_requirement_files_are_expanded_and_kept_inside_the_worktree(tmp_path: Path) -> None:
    (tmp_path / "req").mkdir()
    (tmp_path / "req" / "base.txt").write_text("requests>=2  # pinned below\n-r more.txt\n")
    (tmp_path / "req" / "more.txt").write_text("-e .\n\n# comment\nclick\n")
    args = wheelhouse.expand_requirement_files(["-r", "req/base.txt", "rich"], tmp_path)
    assert args == ["requests>=2", "-e", ".", "click", "rich"]
    (tmp_path / "loop.txt").write_text("-r loop.txt\n")
    with pytest.raises(wheelhouse.HarnessError, match="nested too deep"):
        wheelhouse.expand_requirement_files(["-r", "loop.txt"], tmp_path)
    with pytest.raises(wheelhouse.HarnessError, match="outside the worktree"):
        wheelhouse.expand_requirement_files(["-r", "/etc/hostname"], tmp_path)
