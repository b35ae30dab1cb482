"""Issue 17: filling the wheelhouse must not run a candidate's build backend on the host."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest
from harness_support import engine, python_def, python_image

from patchheal.harness.config import HarnessDef
from patchheal.harness.setup import pipargs, wheelhouse

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
    args = pipargs.expand_requirement_files(["-r", "req/base.txt", "rich"], tmp_path)
    assert args == ["requests>=2", "-e", ".", "click", "rich"]
    (tmp_path / "loop.txt").write_text("-r loop.txt\n")
    with pytest.raises(wheelhouse.HarnessError, match="nested too deep"):
        pipargs.expand_requirement_files(["-r", "loop.txt"], tmp_path)
    with pytest.raises(wheelhouse.HarnessError, match="outside the worktree"):
        pipargs.expand_requirement_files(["-r", "/etc/hostname"], tmp_path)


def test_requirement_files_are_read_by_pips_line_rules(tmp_path: Path) -> None:
    """A marker keeps its quotes (shlex split it into four arguments), a continued line is one
    requirement (shlex raised "No escaped character"), a `--hash` stays in the file (the
    command line's pip has no such option), and a constraints file a requirements file names
    is taken relative to it."""
    (tmp_path / "req").mkdir()
    (tmp_path / "req" / "pins.txt").write_text("iniconfig<3\n")
    (tmp_path / "requirements.txt").write_text(
        'requests; python_version >= "3.8"  # marker\n'
        "attrs \\\n    >=22\n"
        "flask==2.0 --hash=sha256:abcd\n"
        "--requirement=req/more.txt\n"
    )
    (tmp_path / "req" / "more.txt").write_text("-c pins.txt\n-i https://index.example/simple\n")
    args = pipargs.expand_requirement_files(["-r", "requirements.txt"], tmp_path)
    pins = str((tmp_path / "req" / "pins.txt").resolve())
    assert args == [
        'requests; python_version >= "3.8"', "attrs     >=22", "flask==2.0",
        "-c", pins, "-i", "https://index.example/simple",
    ]  # fmt: skip


def test_a_constraints_file_named_in_a_requirements_file_stays_in_the_worktree(
    tmp_path: Path,
) -> None:
    """The host reads a constraints file and says each line it drops: one outside the
    worktree would show a host file's lines in the log."""
    (tmp_path / "requirements.txt").write_text("click\n-c /etc/passwd\n")
    with pytest.raises(wheelhouse.HarnessError, match="constraints file /etc/passwd: outside"):
        pipargs.expand_requirement_files(["-r", "requirements.txt"], tmp_path)
    # The job's own command line: the spec's author chose the file.
    own = pipargs.expand_requirement_files(["--constraint=/srv/pins.txt"], tmp_path)
    assert own == ["-c", "/srv/pins.txt"]
