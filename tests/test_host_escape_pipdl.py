"""Issue 25, C1: nothing from a candidate's tree is built on the host, in any form.

A verified candidate's tree is where the next step's dependency setup starts;
the host's `pip download` fills the wheelhouse from it. Whatever names code by
location rather than by name (a local path, a `file:` or VCS URL, an editable,
an archive in a requirements file, a build requirement, a local find-links or
index, a URL in a constraints file) must never reach the host's pip, which
would run that code's build backend as the user running patchheal. Named
requirements still arrive. The host's pip runs offline here (PIP_NO_INDEX,
find-links to a wheel this test writes): no network.
"""

from __future__ import annotations

import base64
import hashlib
import io
import subprocess
import tarfile
import zipfile
from pathlib import Path
from typing import Any

import pytest
from harness_support import engine, python_def, python_image

from patchheal.harness.config import HarnessDef
from patchheal.harness.setup import wheelhouse
from patchheal.harness.setup.hostpip import HostPipArgs, named_requirement

__all__ = ["engine", "python_def", "python_image"]

# The helper's in-tree build backend: importing it anywhere leaves a marker, if it can.
BACKEND = """
import os
try:
    with open({marker!r}, "w") as out:
        out.write("the candidate's build backend ran on the host")
except OSError:
    pass

def get_requires_for_build_wheel(config_settings=None):
    return []

def prepare_metadata_for_build_wheel(directory, config_settings=None):
    info = os.path.join(directory, "helper-0.1.dist-info")
    os.makedirs(info)
    with open(os.path.join(info, "METADATA"), "w") as out:
        out.write("Metadata-Version: 2.1\\nName: helper\\nVersion: 0.1\\n")
    return "helper-0.1.dist-info"

def build_wheel(directory, config_settings=None, metadata_directory=None):
    raise RuntimeError("not needed")
"""
HELPER_PYPROJECT = (
    '[build-system]\nrequires = []\nbuild-backend = "backend"\nbackend-path = ["."]\n'
    '[project]\nname = "helper"\nversion = "0.1"\n'
)


def helper(root: Path, marker: Path) -> Path:
    root.mkdir(parents=True)
    (root / "pyproject.toml").write_text(HELPER_PYPROJECT)
    (root / "backend.py").write_text(BACKEND.format(marker=str(marker)))
    return root


def sdist(source: Path, target: Path) -> Path:
    target.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(target, "w:gz") as tar:
        tar.add(source, arcname="helper-0.1")
    return target


def vcs_repo(source: Path, target: Path) -> Path:
    subprocess.run(["git", "init", "-q", "-b", "main", str(target)], check=True)
    for name in ("pyproject.toml", "backend.py"):
        (target / name).write_text((source / name).read_text())
    subprocess.run(["git", "-C", str(target), "add", "-A"], check=True)
    subprocess.run(["git", "-C", str(target), "commit", "-qm", "helper"], check=True)
    return target


def wheel(directory: Path, name: str = "legitdep") -> None:
    """A real, minimal wheel of `name` 1.0: the named requirement the index would serve."""
    directory.mkdir(parents=True, exist_ok=True)
    info = f"{name}-1.0.dist-info"
    files = {
        f"{name}.py": b"VALUE = 1\n",
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n".encode(),
        f"{info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
        b"Tag: py3-none-any\n",
    }
    record = ""
    for path, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record += f"{path},sha256={digest},{len(data)}\n"
    record += f"{info}/RECORD,,\n"
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for path, data in {**files, f"{info}/RECORD": record.encode()}.items():
            archive.writestr(path, data)
    (directory / f"{name}-1.0-py3-none-any.whl").write_bytes(buffer.getvalue())


def project(root: Path, dependencies: list[str], build: list[str] | None = None) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    deps = ", ".join(f'"{d}"' for d in dependencies)
    requires = ", ".join(f'"{r}"' for r in (build or []))
    (root / "pyproject.toml").write_text(
        f'[build-system]\nrequires = [{requires}]\nbuild-backend = "setuptools.build_meta"\n'
        f'[project]\nname = "pricing"\nversion = "1.4.0"\ndependencies = [{deps}]\n'
    )
    return root


