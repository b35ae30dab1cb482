"""Harness images: content-addressed tags, offline builds, health checks, host wheelhouse."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from harness_support import engine, python_def, python_image

from patchheal.errors import ImageBuildError, SpecError
from patchheal.harness.config import HarnessDef, load_harness_file
from patchheal.harness.docker.harness import DockerHarness
from patchheal.harness.engine import containers, ownership
from patchheal.harness.images import build as images
from patchheal.harness.images import recipe
from patchheal.harness.setup import pipargs

__all__ = ["engine", "python_def", "python_image"]


def harness_dir(tmp_path: Path, toml: str, files: dict[str, str] | None = None) -> HarnessDef:
    folder = tmp_path / "harnesses" / "probe"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "harness.toml").write_text(toml)
    for name, text in (files or {}).items():
        (folder / name).write_text(text)
    return load_harness_file(folder / "harness.toml")


def test_tag_is_a_hash_of_the_recipe(tmp_path: Path) -> None:
    one = harness_dir(tmp_path, '[image]\npackages = ["python3", "git"]\n')
    same = harness_dir(tmp_path, '[image]\npackages = ["git", "python3"]\n')
    other = harness_dir(tmp_path, '[image]\npackages = ["python3"]\n')
    assert recipe.image_tag(one) == recipe.image_tag(same)
    assert recipe.image_tag(one) != recipe.image_tag(other)
    assert recipe.image_tag(one).startswith("patchheal/probe:")


def test_tag_follows_the_files_beside_a_dockerfile(tmp_path: Path) -> None:
    toml = '[image]\npackages = ["python3"]\ndockerfile = "Dockerfile"\n'
    first = recipe.image_tag(harness_dir(tmp_path, toml, {"Dockerfile": "FROM x\n", "a.sh": "1"}))
    second = recipe.image_tag(harness_dir(tmp_path, toml, {"a.sh": "2"}))
    assert first != second


@pytest.mark.parametrize(
    ("command", "args"),
    [
        ("pip install -e .[test]", [["-e", ".[test]"]]),
        ("python -m pip install -U pytest==8.0 && make", [["-U", "pytest==8.0"]]),
        ("cd x; pip3 install -r requirements.txt", [["-r", "requirements.txt"]]),
        ("npm ci", []),
    ],
)
def test_pip_install_commands_are_found(command: str, args: list[list[str]]) -> None:
    assert pipargs.pip_install_args([command]) == args


def test_local_projects_expand_to_their_static_requirements(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["hatchling"]\nbuild-backend = "hatchling.build"\n'
        '[project]\nname = "x"\nversion = "1"\n'
        'dependencies = ["attrs>=22"]\n[project.optional-dependencies]\ntest = ["pytest>=7"]\n'
    )
    install = ["-U", "-e", ".[test]", "--user", "-r", "req.txt"]
    args = pipargs.download_args(install, tmp_path)
    assert args == ["attrs>=22", "pytest>=7", "-r", "req.txt"]
    # Build requirements are downloaded apart (transitively, whatever the install's flags),
    # with what the backend's editable hook asks for at build time.
    assert pipargs.build_requirements(install, tmp_path) == ["hatchling", "editables"]


@pytest.mark.parametrize(
    ("build_system", "expected"),
    [
        # setuptools before 70.1 asks for wheel from its build hooks, named or not.
        (
            'requires = ["setuptools==69.5.1", "setuptools-scm==8.0.4"]\n'
            'build-backend = "setuptools.build_meta"',
            ["setuptools==69.5.1", "setuptools-scm==8.0.4", "wheel"],
        ),
        ('requires = ["setuptools>=61", "wheel"]', ["setuptools>=61", "wheel"]),  # legacy
        ('requires = ["flit_core>=3.4"]\nbuild-backend = "flit_core.buildapi"', ["flit_core>=3.4"]),
        (None, ["setuptools>=40.8.0", "wheel"]),  # no pyproject.toml
    ],
)
def test_build_requirements_add_what_the_backends_hooks_ask_for(
    tmp_path: Path, build_system: str | None, expected: list[str]
) -> None:
    if build_system is not None:
        (tmp_path / "pyproject.toml").write_text(f"[build-system]\n{build_system}\n")
    assert pipargs.build_requirements(["-e", "."], tmp_path) == expected


def test_a_file_the_image_ships_is_read_from_the_harness_folder_on_the_host(
    tmp_path: Path,
) -> None:
    """The airflow harness pins Airflow with a constraints file its Dockerfile copies into
    the image: the host's `pip download` reads the same file beside harness.toml, and a
    constraints path is never taken for a local project to build."""
    defn = harness_dir(
        tmp_path,
        '[image]\nref = "unused"\n[deps]\nkind = "pip"\n'
        'image_files = { "/opt/pins/c.txt" = "c.txt" }\n',
        {"c.txt": "attrs==22.2.0\n"},
    )
    (args,) = pipargs.pip_install_args(["pip install attrs -c /opt/pins/c.txt"])
    assert pipargs.dynamic_projects(args, tmp_path) == []
    host = pipargs.host_paths(pipargs.download_args(args, tmp_path), defn)
    assert host == ["attrs", "-c", str(tmp_path / "harnesses" / "probe" / "c.txt")]
    assert pipargs.host_paths(["--constraint=/opt/pins/c.txt"], defn) == [
        f"--constraint={tmp_path / 'harnesses' / 'probe' / 'c.txt'}"
    ]
    with pytest.raises(SpecError, match="inside the harness folder"):
        harness_dir(tmp_path, '[image]\nref = "x"\n[deps]\nimage_files = { "/a" = "../b" }\n')


@pytest.mark.docker
def test_health_check_failure_is_an_image_build_error(
    engine: Any, python_image: str, tmp_path: Path
) -> None:
    defn = harness_dir(
        tmp_path,
        '[image]\nref = "unused"\ndockerfile = "Dockerfile"\npull = "never"\ncheck = "exit 7"\n',
        {"Dockerfile": "ARG BASE_IMAGE\nFROM ${BASE_IMAGE}\nRUN echo layered > /layer\n"},
    )
    defn = defn.model_copy(update={"image": defn.image.model_copy(update={"ref": python_image})})
    with pytest.raises(ImageBuildError, match="health check"):
        images.ensure_image(engine, defn)
    assert not images.exists(engine, recipe.image_tag(defn))


@pytest.mark.docker
def test_dockerfile_on_the_offline_base_and_a_failing_build(
    engine: Any, python_image: str, tmp_path: Path
) -> None:
    toml = '[image]\nref = "REF"\ndockerfile = "Dockerfile"\ncheck = "cat /layer"\n'
    toml = toml.replace("REF", python_image)
    good = harness_dir(tmp_path, toml, {"Dockerfile": "ARG BASE_IMAGE\nFROM ${BASE_IMAGE}\n"
                                        "RUN echo layered > /layer\n"})  # fmt: skip
    tag = images.ensure_image(engine, good)
    try:
        assert tag == recipe.image_tag(good)
        # The build's throwaway tag goes once the image has its own.
        built = engine.images.get(tag)
        assert not [t for t in built.tags if t.startswith(f"{ownership.REPOSITORY}-tmp/")]
        assert images.ensure_image(engine, good) == tag  # cached: no second build
    finally:
        containers.remove_image(engine, tag)
    bad = harness_dir(tmp_path, toml, {"Dockerfile": "ARG BASE_IMAGE\nFROM ${BASE_IMAGE}\n"
                                       "RUN echo broken-step && exit 4\n"})  # fmt: skip
    with pytest.raises(ImageBuildError, match="broken-step"):
        images.ensure_image(engine, bad)


@pytest.mark.docker
@pytest.mark.slow
def test_host_runtime_image_runs_the_hosts_python_read_only(
    engine: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATCHHEAL_IMAGE_BUILDERS", "host-runtime")
    defn = harness_dir(
        tmp_path,
        f'name = "hostrt-{os.getpid()}"\n[image]\npackages = ["python3"]\n'
        "check = \"python3 -c 'import sys'\"\n",
    )
    tag = images.ensure_image(engine, defn)
    harness = DockerHarness(defn, job_id=f"hostrt-{os.getpid()}")
    tree = tmp_path / "wt"
    tree.mkdir()
    try:
        command = "python3 -c 'import sys; print(sys.version_info[0])'; "
        command += "touch /usr/x 2>/dev/null || echo ro-usr"
        result = harness.run(command, tree, timeout=60, idle_timeout=60)
    finally:
        harness.close()
        containers.remove_image(engine, tag)
    assert result.output.split()[:2] == ["3", "ro-usr"], result.output


@pytest.mark.docker
@pytest.mark.slow
def test_rebuild_from_scratch_proves_the_offline_path(
    engine: Any, python_image: str, tmp_path: Path
) -> None:
    """Invariant: with no registry, a base image is built from Debian packages alone."""
    defn = harness_dir(
        tmp_path,
        f'name = "scratch-{os.getpid()}"\n[image]\npackages = ["python3-minimal"]\n'
        "check = \"python3 -c 'import sys'\"\n",
    )
    said: list[str] = []
    tag = images.ensure_image(engine, defn, say=said.append, from_scratch=True)
    try:
        assert tag.startswith("patchheal-tmp/")
        assert any("mmdebstrap" in s or "debootstrap" in s for s in said)
        assert any("health check passed" in s for s in said)
        assert not images.exists(engine, recipe.image_tag(defn))  # the cache is not touched
    finally:
        containers.remove_image(engine, tag)
    assert not images.exists(engine, tag)
