"""Real projects' whole test suites at a clean release, run as a step in the Docker harness.

Shared by the benchmarks that ask what patchheal's own code inside a step does to
a suite that is fine: whether the collectors change an outcome, whether the
tripwire would fire, whether impossible twins fail. Each project is materialized
from a local mirror of its history (`/work/.mirror/<owner>+<name>/repo`, brought
by the search tool's `fetch`; nothing of the projects is stored here) at a
release tag, its dependency files moved aside (bench_context's way: one fixed
install per project, `setup`), and its package importable from `src/` or the
root through PYTHONPATH.
"""

from __future__ import annotations

import shlex
import subprocess
from dataclasses import dataclass
from pathlib import Path

from bench_context import _config_aside, mirror


@dataclass(frozen=True)
class SuiteProject:
    repo: str
    tag: str
    tests: str
    setup: tuple[str, ...] = ()


PROJECTS: tuple[SuiteProject, ...] = (
    # click 8.1.7 makes warnings errors; its CI pinned pytest 7.4.0 (requirements/tests.txt),
    # under the newest pytest its suite stops at collection.
    SuiteProject("pallets/click", "8.1.7", "tests", ("pip install pytest==7.4.0",)),
    SuiteProject("pallets/jinja", "3.1.4", "tests", ("pip install 'MarkupSafe>=2.0'",)),
    SuiteProject("pallets/markupsafe", "2.1.5", "tests"),
    SuiteProject("pallets/itsdangerous", "2.2.0", "tests", ("pip install freezegun",)),
    SuiteProject("more-itertools/more-itertools", "v10.3.0", "tests"),
    SuiteProject(
        "python-attrs/attrs",
        "23.2.0",
        "tests",
        ("pip install 'pytest>=8,<9' hypothesis pympler zope.interface cloudpickle",),
    ),
    SuiteProject("tkem/cachetools", "v5.3.3", "tests"),
    SuiteProject("andialbrecht/sqlparse", "0.5.0", "tests"),
    SuiteProject("astanin/python-tabulate", "v0.9.0", "test", ("pip install wcwidth",)),
    SuiteProject("kjd/idna", "v3.7", "tests"),
    SuiteProject(
        "marshmallow-code/marshmallow", "3.21.3", "tests", ("pip install pytz simplejson",)
    ),
)


def _git(tree: Path, *args: str) -> None:
    env = {
        "GIT_AUTHOR_NAME": "b",
        "GIT_AUTHOR_EMAIL": "b@b.invalid",
        "GIT_COMMITTER_NAME": "b",
        "GIT_COMMITTER_EMAIL": "b@b.invalid",
        "PATH": "/usr/bin:/bin",
    }
    subprocess.run(["git", *args], cwd=tree, env=env, check=True, capture_output=True)


def materialize(project: SuiteProject, into: Path) -> list[str] | None:
    """The project's tree at its tag as a git repository (configuration aside, committed);
    the pytest options that point at its configuration. None when there is no mirror."""
    git_dir = mirror(project.repo)
    if git_dir is None:
        return None
    archive = subprocess.run(
        ["git", f"--git-dir={git_dir}", "archive", project.tag], capture_output=True, check=True
    ).stdout
    into.mkdir(parents=True, exist_ok=True)
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    _aside, config = _config_aside(into)
    _git(into, "init", "-q", "-b", "main")
    _git(into, "add", "-A")
    _git(into, "commit", "-qm", f"{project.repo} {project.tag}")
    return config


def command(
    project: SuiteProject, tree: Path, config: list[str], workdir: str, *, plain: bool = False
) -> str:
    """`python -m pytest` over the suite, the package importable as its CI installs it.
    `plain`: with none of patchheal's code in the process (PYTHONPATH is the project's
    alone, no PYTEST_PLUGINS), pytest's own JUnit XML beside it."""
    src = f"{workdir}/src" if (tree / "src").is_dir() else workdir
    layout = ["-o", f"pythonpath={src}"] if config else []
    argv = [
        "python",
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        *config,
        *layout,
        project.tests,
    ]
    if plain:
        argv += ["--junitxml=.bench-plain-junit.xml", "-o", "junit_family=xunit1"]
        return f"env -u PYTEST_PLUGINS PYTHONPATH={shlex.quote(src)} " + shlex.join(argv)
    return f'PYTHONPATH="$PYTHONPATH:{src}" ' + shlex.join(argv)
