"""patchheal heals a `setup.py` project whoever runs it (issue 26, item 1).

The usual CI container runs patchheal as root with `HOME=/root` (0700); the
wheelhouse then lives under a home the sandbox user (uid 1000) cannot
traverse, and the image's own /root is 0700 too. A private umask (077) makes
every file pip downloads 0600. Both once stopped every job whose setup runs a
build backend (`pip install -e .` of a setup.py project) with exit 3.
"""

from __future__ import annotations

import importlib.metadata as md
import json
import os
import pwd
import re
import shutil
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from harness_support import engine, python_def, python_image
from packaging.requirements import Requirement

import patchheal
from patchheal.harness.engine import containers, dockerapi

__all__ = ["engine", "python_def", "python_image"]

pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.usefixtures("python_image")]

# Version and requirements only setup.py knows: pip must run it (in the metadata sandbox).
PROJECT = {
    # A build system without [project]: pip builds in isolation from the wheelhouse.
    "pyproject.toml": '[build-system]\nrequires = ["setuptools>=61", "wheel"]\n'
    'build-backend = "setuptools.build_meta"\n',
    "setup.py": "from pathlib import Path\nfrom setuptools import setup\n\n"
    "here = Path(__file__).parent\n"
    "setup(\n    name='calcpkg',\n    version=(here / 'calcpkg' / 'VERSION').read_text().strip(),\n"
    "    packages=['calcpkg'],\n    package_data={'calcpkg': ['VERSION']},\n"
    "    install_requires=[line for line in (here / 'requires.txt').read_text().split() if line],\n"
    ")\n",
    "requires.txt": "\n",
    "calcpkg/VERSION": "1.4.2\n",
    "calcpkg/__init__.py": "from calcpkg.calc import add\n",
    "calcpkg/calc.py": "def add(a, b):\n    return a - b\n",
    "tests/test_calc.py": "from calcpkg import add\n\n\n"
    "def test_add():\n    assert add(2, 3) == 5\n",
}
FIX = """--- a/calcpkg/calc.py
+++ b/calcpkg/calc.py
@@ -1,2 +1,2 @@
 def add(a, b):
-    return a - b
+    return a + b
"""


def _write_project(root: Path) -> tuple[Path, Path]:
    """A git repository with the bug committed, and a folder with the fixing candidate."""
    repo = root / "repo"
    for rel, text in PROJECT.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    for args in (("init", "-q", "-b", "main"), ("add", "-A"), ("commit", "-q", "-m", "bug")):
        subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)
    (root / "candidates").mkdir()
    (root / "candidates" / "fix.patch").write_text(FIX)
    return repo, root / "candidates"


def _job(root: Path, repo: Path, candidates: Path) -> Path:
    spec = root / "job.toml"
    spec.write_text(
        f'[job]\nid = "anyuser-{uuid.uuid4().hex[:8]}"\nrepo = "{repo}"\nbase = "main"\n'
        # A fresh dependency fingerprint: setup really runs (the engine may keep an old one).
        f'harness = "python"\nsetup = ["pip install -e . && echo {uuid.uuid4().hex}"]\n'
        '\n[[steps]]\nname = "unit"\ncommand = "pytest -q tests"\n\n'
        f'[proposer]\nkind = "patchfiles"\ndir = "{candidates}"\n'
    )
    return spec


