"""The generated-files corpus of bench_reproduce.py: projects whose install writes into the tree.

Each case is a real bug-fix commit (pick_context_bugs.py's rule: a non-merge commit
whose subject says fix/bug, 1-3 source files changed, a `def test_...` added) of a
project whose `pip install -e .` generates files in its source tree: a version file
(hatch-vcs's `version-file`, setuptools-scm's `write_to` / `version_file`) that the
package imports, or C extension modules built in place (setuptools' editable build, or
`setup.py develop`, copies them next to the sources). Every case is `install_project`:
its setup installs the project itself with its dependency files in place, and its tests
import what that install generated. `generates` says what, as found at the parent.

The selection (`PICKS`) was made from the candidates `--list` prints per project, by
hand: not a fix for another platform (Windows, macOS-only paths), not a commit from
before the project generated anything, a fix whose test exercises the code it changed
(msgpack's `fallback.py` fixes were left out: their tests run the compiled extension).
`DROPPED` names the picks that were run and dropped, with why: the venv does not
reproduce them either.
The Python is the commit's era's (3.9 before 2022, 3.11 to 2023, 3.13 after), the pins
those of its CI (`SETUP`: the test dependencies of its extras or dependency groups, and
the pytest its configuration needs: pytest 9 reads filelock's and platformdirs'
`[tool.pytest]`). At most 5 cases a project. BugsInPy is never used.

Run: python benchmarks/pick_generated_bugs.py --list REPO --since YYYY-MM-DD
     python benchmarks/pick_generated_bugs.py [--write]
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

from bench_context import mirror
from pick_context_bugs import _git, candidate, candidates
from pick_reproduce_bugs import added_tests, build_system, qualified

GENERATED_CORPUS = Path(__file__).resolve().parent / "corpus" / "generated_files_bugs.json"

# (repo, fix commit prefix, Python): the cases, projects interleaved so that a partial run
# spans them all.
PICKS: list[tuple[str, str, str]] = [
    ("python-humanize/humanize", "962769455459", "3.13"),
    ("tox-dev/platformdirs", "5ec69d86917f", "3.13"),
    ("pytest-dev/pluggy", "9cf2eaa50dd1", "3.13"),
    ("tobgu/pyrsistent", "07d60a5eceee", "3.11"),
    ("ilanschnell/bitarray", "f52401259621", "3.9"),
    ("pytest-dev/execnet", "d08b7e72c994", "3.13"),
    ("pytest-dev/pytest-mock", "4faf92ae233a", "3.13"),
    ("tox-dev/filelock", "721b37bcbdb4", "3.13"),
    ("tox-dev/platformdirs", "3ce0f50532b5", "3.13"),
    ("pytest-dev/pluggy", "7aef3e608fdd", "3.11"),
    ("tobgu/pyrsistent", "0be88dd2f6ce", "3.11"),
    ("ilanschnell/bitarray", "41ad5f844ac3", "3.13"),
    ("python-humanize/humanize", "a47a89ea9111", "3.13"),
    ("tox-dev/filelock", "e266937a96be", "3.13"),
    ("tox-dev/platformdirs", "8c282ebe3369", "3.13"),
    ("pytest-dev/pluggy", "443fee6d7a30", "3.11"),
    ("tobgu/pyrsistent", "226ebb67fad7", "3.11"),
    ("tox-dev/filelock", "42b740aa076e", "3.13"),
    ("tox-dev/platformdirs", "c69a55280360", "3.13"),
    ("pytest-dev/pluggy", "51e8df2ea682", "3.11"),
    ("tobgu/pyrsistent", "885796fb8b9a", "3.9"),
    ("tox-dev/pipdeptree", "4ebaca8789ea", "3.13"),
    ("tox-dev/pipdeptree", "214e9d480699", "3.13"),
    ("tox-dev/filelock", "f093ee0c19d7", "3.13"),
    ("tox-dev/platformdirs", "a01396c50253", "3.13"),
    ("tobgu/pyrsistent", "a7e8b93df67b", "3.9"),
]
# Picked, run, and dropped: no valid bug case, since a fresh venv with the same setup does
# not reproduce them either (bench_reproduce --control, 2026-11-27).
DROPPED: dict[tuple[str, str], str] = {
    ("tox-dev/filelock", "43472a5ec88a"): "its test hangs before the fix (the infinite "
    "acquire it fixes; no timeout in its CI): the venv times out at 300 s, the harness "
    "stops it at the idle timeout (`infra_issue`)",
    ("pytest-dev/pytest-xdist", "74887e356d2d"): "the test the picker took "
    "(`test_auto_detect_cpus`, whose old lines the fix removed) passes before the fix; "
    "the fix's failing test is an existing one it extends (`test_dist_options`)",
    ("python-humanize/humanize", "38c99686b9c9"): "its test (`test_intword_i18n`) is "
    "skipped without the compiled `.mo` translations, which humanize's CI builds in a "
    "step of its own (msgfmt), not at install",
    ("tox-dev/filelock", "734c9f26e810"): "its five tests pass before the fix on Linux "
    "and 3.13 (the venv: 7 passed; the harness: 126 passed)",
    ("pytest-dev/pytest-xdist", "6abcdfc22ed6"): "its tests pass before the fix in the "
    "venv (12 passed, 2 xfailed)",
}

_PYTEST = {"3.9": "6.2.5", "3.11": "7.2.1", "3.13": "8.3.5"}
# Per project: the test dependencies its CI installed besides pytest (its extras or
# dependency groups of the era), and a pytest that era needs where the default above
# does not do (by fix prefix).
TEST_DEPS: dict[str, str] = {
    # pytest-cov: its `tests` extra; its filterwarnings names coverage's warning class,
    # which pytest must import (a usage error, exit 4, without it).
    "python-humanize/humanize": "freezegun pytest-cov",
    "tox-dev/filelock": "pytest-mock pytest-timeout",
    "tox-dev/platformdirs": "pytest-mock 'appdirs==1.4.4'",
    "pytest-dev/pluggy": "",
    "tobgu/pyrsistent": "hypothesis",
    "ilanschnell/bitarray": "",
    "pytest-dev/execnet": "",
    "pytest-dev/pytest-mock": "pytest-asyncio",
    "tox-dev/pipdeptree": "pytest-mock virtualenv",
}
PYTEST_OF: dict[str, str] = {
    # 2026: `[tool.pytest]` (pytest 9's own table; pytest 8 ignores it), pytest-asyncio's
    # loop-scope option set there.
    "721b37bcbdb4": "9.0.2 pytest-asyncio",
    "e266937a96be": "9.0.2 pytest-asyncio",
    "42b740aa076e": "9.0.2 pytest-asyncio",
    "f093ee0c19d7": "9.0.2 pytest-asyncio",
    "a01396c50253": "9.0.2",
    "3ce0f50532b5": "9.0.2",
    "8c282ebe3369": "9.0.2",
    "c69a55280360": "9.0.2",
    # pluggy: a pytest of the pluggy it tests (pytest 8.x wants the newer pluggy API).
    "7aef3e608fdd": "7.4.4",
    "443fee6d7a30": "7.4.4",
    "51e8df2ea682": "7.1.3",
    # pipdeptree 2026: its `test` extra wants pytest>=8.4.2 and pytest-subprocess.
    "214e9d480699": "8.4.2 pytest-subprocess",
}

_HATCH_FILE = re.compile(r'^\s*(?:build\.hooks\.vcs\.)?version-file\s*=\s*"([^"]+)"', re.M)
_SCM_FILE = re.compile(r'^\s*(?:write_to|version_file)\s*=\s*"([^"]+)"', re.M)
_EXTENSION = re.compile(r"""Extension\(\s*(?:name\s*=\s*)?['"]([\w.]+)['"]""")


def _show(git_dir: Path, commit: str, name: str) -> str:
    done = subprocess.run(
        ["git", f"--git-dir={git_dir}", "show", f"{commit}:{name}"], capture_output=True, text=True
    )
    return done.stdout if done.returncode == 0 else ""


def generates(git_dir: Path, parent: str) -> str:
    """What `pip install -e .` of the parent writes into its tree, as its build files say
    ("" when they say nothing: an egg-info alone does not count)."""
    pyproject = _show(git_dir, parent, "pyproject.toml")
    notes = [f"version file {m} (hatch-vcs)" for m in _HATCH_FILE.findall(pyproject)]
    scm = _SCM_FILE.findall(pyproject) + _SCM_FILE.findall(_show(git_dir, parent, "setup.cfg"))
    notes += [f"version file {m} (setuptools-scm)" for m in scm]
    modules = _EXTENSION.findall(_show(git_dir, parent, "setup.py"))
    if modules:
        notes.append(f"C extension {', '.join(modules)} built in place")
    return "; ".join(notes)


def setup_of(repo: str, fix: str, python: str) -> list[str]:
    pinned = PYTEST_OF.get(fix[:12], _PYTEST[python]).split()
    tools = [f"'pytest=={pinned[0]}'", *pinned[1:], *TEST_DEPS[repo].split()]
    return [f"pip install {' '.join(dict.fromkeys(tools))}", "pip install -e ."]


def case_of(repo: str, fix: str, python: str) -> dict[str, object]:
    """The corpus case of `fix` (a prefix) of `repo`, in bench_reproduce's format."""
    git_dir = mirror(repo)
    if git_dir is None:
        raise SystemExit(f"no mirror of {repo} (fetch it first)")
    full = _git(git_dir, "rev-parse", fix).strip()
    found = candidate(git_dir, full)
    if found is None:
        raise SystemExit(f"{repo} {fix} is no candidate by pick_context_bugs' rule")
    made = generates(git_dir, str(found["parent"]))
    if not made:
        raise SystemExit(f"{repo} {fix}: its install generates nothing in the tree")
    build, layout = build_system(git_dir, str(found["parent"]))
    return {
        "repo": repo,
        **found,
        "test": qualified(git_dir, full, str(found["test"])),
        "tests": added_tests(git_dir, found),
        "python": python,
        "runner": "pytest",
        "setup": setup_of(repo, full, python),
        "build": build,
        "layout": layout,
        "install_project": True,
        "generates": made,
    }


def list_candidates(repo: str, since: str) -> int:
    git_dir = mirror(repo)
    if git_dir is None:
        print(f"no mirror of {repo}", file=sys.stderr)
        return 2
    for found in candidates(git_dir, [f"--since={since}"], set()):
        fix, parent = str(found["fix"]), str(found["parent"])
        when = _git(git_dir, "log", "-1", "--format=%cs %s", fix).strip()
        print(f"{fix[:12]} {when[:70]} | {generates(git_dir, parent) or '-'}")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--list", metavar="REPO", help="print REPO's candidates, write nothing")
    parser.add_argument("--since", default="2019-01-01")
    parser.add_argument("--write", action="store_true", help=f"write {GENERATED_CORPUS.name}")
    args = parser.parse_args()
    if args.list:
        return list_candidates(args.list, args.since)
    cases = [case_of(repo, fix, python) for repo, fix, python in PICKS]
    text = json.dumps(cases, indent=1) + "\n"
    if args.write:
        GENERATED_CORPUS.write_text(text)
    print(text if not args.write else f"{len(cases)} cases written", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
