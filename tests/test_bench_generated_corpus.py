"""The generated-files corpus of bench_reproduce (no Docker, no mirror): its file, and how
the picker tells what an install generates."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

from bench_reproduce import corpus_path, runner
from pick_generated_bugs import GENERATED_CORPUS, generates
from pick_reproduce_bugs import REPRODUCE_CORPUS

# BugsInPy's 17 projects, by repository name: none of them is used.
BUGSINPY = {
    "ansible", "black", "cookiecutter", "fastapi", "httpie", "keras", "luigi", "matplotlib",
    "pandas", "pysnooper", "sanic", "scrapy", "spacy", "thefuck", "tornado", "tqdm",
    "youtube-dl",
}  # fmt: skip


def _cases() -> list[dict[str, object]]:
    cases = json.loads(GENERATED_CORPUS.read_text())
    assert isinstance(cases, list)
    return cases


def test_the_corpus_has_twenty_cases_of_five_projects_each_installing_what_it_generates() -> None:
    cases = _cases()
    projects = Counter(str(c["repo"]) for c in cases)
    assert len(cases) >= 20
    assert len(projects) >= 5
    assert max(projects.values()) <= 5
    assert len({c["fix"] for c in cases}) == len(cases)
    for case in cases:
        assert case["install_project"] is True
        assert str(case["generates"]).strip(), case["fix"]
        assert "pip install -e ." in case["setup"]  # type: ignore[operator]
        assert case["python"] in ("3.9", "3.11", "3.13")
        assert runner(case).startswith("pytest ")
        assert case["test"] in case["tests"]  # type: ignore[operator]
        assert len(str(case["fix"])) == len(str(case["parent"])) == 40
        assert case["fix_files"]


def test_no_bugsinpy_project() -> None:
    for case in _cases():
        name = str(case["repo"]).lower().partition("/")[2]
        assert name not in BUGSINPY, case["repo"]


def test_both_kinds_of_generated_files_are_there() -> None:
    notes = " ".join(str(c["generates"]) for c in _cases())
    assert "hatch-vcs" in notes
    assert "setuptools-scm" in notes
    assert "C extension" in notes


def test_bench_reproduce_selects_a_corpus_by_name_or_path(tmp_path: Path) -> None:
    assert corpus_path("default") == REPRODUCE_CORPUS
    assert corpus_path("generated") == GENERATED_CORPUS
    assert corpus_path(str(tmp_path / "x.json")) == tmp_path / "x.json"


def _repo(tmp_path: Path, files: dict[str, str]) -> tuple[Path, str]:
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    env = ["-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    subprocess.run(["git", "add", "-A"], cwd=tmp_path, check=True)
    subprocess.run(["git", *env, "commit", "-qm", "c"], cwd=tmp_path, check=True)
    head = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=tmp_path, capture_output=True, text=True, check=True
    )
    return tmp_path / ".git", head.stdout.strip()


def test_generates_reads_version_files_and_extensions(tmp_path: Path) -> None:
    pyproject = (
        '[tool.hatch.build.hooks.vcs]\nversion-file = "src/a/_version.py"\n'
        '[tool.setuptools_scm]\nwrite_to = "src/a/_v2.py"\n'
    )
    setup = "Extension(name = 'a._speedups', sources=[])\nExtension(\"b\", [])\n"
    git_dir, head = _repo(tmp_path, {"pyproject.toml": pyproject, "setup.py": setup})
    assert generates(git_dir, head) == (
        "version file src/a/_version.py (hatch-vcs); "
        "version file src/a/_v2.py (setuptools-scm); C extension a._speedups, b built in place"
    )


def test_an_install_that_generates_nothing_says_so(tmp_path: Path) -> None:
    git_dir, head = _repo(tmp_path, {"pyproject.toml": '[project]\nname = "a"\n'})
    assert generates(git_dir, head) == ""
