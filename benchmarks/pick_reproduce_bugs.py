"""Pick bug-fix commits for bench_reproduce.py's corpus from local mirrors of real projects.

The selection rule is pick_context_bugs.py's (`candidate`: a non-merge commit whose
subject says fix/bug, 1-3 source files changed, a `def test_...` added); this script
adds what bench_reproduce needs to run each case as its own CI would: the Python of
the commit's era, the runner (pytest or unittest), the tool pins of that era (an old
pytest for old commits), and the test's class, which a unittest id needs. The
project's own build system at the parent (setup.py, setup.cfg, a PEP 517 backend)
and its layout (`src/` or flat) are recorded as found. BugsInPy is never used.

Run: python benchmarks/pick_reproduce_bugs.py REPO --since YYYY-MM-DD [--until YYYY-MM-DD]
     --python 3.9 --count N [--write]
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import subprocess
import sys
from pathlib import Path

from bench_context import CORPUS, mirror
from bench_context import SETUP as CONTEXT_SETUP
from pick_context_bugs import _ADDED_TEST, _TEST_FILE, _git, candidates, spread

REPRODUCE_CORPUS = Path(__file__).resolve().parent / "corpus" / "reproduce_bugs.json"

# Per project: the runner its CI used and, per Python, the pins that era's CI installed
# (the harness image's own pytest otherwise: 6.0.2 on 3.9, 7.2.1 on 3.11, 8.3.5 on 3.13).
RUNNER: dict[str, str] = {
    "simplejson/simplejson": "unittest",
    "Python-Markdown/markdown": "unittest",
    "hukkin/tomli": "unittest",
    "kjd/idna": "unittest",
    "pyparsing/pyparsing": "unittest",
}
SETUP: dict[tuple[str, str], list[str]] = {
    # packaging 16-20 imports pyparsing (and requires six): its install_requires of the era.
    ("pypa/packaging", "3.9"): [
        "pip install 'pytest==4.6.11' 'pretend==1.0.9' 'pyparsing==2.4.7' 'six==1.16.0'"
    ],
    ("pypa/packaging", "3.13"): ["pip install 'pytest==8.3.5' pretend tomli_w"],
    ("pytoolz/toolz", "3.9"): ["pip install 'pytest==5.4.3'"],
    ("benjaminp/six", "3.9"): ["pip install 'pytest==4.6.11'"],
    ("pallets/click", "3.13"): ["pip install 'pytest==8.3.5'"],
    # requests 2016-2019 (bench_context's cases): its Pipfile's pytest (>=2.8,<4.1; pytest 4
    # rejects the marks its 2016 tests put on parametrize values) with the pluggy it ran on,
    # a pytest-mock of that pytest, pytest-httpbin 1.0 (httpbin_ca_bundle), and the
    # urllib3/chardet/idna that requests 2.16-2.22 all accept (2.16 wants urllib3 < 1.22,
    # idna < 2.6). (httpbin's flask needs importlib-metadata on Python < 3.10: the
    # wheelhouse's marker closure brings it from a 3.11 host; named here once, before it did.)
    ("psf/requests", "3.9"): [
        "pip install 'pytest==3.10.1' 'pluggy==0.13.1' 'pytest-mock==1.10.4' "
        "'pytest-httpbin==1.0.0' 'urllib3==1.21.1' 'chardet==3.0.4' 'idna==2.5' certifi "
        "trustme PySocks"
    ],
    # tabulate's tests imported nose.tools until 2019 (its tox ran nosetests); later pytest
    # alone, wcwidth for the wide-character tests (its `widechars` extra).
    ("astanin/python-tabulate", "3.9"): ["pip install 'nose==1.3.7' wcwidth"],
    ("astanin/python-tabulate", "3.11"): ["pip install wcwidth"],
    ("astanin/python-tabulate", "3.13"): ["pip install wcwidth"],
    ("Python-Markdown/markdown", "3.9"): ["pip install 'PyYAML==5.4.1'"],
    ("Python-Markdown/markdown", "3.13"): ["pip install PyYAML"],
}


def runner_of(repo: str, tests: list[str]) -> str:
    """The project's unittest runner when its added tests are TestCase methods; pytest for
    plain test functions (tomli's and pyparsing's newer tests are pytest-only)."""
    methods = all(test.count("::") == 2 for test in tests)
    return RUNNER.get(repo, "pytest") if methods else "pytest"


_CLASS = re.compile(r"^class (\w+)")
_COLLECTED = re.compile(r"(?:^|/)(?:test_[^/]*|[^/]*_test)\.py$")


def collected(tests: list[str]) -> bool:
    """Whether any added test is in a file pytest collects (`test_*.py`, `*_test.py`): a test
    added to a mixin in `tests/__init__.py` (cachetools) runs only through other files."""
    return any(_COLLECTED.search(test.partition("::")[0]) for test in tests)


def qualified(git_dir: Path, fix: str, test: str) -> str:
    """`file::Class::test_x` when the added test is a method (unittest needs the class)."""
    file, _, name = test.partition("::")
    source = subprocess.run(
        ["git", f"--git-dir={git_dir}", "show", f"{fix}:{file}"], capture_output=True, text=True
    ).stdout
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return test
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and any(
            isinstance(item, ast.FunctionDef) and item.name == name for item in node.body
        ):
            return f"{file}::{node.name}::{name}"
    return test


def added_tests(git_dir: Path, case: dict[str, object]) -> list[str]:
    """Every test the fix adds (qualified): the first one need not be one that fails before it."""
    parent, fix = str(case["parent"]), str(case["fix"])
    found = []
    for name in _git(git_dir, "diff", "--name-only", parent, fix).split():
        if name.endswith(".py") and _TEST_FILE.search(name):
            for test in _ADDED_TEST.findall(_git(git_dir, "diff", parent, fix, "--", name)):
                found.append(qualified(git_dir, fix, f"{name}::{test}"))
    return found


def build_system(git_dir: Path, parent: str) -> tuple[str, str]:
    """How the parent builds (`setup.py`, `setup.cfg`, or its PEP 517 backend) and its layout."""
    names = set(
        subprocess.run(
            ["git", f"--git-dir={git_dir}", "ls-tree", "--name-only", parent],
            capture_output=True,
            text=True,
        ).stdout.split()
    )
    build = "none"
    if "pyproject.toml" in names:
        text = subprocess.run(
            ["git", f"--git-dir={git_dir}", "show", f"{parent}:pyproject.toml"],
            capture_output=True,
            text=True,
        ).stdout
        backend = re.search(r'build-backend\s*=\s*"([^"]+)"', text)
        build = f"pep517:{backend.group(1)}" if backend else build
    if build == "none" and "setup.cfg" in names and "setup.py" in names:
        cfg = subprocess.run(
            ["git", f"--git-dir={git_dir}", "show", f"{parent}:setup.cfg"],
            capture_output=True,
            text=True,
        ).stdout
        build = "setup.cfg" if "[metadata]" in cfg else "setup.py"
    elif build == "none" and "setup.py" in names:
        build = "setup.py"
    return build, "src" if "src" in names else "flat"


def from_context(per_repo: int, until_39: str, write: bool, pin: str = "") -> int:
    """bench_context's cases (at most `per_repo` a project): commits before `until_39` on
    Python 3.9 with the image's pytest, the others on 3.11; bench_context's fixed install.
    With `pin` (a setup line such as `pip install 'pytest==5.4.3'`), only the 3.9 ones,
    that line added to their setup."""
    corpus = json.loads(REPRODUCE_CORPUS.read_text()) if REPRODUCE_CORPUS.is_file() else []
    known = {c["fix"] for c in corpus}
    seen: dict[str, int] = {}
    picks = []
    for case in json.loads(CORPUS.read_text()):
        repo = str(case["repo"])
        git_dir = mirror(repo)
        if case["fix"] in known or git_dir is None or seen.get(repo, 0) >= per_repo:
            continue
        date = subprocess.run(
            ["git", f"--git-dir={git_dir}", "log", "-1", "--format=%cs", str(case["fix"])],
            capture_output=True,
            text=True,
        ).stdout.strip()
        if pin and date >= until_39:
            continue
        seen[repo] = seen.get(repo, 0) + 1
        python = "3.9" if date < until_39 else "3.11"
        build, layout = build_system(git_dir, str(case["parent"]))
        picks.append(
            {
                **{k: v for k, v in case.items() if k != "set"},
                "tests": added_tests(git_dir, case),
                "python": python,
                "runner": "pytest",
                "setup": SETUP.get((repo, python), CONTEXT_SETUP[repo]) + ([pin] if pin else []),
                "build": build,
                "layout": layout,
            }
        )
    print(f"{len(picks)} picked", file=sys.stderr)
    if write:
        REPRODUCE_CORPUS.write_text(json.dumps(corpus + picks, indent=1) + "\n")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("repo", help="owner/name, or `context` for bench_context's corpus")
    parser.add_argument("--since", default="")
    parser.add_argument("--until", default="")
    parser.add_argument("--python", default="")
    parser.add_argument(
        "--until-39", default="2022-01-01", help="`context`: commits before this run on 3.9"
    )
    parser.add_argument("--count", type=int, default=10)
    parser.add_argument("--pin", default="", help="`context`: a setup line added (3.9 only)")
    parser.add_argument("--write", action="store_true", help="append the picks to the corpus")
    args = parser.parse_args()
    if args.repo == "context":
        return from_context(args.count, args.until_39, args.write, args.pin)
    git_dir = mirror(args.repo)
    if git_dir is None:
        print(f"no mirror of {args.repo}", file=sys.stderr)
        return 2
    corpus = json.loads(REPRODUCE_CORPUS.read_text()) if REPRODUCE_CORPUS.is_file() else []
    known = {c["fix"] for c in corpus}
    window = [f"--since={args.since}"] + ([f"--until={args.until}"] if args.until else [])
    found = []
    for case in candidates(git_dir, window, known):
        fix = str(case["fix"])
        build, layout = build_system(git_dir, str(case["parent"]))
        tests = added_tests(git_dir, case)
        if not collected(tests):
            continue
        found.append(
            {
                "repo": args.repo,
                **case,
                "test": qualified(git_dir, fix, str(case["test"])),
                "tests": tests,
                "python": args.python,
                "runner": runner_of(args.repo, tests),
                "setup": SETUP.get((args.repo, args.python), []),
                "build": build,
                "layout": layout,
            }
        )
    return spread(found, args.count, corpus, REPRODUCE_CORPUS if args.write else None)


if __name__ == "__main__":
    sys.exit(main())
