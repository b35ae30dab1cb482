"""The step owns its tree, as a CI runner's user owns its checkout (issue 32, item 1).

Real Docker, real git worktrees. The host runs as root in these tests' usual
environment (the worktree is root's); the step runs as an unprivileged uid and
may still do to its own files whatever it may on a runner: set their times and
modes, lock them, build a C extension in setup.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import Any

import pytest
from harness_support import engine, python_def, python_image

from patchheal import proc
from patchheal.harness.config import HarnessDef
from patchheal.harness.docker.harness import DockerHarness
from patchheal.harness.engine import containers
from patchheal.workspace import tracked
from patchheal.workspace.worktrees import JobWorkspace, worktree_diff

__all__ = ["engine", "python_def", "python_image"]

pytestmark = pytest.mark.docker

# What a test suite does to its own files on a runner (pallets/jinja's os.utime among them).
OWN_FILES = """
import fcntl, os, time
os.utime("pkg/data.txt", (1_000_000_000, 1_000_000_000))
assert os.stat("pkg/data.txt").st_mtime == 1_000_000_000
os.utime("pkg", None)
os.chmod("pkg/data.txt", 0o600)
os.chmod("pkg/data.txt", 0o644)
with open("pkg/data.txt", "a") as handle:
    fcntl.flock(handle, fcntl.LOCK_EX)
os.mkdir("pkg/made")
os.utime("pkg/made", None)
os.rename("pkg/made", "pkg/moved")
os.rmdir("pkg/moved")
with open("top-level.txt", "w") as handle:  # the root directory is writable
    handle.write("x")
os.utime("top-level.txt", None)
os.remove("top-level.txt")
try:  # but `.git` in it is the host's and cannot be moved aside (sticky root)
    os.rename(".git", "moved-git")
    moved = "moved"
except OSError:
    moved = "kept"
print("owned", moved, os.getuid(), os.stat("pkg").st_uid == os.getuid())
"""


@pytest.fixture(autouse=True)
def _shared_cache(
    monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory
) -> None:
    monkeypatch.setenv("PATCHHEAL_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "cache"))


def test_a_step_sets_times_modes_and_locks_of_its_tree_and_host_git_still_works(
    python_image: str, python_def: HarnessDef, make_repo: Any, tmp_path: Path
) -> None:
    repo = make_repo({"pkg/data.txt": "data\n", "pkg/__init__.py": "", "own.py": OWN_FILES})
    workspace = JobWorkspace(repo, "HEAD", "tree-owned", root=tmp_path / "wt-root")
    workspace.open()
    tree = workspace.worktree("verify")
    git_file = (tree / ".git").stat()
    h = DockerHarness(python_def, job_id=f"tree-{os.getpid()}")
    try:
        before = tracked.snapshot(tree)
        result = h.run("python3 own.py", tree, timeout=120, idle_timeout=120)
        assert result.exit_code == 0, result.output
        assert "owned" in result.output, result.output
        assert result.output.split()[-1] == "True", result.output
        assert result.output.split()[-3] == "kept", result.output
        # The step's user is never root, and it owns the tree; the `.git` file stays the host's.
        assert result.output.split()[-2] != "0"
        assert (tree / "pkg/data.txt").stat().st_uid == int(result.output.split()[-2])
        assert ((tree / ".git").stat().st_uid, (tree / ".git").stat().st_mode) == (
            git_file.st_uid,
            git_file.st_mode,
        )
        # Host-side git on a tree of another uid: status, diff, the tracked-files check.
        assert tracked.touched(before, tree, None) == []
        assert proc.git("status", "--porcelain", cwd=tree).output.strip() == ""
        (tree / "pkg/data.txt").write_text("changed\n")
        diff = worktree_diff(tree)
        assert "+changed" in diff, diff
        assert diff.count("diff --git") == 1, diff
        workspace.reset(tree)
        assert (tree / "pkg/data.txt").read_text() == "data\n"
        # A second run after a host-side reset (files rewritten by root) owns them again.
        again = h.run("python3 own.py", tree, timeout=120, idle_timeout=120)
        assert again.exit_code == 0, again.output
    finally:
        h.close()
    workspace.remove(tree)
    assert not tree.exists()
    workspace.destroy()
    assert not workspace.dir.exists()


SETUP_PY = """
from setuptools import Extension, setup

