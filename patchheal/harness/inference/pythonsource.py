"""What a repository says about its Python, read at the failing commit.

Each source gives the versions it names (`.python-version`, the CI workflow
that runs the tests, tox's envlist, nox's sessions, trove classifiers) or a
range (`requires-python`, `python_requires`), most trusted first: a pin, then
what CI runs, then what the package claims. Among the CI workflows only the
jobs that run the tests speak: the one running the failing command (or its
tool), else one running a test command (pytest, tox, nox, `python -m
unittest`, `make test`); a benchmark, docs, lint, typing or release workflow
never does (humanize's benchmark.yml asks for 3.14 while its tests run on
3.9-3.13). Files are read at the base commit (`git show`), like harness
inference, or from the folder when it is not a git repository. Nothing is
executed: setup.py and noxfile.py are read as text.
"""

from __future__ import annotations

import configparser
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from patchheal import proc
from patchheal.harness.inference.runtimes import Evidence

_READ_CHARS = 256 * 1024
_CLASSIFIER = re.compile(r"Programming Language :: Python :: (3\.\d+)\b")
_PYTHON_REQUIRES = re.compile(r"python_requires\s*=\s*['\"]([^'\"]+)['\"]")
_TOX_ENV = re.compile(r"\bpy(3)(\d{1,2})\b")
# `@nox.session(python=["3.9", "3.10"])`, `PYTHON_VERSIONS = ["3.11"]`: the versions on a
# line that assigns a python list (read as text, never run).
_NOX_LINE = re.compile(r"python\w*\s*=\s*(.*)", re.IGNORECASE)
_NOX_VERSION = re.compile(r"['\"](3\.\d{1,2})['\"]")
# A workflow or job of these kinds does not run the tests its Python would be chosen for.
_NOT_TESTS = re.compile(
    r"bench|codspeed|perf|\bdoc(?:s|set|umentation)?\b|sphinx|lint|pre-commit|typing|mypy|"
    r"release|publish|deploy|pages|codeql|label|stale|changelog|profile|draft",
    re.IGNORECASE,
)
# The tools a project's test command runs; the first one found names it.
_TEST_TOOLS = (
    ("pytest", re.compile(r"(?<![\w.-])(?:py\.test|pytest)\b")),
    ("tox", re.compile(r"(?<![\w.-])tox\b")),
    ("nox", re.compile(r"(?<![\w.-])nox\b")),
    ("unittest", re.compile(r"-m\s+unittest\b")),
    ("make test", re.compile(r"(?<![\w.-])make\s+(?:-\S+\s+)*test\w*")),
)


def allows(spec: str, version: str) -> bool:
    """Whether a `requires-python` range allows Python `version` ('3.9'); an invalid
    range says nothing, so it allows every version."""
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    try:
        specifier = SpecifierSet(spec)
    except InvalidSpecifier:
        return True
    return specifier.contains(version) or specifier.contains(f"{version}.99")


def evidence_at(repo: Path, base: str, command: str | None = None) -> list[Evidence]:
    """Every source in the repository at `base` that names a Python, most trusted first;
    `command` is the failing step's (its workflow job speaks first)."""
    read = reader(repo, base)
    found: list[Evidence] = []
    pinned = read(".python-version")
    if pinned:
        lines = [ln.strip() for ln in pinned.splitlines() if ln.strip() and ln[0] != "#"]
        found.append(Evidence(".python-version", lines, None))
    testing = testing_workflow(read, workflow_files(repo, base), command)
    if testing is not None:
        found.append(testing)
    tox = read("tox.ini")
    envs = tox_versions(tox) if tox else []
    if envs:
        found.append(Evidence("tox.ini's envlist", envs, None))
    nox = nox_versions(read("noxfile.py") or "")
    if nox:
        found.append(Evidence("noxfile.py's sessions", nox, None))
    texts = {name: read(name) or "" for name in ("pyproject.toml", "setup.cfg", "setup.py")}
    for name, text in texts.items():
        classifiers = sorted(set(_CLASSIFIER.findall(text)))
        if classifiers:
            found.append(Evidence(f"{name}'s classifiers", classifiers, None))
    for name, spec in _ranges(texts):
        found.append(Evidence(f"{name}", [], spec))
    return found


