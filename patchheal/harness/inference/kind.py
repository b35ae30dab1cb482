"""Which harness a repository needs, from its files at the base commit and the files that changed.

The files the failing change touched speak first (a DAG edited under
`airflow/dags/` is an Airflow failure even in a repository that is mostly a
Python package); then the repository's files at the base commit (not the
user's working tree, which may be on another branch or dirty). Each answer
comes with the sentence saying why, for the CLI and the report. A rule whose
harness is not defined on the search path is skipped.

A folder named `dags/` is not always Airflow's, so the Airflow rules also read
the matching files (at the base commit) for an Airflow import.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from patchheal import proc
from patchheal.harness.compose.file import COMPOSE_FILES, problem_in


@dataclass(frozen=True)
class Rule:
    """Files matching any of `patterns` point at `harness`."""

    harness: str
    patterns: tuple[str, ...]
    # When set, a matching file counts only if its text matches too (read at the base commit).
    content: re.Pattern[str] | None = None
    content_says: str = ""
    # When set, why a matching file's text cannot be run by the harness (None: it can): such
    # a file is passed over, and the choice says so.
    check: Callable[[str, str], str | None] | None = None


def _compose_problem(path: str, text: str) -> str | None:
    return problem_in(text, Path(path))


# `import airflow`, `from airflow.decorators import dag`, `from airflow import DAG`.
AIRFLOW_IMPORT = re.compile(r"^\s*(?:from\s+airflow(?:\.\w+)*\s+import|import\s+airflow)\b", re.M)
_AIRFLOW_DAGS = ("airflow/dags/*.py", "dags/*.py")
# Files read per rule at most: a DAG folder with hundreds of files needs only one hit.
_MAX_READS = 20
_READ_CHARS = 256 * 1024

# Changed files: only the signals specific enough to override what the repository looks like.
CHANGED_RULES = (
    Rule("airflow", _AIRFLOW_DAGS, AIRFLOW_IMPORT, "imports airflow"),
    Rule("dbt", ("dbt_project.yml", "*/dbt_project.yml", "models/*.sql", "*/models/*.sql")),
    Rule("compose", COMPOSE_FILES, check=_compose_problem),
)
# The repository at the base commit, most specific first. A compose file the compose
# harness cannot run (a `build:` service, a host bind mount) says nothing: tox-dev/filelock's
# `compose.yaml` builds an arm64 Termux userland for one CI job, and picking it failed every
# heal of the project's pytest steps.
REPO_RULES = (
    Rule("compose", COMPOSE_FILES, check=_compose_problem),
    Rule("airflow", _AIRFLOW_DAGS, AIRFLOW_IMPORT, "imports airflow"),
    Rule("dbt", ("dbt_project.yml", "*/dbt_project.yml")),
    Rule("python", ("pyproject.toml", "setup.cfg", "setup.py", "requirements*.txt")),
    Rule("node", ("package.json",)),
)


@dataclass(frozen=True)
class Choice:
    harness: str
    reason: str


Reader = Callable[[str], str | None]


def _match(
    rule: Rule, files: Sequence[str], read: Reader | None, passed_over: list[str]
) -> str | None:
    """The first file matching the rule ("path (imports airflow)" for a content rule); a
    file the rule's check finds unusable is added to `passed_over` with the reason."""
    reads = 0
    for pattern in rule.patterns:
        for path in files:
            # fnmatch's `*` crosses `/`; a pattern without one matches the root only.
            if not fnmatch.fnmatchcase(path, pattern) or ("/" not in pattern and "/" in path):
                continue
            if rule.check is not None and read is not None:
                text = read(path)
                problem = rule.check(path, text) if text is not None else None
                if problem is not None:
                    problem = problem.removeprefix(f"{path}: ")  # the file is named once
                    passed_over.append(f"{path} passed over: {_first_line(problem)}")
                    continue
            if rule.content is None:
                return path
            if read is None or reads >= _MAX_READS:
                return None
            reads += 1
            text = read(path)
            if text is not None and rule.content.search(text):
                return f"{path} ({rule.content_says})"
    return None