def _base_env() -> dict[str, str]:
    # Nothing of the test session's own cache or home: the subprocess finds its own.
    drop = ("GIT_CONFIG", "PATCHHEAL_CACHE_DIR", "XDG_CACHE_HOME", "HOME", "PYTHONPATH")
    env = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
    return {**env, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid"}


def _assert_fixed(healed: subprocess.CompletedProcess[str]) -> None:
    """The heal ended `fixed` after a real setup; its dependency image is removed."""
    tags = re.findall(r"installing dependencies into (patchheal-deps/\S+)", healed.stderr)
    client = dockerapi.engine()
    for tag in tags:
        containers.remove_image(client, tag)
    client.close()
    assert healed.returncode == 0, healed.stdout[-2000:] + healed.stderr[-4000:]
    assert tags, healed.stderr[-2000:]
    summary = json.loads(healed.stdout)
    assert summary["status"] == "fixed", summary


def test_heals_a_setup_py_project_as_root_with_a_private_home_and_umask(tmp_path: Path) -> None:
    """Invariant: as root with a 0700 HOME under /root and umask 077, the heal of a
    setup.py project with dynamic metadata and a `pip install -e .` setup reads its
    dependencies in the sandbox (the wheelhouse is readable at a container path) and
    ends `fixed`, exit 0, with its JSON summary printed."""
    if os.geteuid() != 0:
        pytest.skip("the as-root case needs root (CI's container runs as root)")
    home = Path(tempfile.mkdtemp(prefix="patchheal-test-home-", dir="/root"))
    try:
        home.chmod(0o700)
        repo, candidates = _write_project(tmp_path)
        env = {**_base_env(), "HOME": str(home), "PYTHONPATH": _source_root()}
        spec, store = _job(tmp_path, repo, candidates), tmp_path / "store.sqlite3"
        healed = subprocess.run(
            [sys.executable, "-m", "patchheal", "heal", str(spec), "--json", "--db", str(store)],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=900,
            preexec_fn=lambda: os.umask(0o077),
        )
        _assert_fixed(healed)
        assert (home / ".cache" / "patchheal" / "wheelhouse").is_dir()
    finally:
        shutil.rmtree(home, ignore_errors=True)


def _source_root() -> str:
    return str(Path(patchheal.__file__).resolve().parent.parent)


@pytest.fixture(scope="module")
def plain_user() -> Iterator[pwd.struct_passwd]:
    """A throwaway unprivileged user in the docker group (the socket's group)."""
    if os.geteuid() != 0 or shutil.which("useradd") is None or shutil.which("runuser") is None:
        pytest.skip("creating a user needs root, useradd and runuser")
    socket = Path("/var/run/docker.sock")
    if not socket.exists() or os.environ.get("DOCKER_HOST", "unix://").split("://")[0] != "unix":
        pytest.skip("the plain user reaches the engine through the local socket only")
    group = socket.stat().st_gid
    name = f"phtest{uuid.uuid4().hex[:8]}"
    subprocess.run(
        ["useradd", "--create-home", "--shell", "/bin/sh", "--groups", str(group), name],
        check=True,
        capture_output=True,
    )
    try:
        yield pwd.getpwnam(name)
    finally:
        subprocess.run(["userdel", "--remove", name], capture_output=True)


def _readable_site_packages(target: Path) -> None:
    """patchheal's runtime distributions copied where any user can read them.

    The test interpreter may live under root's private home (pyenv in /root):
    the plain user runs Debian's /usr/bin/python3 over this copy (same minor
    version: compiled extensions load).
    """
    seen: set[str] = set()
    wanted = ["patchheal", "pip"]
    while wanted:
        name = wanted.pop().lower().replace("_", "-")
        if name in seen:
            continue
        seen.add(name)
        try:
            dist = md.distribution(name)
        except md.PackageNotFoundError:
            continue
        for text in dist.requires or []:
            requirement = Requirement(text)
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                wanted.append(requirement.name)
        if name == "patchheal":
            continue  # the source tree is on PYTHONPATH
        for file in dist.files or []:
            if file.parts[0] == ".." or "__pycache__" in file.parts:
                continue
            source = Path(str(dist.locate_file(file)))
            if source.is_file():
                (target / file).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source, target / file)


def test_heals_a_setup_py_project_as_a_plain_user(
    tmp_path: Path, plain_user: pwd.struct_passwd
) -> None:
    """Invariant: an unprivileged user with access to the engine (docker group), its own
    home and worktrees, heals the same setup.py project to `fixed` (the step runs as
    that user's uid: the worktree's owner)."""
    python = f"/usr/bin/python{sys.version_info[0]}.{sys.version_info[1]}"
    if not Path(python).is_file():
        pytest.skip(f"{python} (readable by any user) is not installed")
    work = Path(tempfile.mkdtemp(prefix="patchheal-plain-"))
    try:
        _readable_site_packages(work / "site")
        repo, candidates = _write_project(work)
        spec = _job(work, repo, candidates)
        for path in [work, *work.rglob("*")]:
            os.lchown(path, plain_user.pw_uid, plain_user.pw_gid)
        env: dict[str, Any] = {
            **_base_env(),
            "HOME": plain_user.pw_dir,
            "USER": plain_user.pw_name,
            "PYTHONPATH": f"{work / 'site'}:{_source_root()}",
            "PATCHHEAL_WORKTREE_ROOT": str(work / "worktrees"),
        }
        argv = [python, "-m", "patchheal", "heal", str(spec), "--json"]
        argv += ["--db", str(work / "store.sqlite3")]
        healed = subprocess.run(
            ["runuser", "-u", plain_user.pw_name, "--", "env", "-i"]
            + [f"{k}={v}" for k, v in env.items()]
            + argv,
            cwd=work,
            capture_output=True,
            text=True,
            timeout=900,
        )
        _assert_fixed(healed)
        assert (Path(plain_user.pw_dir) / ".cache" / "patchheal" / "wheelhouse").is_dir()
    finally:
        shutil.rmtree(work, ignore_errors=True)