setup(ext_modules=[Extension("_tinyc", ["src/tinyc.c"])])
"""

TINYC = """
#define PY_SSIZE_T_CLEAN
#include <Python.h>

static PyObject *twice(PyObject *self, PyObject *arg) {
    long value = PyLong_AsLong(arg);
    if (value == -1 && PyErr_Occurred()) return NULL;
    return PyLong_FromLong(2 * value);
}

static PyMethodDef methods[] = {{"twice", twice, METH_O, "2 * x"}, {NULL, NULL, 0, NULL}};
static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_tinyc", NULL, -1, methods};
PyMODINIT_FUNC PyInit__tinyc(void) { return PyModule_Create(&module); }
"""


@pytest.mark.parametrize("install", ["pip install .", "pip install -e ."])
def test_setup_builds_a_c_extension(
    python_image: str, python_def: HarnessDef, make_repo: Any, install: str
) -> None:
    """A project with a C extension installs in setup (markupsafe failed there: `Cannot update
    time stamp of directory`), and the step imports the built module."""
    repo = make_repo(
        {
            "pyproject.toml": '[project]\nname = "tinyc"\nversion = "0.1"\n'
            '[build-system]\nrequires = ["setuptools>=61"]\n'
            'build-backend = "setuptools.build_meta"\n',
            "setup.py": SETUP_PY,
            "src/tinyc.c": TINYC,
            "tests/test_tinyc.py": "import _tinyc\n\ndef test_twice():\n"
            "    assert _tinyc.twice(21) == 42\n",
        }
    )
    h = DockerHarness(
        python_def, job_id=f"cext-{os.getpid()}", setup=[f"{install} && echo {uuid.uuid4().hex}"]
    )
    try:
        h.prepare(repo)
        result = h.run(
            "python -m pytest -q -p no:cacheprovider", repo, timeout=120, idle_timeout=120
        )
        assert result.exit_code == 0, result.output
        assert "1 passed" in result.output
        containers.remove_image(h.client, h.run_image(repo))
    finally:
        h.close()


def test_a_step_writing_past_worktree_size_is_stopped_with_the_limit_as_reason(
    python_image: str, python_def: HarnessDef, tmp_path: Path
) -> None:
    """Issue 32 item 8: the worktree is a host bind mount; a step that writes past
    `worktree_size` is stopped, and its result says so (not a verdict on the code)."""
    from patchheal.verdict.judge import judge

    tree = tmp_path / "wt"
    tree.mkdir()
    (tree / "hello.txt").write_text("hi\n")
    box = python_def.sandbox.model_copy(update={"worktree_size": "20m"})
    small = python_def.model_copy(update={"sandbox": box})
    h = DockerHarness(small, job_id=f"treesize-{os.getpid()}")
    try:
        normal = h.run("head -c 5000000 /dev/zero > five.bin && echo wrote", tree,
                       timeout=120, idle_timeout=120)  # fmt: skip
        assert normal.exit_code == 0, normal.output
        assert normal.stopped is None
        assert "wrote" in normal.output
        # Writes 1 MiB every 0.1 s without end: only the limit ends it (well before the timeout).
        endless = (
            "i=0; while true; do head -c 1048576 /dev/urandom > big.$i; i=$((i+1)); sleep 0.1; done"
        )
        stopped = h.run(endless, tree, timeout=100, idle_timeout=100)
        assert stopped.timed_out is None, stopped.output
        assert stopped.duration_seconds < 60
        assert stopped.exit_code is None
        assert stopped.stopped is not None
        assert "worktree_size = '20m'" in stopped.stopped
        assert "the step was stopped" in stopped.output
        verdict = judge(stopped)
        assert not verdict.passed
        assert "20 MiB" in verdict.reason
        written = sum(p.stat().st_size for p in tree.glob("big.*"))
        assert 15 * 2**20 < written < 80 * 2**20
        # The next run in the same session is unaffected once the tree is back under it.
        for path in tree.glob("big.*"):
            path.unlink()
        after = h.run("echo fine", tree, timeout=60, idle_timeout=60)
        assert after.exit_code == 0, after.output
        assert after.stopped is None
    finally:
        h.close()