def form(name: str, tmp: Path, marker: Path) -> tuple[Path, list[str]]:
    """A candidate's worktree and the job's setup commands, for one form of the escape."""
    tree = tmp / "tree"
    local = helper(tree / "tools" / "helper", marker)
    if name == "local path dependency (the C1 probe)":
        return project(tree, ["./tools/helper", "legitdep"]), ["pip install -e ."]
    if name == "file: URL dependency":
        return project(tree, [f"helper @ file://{local}", "legitdep"]), ["pip install -e ."]
    if name == "VCS URL dependency":
        repo = vcs_repo(local, tmp / "helper-repo")
        # localhost: PEP 508 wants a host in a VCS URL
        url = f"helper @ git+file://localhost{repo}"
        return project(tree, [url, "legitdep"]), ["pip install -e ."]
    if name == "editable VCS URL in a setup command":
        repo = vcs_repo(local, tmp / "helper-repo")
        return project(tree, ["legitdep"]), [f"pip install -e . -e git+file://{repo}#egg=helper"]
    if name == "archive named in a requirements file":
        sdist(local, tree / "tools" / "helper-0.1.tar.gz")
        (tree / "requirements.txt").write_text("tools/helper-0.1.tar.gz\nlegitdep\n")
        return project(tree, []), ["pip install -r requirements.txt"]
    if name == "local build requirement":
        return project(tree, ["legitdep"], build=["./tools/helper"]), ["pip install -e ."]
    if name == "local find-links directory":
        sdist(local, tree / "dist" / "helper-0.1.tar.gz")
        return project(tree, ["legitdep"]), ["pip install --find-links=dist helper legitdep"]
    if name == "URL in a constraints file":
        (tree / "constraints.txt").write_text(f"helper @ file://{local}\n")
        return project(tree, ["legitdep"]), ["pip install -c constraints.txt helper legitdep"]
    raise AssertionError(name)


FORMS = [
    "local path dependency (the C1 probe)",
    "file: URL dependency",
    "VCS URL dependency",
    "editable VCS URL in a setup command",
    "archive named in a requirements file",
    "local build requirement",
    "local find-links directory",
    "URL in a constraints file",
]


@pytest.mark.docker
@pytest.mark.parametrize("name", FORMS)
def test_no_form_of_a_local_dependency_is_built_on_the_host(
    engine: Any,
    python_def: HarnessDef,
    python_image: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    name: str,
) -> None:
    """Invariant: the host's pip gets named distributions only; the candidate's code (here
    an in-tree build backend that leaves a marker) never runs on the host."""
    monkeypatch.setenv("PATCHHEAL_CACHE_DIR", str(tmp_path / "cache"))  # a wheelhouse per form
    index = tmp_path / "index"
    wheel(index)
    monkeypatch.setenv("PIP_NO_INDEX", "1")  # offline: the local "index" only
    monkeypatch.setenv("PIP_FIND_LINKS", str(index))
    marker = tmp_path / "host-marker"
    tree, setup = form(name, tmp_path, marker)
    said: list[str] = []
    try:
        house = wheelhouse.fill(engine, python_def, python_image, tree, setup, said.append)
    except wheelhouse.DependencySetupError as exc:  # refusing is fine; building is not
        house, said = None, [*said, str(exc)]
    assert not marker.exists(), f"{name}: the candidate's build backend ran on the host\n{said}"
    if house is not None:  # the named requirement still arrives
        assert any(p.name.startswith("legitdep-") for p in house.iterdir()), said


def test_only_named_requirements_pass_to_the_host(tmp_path: Path) -> None:
    """Every argument shape that names code by location is dropped, and said; names,
    specifiers, extras, markers and http(s) index locations are kept."""
    (tmp_path / "c.txt").write_text("iniconfig<3  # ok\nhelper @ file:///x\n./tools/helper\n")
    with HostPipArgs(tmp_path) as host:
        kept = host.filter(
            ["./tools/helper", "tools/helper", "helper @ file:///x", "git+https://h/r#egg=r",
             "x-0.1.tar.gz", "y.whl", "-e", ".", "-e.", "--editable=./x", "-r", "r.txt",
             "-f", "./dist", "-f./dist", "--find-links=file:///d", "-i", "/srv/simple",
             "-c", "c.txt", "--pre", "-i", "https://index.example/simple",
             "iniconfig>=1", "pluggy[x]; python_version>'3'", "--only-binary", ":all:"]
        )  # fmt: skip
        constraints = Path(kept[kept.index("-c") + 1]).read_text()
    assert [a for a in kept if a not in ("-c",) and not a.endswith(".txt")] == [
        "--pre", "-i", "https://index.example/simple", "iniconfig>=1",
        "pluggy[x]; python_version>'3'", "--only-binary", ":all:",
    ]  # fmt: skip
    assert constraints == "iniconfig<3\n"
    assert len(host.dropped) == 16, host.dropped
    assert named_requirement("requests[socks]>=2; python_version >= '3.8'")
    assert not named_requirement("requests @ https://example.invalid/requests.tar.gz")