def choose(
    repo_files: Sequence[str],
    changed: Sequence[str],
    defined: Callable[[str], bool],
    where: str = "in the repository",
    read: Reader | None = None,
) -> Choice:
    """The harness the files suggest, and why; `read` gives a file's text for content rules
    (without it they never match)."""
    passed_over: list[str] = []
    for rule in CHANGED_RULES:
        found = _match(rule, changed, read, passed_over) if defined(rule.harness) else None
        if found is not None:
            return Choice(rule.harness, f"the failing change touched {found} → {rule.harness}")
    for rule in REPO_RULES:
        found = _match(rule, repo_files, read, passed_over) if defined(rule.harness) else None
        if found is not None:
            return Choice(
                rule.harness, f"found {found} → {rule.harness} ({_with(where, passed_over)})"
            )
    return Choice(
        "generic",
        f"no pyproject, setup.cfg, requirements, package.json, dbt project, DAG folder or "
        f"compose file ({_with(where, passed_over)}) → generic",
    )


def _with(where: str, passed_over: list[str]) -> str:
    """`where`, and each file passed over (once: a changed file is also the repository's)."""
    return "; ".join([where, *dict.fromkeys(passed_over)])


def _first_line(text: str, limit: int = 200) -> str:
    line = text.strip().splitlines()[0] if text.strip() else text
    return line if len(line) <= limit else line[: limit - 1] + "…"


def files_at(repo: Path, ref: str) -> list[str] | None:
    """Every path in `ref`'s tree, or None when `repo` is not a git repository with `ref`."""
    listed = proc.git("ls-tree", "-r", "--name-only", "-z", ref, "--", cwd=repo, check=False)
    if not listed.passed:
        return None
    return [p for p in listed.output.split("\0") if p]


def changed_files(repo: Path, base: str, last_green: str | None) -> list[str]:
    """Files the failing change touched: last_green..base when known, else base's own commit."""
    since = last_green or f"{base}~1"
    diff = proc.git("diff", "--name-only", "-z", since, base, "--", cwd=repo, check=False)
    if not diff.passed:  # a root commit, or last_green unknown to this clone
        shown = proc.git("show", "--name-only", "-z", "--format=", base, cwd=repo, check=False)
        return [p for p in shown.output.split("\0") if p.strip()] if shown.passed else []
    return [p for p in diff.output.split("\0") if p]


def infer(
    repo: Path,
    defined: Callable[[str], bool],
    *,
    base: str = "HEAD",
    last_green: str | None = None,
) -> Choice:
    """The harness for `repo` at `base`; the working tree only when it is not a git repository."""
    files = files_at(repo, base)
    if files is None:
        # Three levels deep is enough for every rule, and never walks a node_modules.
        found = [p for depth in ("*", "*/*", "*/*/*") for p in repo.glob(depth) if p.is_file()]
        listed = sorted(str(p.relative_to(repo)) for p in found)
        return choose(
            listed,
            [],
            defined,
            where="in the directory, not a git repository",
            read=lambda path: _read_file(repo / path),
        )
    commit = proc.git("rev-parse", "--short=12", base, cwd=repo, check=False).output.strip()
    changed = changed_files(repo, base, last_green)

    def read(path: str) -> str | None:
        # A changed file deleted by the change has no text at base: it says nothing.
        shown = proc.git("show", f"{base}:{path}", cwd=repo, check=False)
        return shown.output[:_READ_CHARS] if shown.passed else None

    return choose(files, changed, defined, where=f"in {base} at {commit}", read=read)


def _read_file(path: Path) -> str | None:
    try:
        with path.open(encoding="utf-8", errors="replace") as stream:
            return stream.read(_READ_CHARS)
    except OSError:
        return None