def workflow_versions(
    text: str,
    keys: tuple[str, ...] = ("python-version", "python", "python_version", "py"),
    action: str = "setup-python",
) -> list[str]:
    """The versions a GitHub workflow names under `keys` (`python-version` by default): its
    matrices (and their `include` entries) and the `with` of its `action` steps."""
    import yaml

    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError:
        return []
    jobs = data.get("jobs") if isinstance(data, dict) else None
    found: list[str] = []
    for body in (jobs or {}).values() if isinstance(jobs, dict) else ():
        if not isinstance(body, dict):
            continue
        matrix = (body.get("strategy") or {}).get("matrix")
        if isinstance(matrix, dict):
            for key in keys:
                found += _strings(matrix.get(key))
            for extra in matrix.get("include") or []:
                if isinstance(extra, dict):
                    found += _strings(extra.get(keys[0]) or extra.get(keys[1]))
        for step in body.get("steps") or []:
            if isinstance(step, dict) and action in str(step.get("uses", "")):
                wanted = str((step.get("with") or {}).get(keys[0], ""))
                if wanted and "${{" not in wanted:
                    found.append(wanted)
    return list(dict.fromkeys(found))


@dataclass(frozen=True)
class WorkflowJob:
    """One job of a CI workflow: where it is, what it is called, what it runs and on which
    Pythons."""

    workflow: str  # .github/workflows/test.yml
    job: str
    workflow_title: str  # the file's stem and the workflow's name
    job_title: str  # the job's id and name
    scripts: str  # every `run:` of its steps (and a `with: run:` of an action's)
    versions: tuple[str, ...]
    version_files: tuple[str, ...] = ()  # setup-python's `python-version-file`s


def workflow_jobs(name: str, text: str) -> list[WorkflowJob]:
    """The jobs of the workflow file `name` (nothing for one that is not YAML)."""
    import yaml

    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError:
        return []
    jobs = data.get("jobs") if isinstance(data, dict) else None
    if not isinstance(jobs, dict):
        return []
    title = f"{Path(name).stem} {data.get('name') or ''}"
    found: list[WorkflowJob] = []
    for job, body in jobs.items():
        if not isinstance(body, dict):
            continue
        steps = [s for s in body.get("steps") or [] if isinstance(s, dict)]
        runs = [str(s.get("run") or (s.get("with") or {}).get("run") or "") for s in steps]
        versions = workflow_versions(yaml.safe_dump({"jobs": {job: body}}))
        own = f"{job} {body.get('name') or ''}"
        files = tuple(
            str((s.get("with") or {}).get("python-version-file"))
            for s in steps
            if "setup-python" in str(s.get("uses", ""))
            and (s.get("with") or {}).get("python-version-file")
        )
        runs_text = "\n".join(runs)
        found.append(WorkflowJob(name, str(job), title, own, runs_text, tuple(versions), files))
    return found


def tool_of(text: str) -> str | None:
    """The test tool a command line runs ('pytest', 'tox', 'nox', 'unittest', 'make test')."""
    hits = [(m.start(), tool) for tool, rx in _TEST_TOOLS if (m := rx.search(text))]
    return min(hits)[1] if hits else None


def testing_workflow(read: Any, names: list[str], command: str | None) -> Evidence | None:
    """The Pythons of the CI jobs that run the tests: those running the failing `command`
    verbatim, else any test command (pytest, tox, nox, unittest, make test: a job running
    `tox` runs pytest too), else any job that is not a benchmark, docs, lint, typing or
    release job; a job naming no Python (a dynamic matrix) says nothing."""
    jobs = [_with_files(j, read) for name in names for j in workflow_jobs(name, read(name) or "")]
    jobs = [j for j in jobs if j.versions and not _not_tests(j)]
    wanted = (command or "").strip()

    def rank(job: WorkflowJob) -> int:
        if wanted and wanted in job.scripts:
            return 0
        return 1 if tool_of(job.scripts) else 2

    if not jobs:
        return None
    best = min(map(rank, jobs))
    chosen = [j for j in jobs if rank(j) == best]
    what = ("runs the failing command", "runs the tests", "is not a benchmark, docs or release job")
    where = ", ".join(dict.fromkeys(f"{j.workflow} (job {j.job})" for j in chosen))
    versions = list(dict.fromkeys(v for j in chosen for v in j.versions))
    return Evidence(f"the CI workflow {where}, which {what[best]},", versions, None)


