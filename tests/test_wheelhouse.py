"""The offline wheelhouse: build requirements resolved transitively, for the image's Python."""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from harness_support import engine, python_def, python_image

from patchheal.errors import DependencySetupError
from patchheal.harness.config import HarnessDef
from patchheal.harness.docker.harness import DockerHarness
from patchheal.harness.engine import containers
from patchheal.harness.setup.markers import for_python
from patchheal.harness.setup.pipargs import build_requirements, download_args
from patchheal.workspace.worktrees import JobWorkspace

__all__ = ["engine", "python_def", "python_image"]

SCM_PROJECT = {
    "pyproject.toml": '[build-system]\nrequires = ["setuptools>=64", "setuptools-scm>=8"]\n'
    'build-backend = "setuptools.build_meta"\n\n'
    '[project]\nname = "scmpkg"\ndynamic = ["version"]\n\n[tool.setuptools_scm]\n',
    "src/scmpkg/__init__.py": "VALUE = 7\n",
}


@pytest.fixture(autouse=True)
def _shared_cache(
    monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory
) -> None:
    # One wheelhouse for the session, not one per test's fresh HOME.
    root = tmp_path_factory.getbasetemp() / "patchheal-cache"
    monkeypatch.setenv("PATCHHEAL_CACHE_DIR", str(root))


def _job_tree(repo: Path, job_id: str) -> tuple[JobWorkspace, Path]:
    """A job worktree as the loop makes one (setup reads an export of its commit)."""
    workspace = JobWorkspace(repo, "main", job_id)
    workspace.open()
    return workspace, workspace.worktree("verify")


@pytest.mark.docker
@pytest.mark.slow
def test_a_setuptools_scm_project_installs_editable_offline(
    python_image: str, python_def: HarnessDef, make_repo: Any
) -> None:
    """Regression (issue 16): `pip install --no-deps -e .` of a setuptools-scm project in
    the offline setup container. Its build requirements have requirements of their own
    (setuptools-scm needs vcs-versioning, with a pre-release constraint), which `--no-deps`
    must not keep out of the wheelhouse; and the version comes from git, which the setup
    container must see."""
    repo = make_repo(SCM_PROJECT)
    job_id = f"scm-{os.getpid()}"
    workspace, tree = _job_tree(repo, job_id)
    setup = [f"pip install --no-deps -e . && echo {uuid.uuid4().hex}"]
    h = DockerHarness(python_def, job_id=job_id, setup=setup)
    try:
        h.prepare(tree)
        result = h.run(
            'python -c \'import importlib.metadata as m, scmpkg; print(m.version("scmpkg"), '
            "scmpkg.VALUE)'",
            tree,
            timeout=120,
            idle_timeout=120,
        )
        assert result.exit_code == 0, result.output
        version, value = result.output.split()[-2:]
        assert value == "7"
        assert version.startswith("0.1.dev"), version  # setuptools-scm's, from git
        containers.remove_image(h.client, h.run_image(tree))
    finally:
        h.close()
        workspace.destroy()


def test_build_requirements_ignore_no_deps_and_keep_where_to_look(tmp_path: Path) -> None:
    """Build requirements are downloaded apart from the install's own flags: `--no-deps`
    (which would keep their own requirements out) is not passed, an index is."""
    (tmp_path / "pyproject.toml").write_text(SCM_PROJECT["pyproject.toml"])
    args = ["--no-deps", "--index-url", "http://127.0.0.1:9/simple", "-e", "."]
    assert build_requirements(args, tmp_path, "3.11") == [
        "--index-url",
        "http://127.0.0.1:9/simple",
        "setuptools>=64",
        "setuptools-scm>=8",
        "wheel",  # what setuptools' hooks ask for before 70.1
    ]
    # The project itself and its build requirements never reach the install's download.
    assert download_args(args, tmp_path, "3.11") == [
        "--no-deps",
        "--index-url",
        "http://127.0.0.1:9/simple",
    ]


def test_markers_are_evaluated_for_the_images_python_not_the_hosts(tmp_path: Path) -> None:
    reqs = [
        "tomli>=1; python_version < '3.11'",
        "exceptiongroup; python_version < '3.11'",
        "typing-extensions>=4; python_version >= '3.12'",
        "plain>=2",
    ]
    assert for_python(reqs, "3.10") == ["tomli>=1", "exceptiongroup", "plain>=2"]
    assert for_python(reqs, "3.12") == ["typing-extensions>=4", "plain>=2"]
    (tmp_path / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools", "tomli; python_version < \\"3.11\\""]\n'
        '[project]\nname = "p"\nversion = "1"\ndependencies = ["a; python_version < \\"3.11\\""]\n'
    )
    assert build_requirements(["."], tmp_path, "3.10") == ["setuptools", "tomli", "wheel"]
    assert build_requirements(["."], tmp_path, "3.11") == ["setuptools", "wheel"]
    assert download_args(["."], tmp_path, "3.11") == []


def test_an_extra_that_names_the_project_itself_is_read_from_the_project(
    tmp_path: Path,
) -> None:
    """attrs' `tests` extra names `attrs[tests-mypy]`: downloaded as is, the host fetched a
    release of attrs and not mypy, and the offline install failed ("No matching distribution
    found for mypy>=1.11.1")."""
    (tmp_path / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["hatchling"]\n'
        '[project]\nname = "Our_Pkg"\nversion = "1"\ndependencies = ["a"]\n'
        "[project.optional-dependencies]\n"
        'tests-mypy = ["mypy>=1.11.1; python_version >= \'3.9\'", "our-pkg[tests]"]\n'
        'tests = ["our.pkg[tests-mypy]", "hypothesis"]\n'
        'cov = ["our-pkg[tests]", "coverage"]\n'
    )
    assert download_args(["-e", ".[cov]"], tmp_path, "3.11") == [
        "a",
        "coverage",
        "hypothesis",
        "mypy>=1.11.1",
    ]


