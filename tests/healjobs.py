"""Builders for small real jobs: a git repository with a bug, a spec, and candidate diffs."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

BUGGY = textwrap.dedent("""\
    def add(a, b):
        return a - b


    def mul(a, b):
        return a * b
""")

TESTS = textwrap.dedent("""\
    from calc import add, mul


    def test_add():
        assert add(2, 3) == 5


    def test_mul():
        assert mul(2, 3) == 6
""")


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=cwd, check=True, capture_output=True, text=True
    ).stdout.strip()


def make_calc_repo(root: Path, *, files: dict[str, str] | None = None) -> Path:
    repo = root / "calc-repo"
    repo.mkdir(parents=True)
    contents = {
        "calc.py": BUGGY,
        "tests/test_calc.py": TESTS,
        "pyproject.toml": '[tool.pytest.ini_options]\npythonpath = ["."]\n',
    }
    contents.update(files or {})
    for rel, text in contents.items():
        path = repo / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "calc with a bug")
    return repo


def diff_for(repo: Path, edits: dict[str, str]) -> str:
    """The unified diff that turns the repo's files into `edits`, leaving the repo clean."""
    originals = {}
    for rel, text in edits.items():
        path = repo / rel
        originals[rel] = path.read_text() if path.exists() else None
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    git(repo, "add", "-A")
    diff = git(repo, "diff", "--cached") + "\n"
    git(repo, "reset", "-q", "--hard", "HEAD")
    return diff


FIX = BUGGY.replace("return a - b", "return a + b")
WRONG = BUGGY.replace("return a - b", "return b - a")
HANG = BUGGY.replace("return a - b", "import time\n    time.sleep(60)\n    return a + b")


def toml_str(value: str) -> str:
    return "'''" + value + "'''"


def write_spec(
    path: Path,
    repo: Path,
    *,
    job_id: str = "calc",
    diffs: list[str] = (),
    steps: list[tuple[str, str]] | None = None,
    regression: str | None = None,
    budget: str = "",
    extra: str = "",
) -> Path:
    steps = steps or [("unit", f"{sys.executable} -m pytest -q tests/test_calc.py::test_add")]
    lines = [
        "[job]",
        f'id = "{job_id}"',
        f'repo = "{repo}"',
        'base = "main"',
        'harness = "local"',
        "",
    ]
    for name, command in steps:
        lines += ["[[steps]]", f'name = "{name}"', f"command = {toml_str(command)}", ""]
    if regression:
        lines += ["[regression]", f"command = {toml_str(regression)}", ""]
    lines += [
        "[proposer]",
        'kind = "scripted"',
        "diffs = [" + ", ".join(toml_str(d) for d in diffs) + "]",
        "",
    ]
    if budget:
        lines += ["[budget]", budget, ""]
    lines.append(extra)
    path.write_text("\n".join(lines))
    return path