def _with_files(job: WorkflowJob, read: Any) -> WorkflowJob:
    """`job` with the versions its `python-version-file`s name (structlog's
    `.python-version-default`); a pyproject.toml's range is read as a range elsewhere."""
    found = list(job.versions)
    for name in job.version_files:
        if name.endswith((".toml", ".cfg")):
            continue
        text = read(name) or ""
        found += [ln.strip() for ln in text.splitlines() if ln.strip() and ln.strip()[0] != "#"]
    return WorkflowJob(
        job.workflow, job.job, job.workflow_title, job.job_title, job.scripts,
        tuple(dict.fromkeys(found)), job.version_files,
    )  # fmt: skip


def _not_tests(job: WorkflowJob) -> bool:
    """A benchmark, docs, lint, typing or release job: by its own name, or by its workflow's
    unless the job says it tests ("Lint and test" / job `test` does)."""
    if _NOT_TESTS.search(job.job_title):
        return True
    return bool(_NOT_TESTS.search(job.workflow_title)) and "test" not in job.job_title.lower()


def nox_versions(text: str) -> list[str]:
    """3.X for every version on a line of noxfile.py that assigns a python list."""
    found = [
        version
        for match in _NOX_LINE.finditer(text)
        for version in _NOX_VERSION.findall(match.group(1))
    ]
    return list(dict.fromkeys(found))


def tox_versions(text: str) -> list[str]:
    """3.X for every pyXY in tox.ini's envlist."""
    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read_string(text)
    except configparser.Error:
        return []
    envlist = parser.get("tox", "envlist", fallback="")
    return list(dict.fromkeys(f"{a}.{b}" for a, b in _TOX_ENV.findall(envlist)))


def _strings(value: Any) -> list[str]:
    items = value if isinstance(value, list) else [value] if value is not None else []
    # YAML reads `3.10` as the float 3.1: a matrix written that way means 3.10.
    return [("3.10" if item == 3.1 else str(item)) for item in items if item is not None]


def _ranges(texts: dict[str, str]) -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    try:
        project = tomllib.loads(texts["pyproject.toml"]).get("project", {})
    except tomllib.TOMLDecodeError:
        project = {}
    if isinstance(project, dict) and isinstance(project.get("requires-python"), str):
        found.append(("pyproject.toml's requires-python", project["requires-python"]))
    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read_string(texts["setup.cfg"])
        cfg = parser.get("options", "python_requires", fallback="").strip()
    except configparser.Error:
        cfg = ""
    if cfg:
        found.append(("setup.cfg's python_requires", cfg))
    match = _PYTHON_REQUIRES.search(texts["setup.py"])
    if match:
        found.append(("setup.py's python_requires", match.group(1)))
    return found


def reader(repo: Path, base: str) -> Any:
    is_git = proc.git("rev-parse", "--verify", f"{base}^{{commit}}", cwd=repo, check=False).passed

    def read(path: str) -> str | None:
        if is_git:
            shown = proc.git("show", f"{base}:{path}", cwd=repo, check=False)
            return shown.output[:_READ_CHARS] if shown.passed else None
        try:
            return (repo / path).read_text(encoding="utf-8", errors="replace")[:_READ_CHARS]
        except OSError:
            return None

    return read


def workflow_files(repo: Path, base: str) -> list[str]:
    where = ".github/workflows"
    listed = proc.git("ls-tree", "--name-only", f"{base}:{where}", cwd=repo, check=False)
    if listed.passed:
        names = listed.output.split()
    else:
        folder = repo / where
        names = sorted(p.name for p in folder.glob("*")) if folder.is_dir() else []
    return [f"{where}/{n}" for n in names if n.endswith((".yml", ".yaml"))]