def test_a_missing_dependency_is_named() -> None:
    output = (
        "ERROR: Could not find a version that satisfies the requirement nosuch-pkg>=1 "
        "(from versions: none)\nERROR: No matching distribution found for nosuch-pkg>=1\n"
    )
    error = DependencySetupError.from_pip("pip download failed", output)
    assert error.missing == ("nosuch-pkg>=1",)
    assert str(error).startswith("pip download failed: cannot get nosuch-pkg>=1\n")


@pytest.fixture
def empty_index(tmp_path: Path) -> Iterator[str]:
    """A package index on loopback that has no packages at all (every name is a 404)."""
    (tmp_path / "index" / "simple").mkdir(parents=True)
    handler = functools.partial(SimpleHTTPRequestHandler, directory=str(tmp_path / "index"))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/simple/"
    server.shutdown()
    server.server_close()


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.usefixtures("python_image")
def test_a_dependency_that_cannot_be_had_is_a_dependency_issue_not_a_code_bug(
    make_repo: Any, tmp_path: Path, empty_index: str
) -> None:
    """Invariant: when setup cannot get a dependency, the heal says which one and the step
    is `dependency_issue` (not patched, exit 1, report written), never a code bug."""
    repo = make_repo({"tests/test_ok.py": "def test_ok():\n    assert True\n"})
    (tmp_path / "candidates").mkdir()
    (tmp_path / "candidates" / "never-tried.patch").write_text("not run: setup fails first\n")
    spec = tmp_path / "job.toml"
    spec.write_text(
        f'[job]\nid = "nodep-{os.getpid()}"\nrepo = "{repo}"\nbase = "main"\n'
        f'harness = "python"\nsetup = ["pip install --index-url {empty_index} nosuch-pkg>=1"]\n'
        '\n[[steps]]\nname = "unit"\ncommand = "pytest -q"\n\n'
        f'[proposer]\nkind = "patchfiles"\ndir = "{tmp_path / "candidates"}"\n'
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    healed = subprocess.run(
        [sys.executable, "-m", "patchheal", "heal", str(spec), "--json"],
        cwd=tmp_path,
        env={**env, "PIP_RETRIES": "0"},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert healed.returncode == 1, healed.stdout + healed.stderr[-3000:]
    summary = json.loads(healed.stdout)
    assert summary["classification"] == "dependency_issue"
    assert summary["attempts"] == []
    report = Path(summary["reports"]["md"]).read_text()
    assert "cannot get nosuch-pkg>=1" in report


def _wheel(directory: Path, name: str, requires: list[str]) -> None:
    """A pure wheel `name-1.0` whose METADATA requires `requires`."""
    import zipfile

    info = f"{name}-1.0.dist-info"
    metadata = f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n" + "".join(
        f"Requires-Dist: {r}\n" for r in requires
    )
    wheel = "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    with zipfile.ZipFile(directory / f"{name}-1.0-py3-none-any.whl", "w") as archive:
        archive.writestr(f"{name}/__init__.py", "")
        archive.writestr(f"{info}/METADATA", metadata)
        archive.writestr(f"{info}/WHEEL", wheel)
        archive.writestr(f"{info}/RECORD", "")


@pytest.fixture
def links(tmp_path: Path) -> Iterator[str]:
    """A find-links page on loopback: wheels whose requirements hold only on old Pythons."""
    served = tmp_path / "links"
    served.mkdir()
    _wheel(
        served,
        "top",
        [
            'oldonly>=1; python_version < "3.10"',
            'newonly; python_version >= "3.14"',
            'winonly; sys_platform == "win32"',
            'extraonly; extra == "docs"',
            # A direct reference never reaches the host's pip, whatever its marker says.
            'local @ file:///tmp/nowhere/local-1.0.tar.gz ; python_version < "3.10"',
        ],
    )
    _wheel(served, "oldonly", ['deeper; python_version < "3.10"'])
    for name in ("deeper", "newonly", "winonly", "extraonly"):
        _wheel(served, name, [])
    handler = functools.partial(SimpleHTTPRequestHandler, directory=str(served))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()
    server.server_close()


@pytest.mark.skipif(sys.version_info[:2] == (3, 9), reason="the host must not be the target")
def test_what_only_the_images_python_needs_is_downloaded_too(tmp_path: Path, links: str) -> None:
    """Regression (issue 26): the host's pip evaluates a dependency's markers for the host's
    Python whatever `--python-version` says, so pytest 8's `tomli; python_version <
    "3.11"` never reached a 3.9 wheelhouse from a 3.11 host and the offline setup failed.
    The closure under the image's markers adds them, transitively; a marker false for the
    image (a newer Python, Windows, an extra not asked for) adds nothing."""
    from patchheal.harness.setup.wheelhouse import _download

    house = tmp_path / "house"
    house.mkdir()
    said: list[str] = []
    _download(house, "3.9", [["--no-index", "--find-links", links, "top"]], tmp_path, said.append)
    names = sorted(p.name.split("-")[0] for p in house.iterdir())
    assert names == ["deeper", "oldonly", "top"], said
    assert any("oldonly>=1" in line for line in said), said
