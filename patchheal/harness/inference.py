"""Which harness a repository needs, from its files at the base commit and the files that changed.

The files the failing change touched speak first (a DAG edited under
`airflow/dags/` is an Airflow failure even in a repository that is mostly a
Python package); then the repository's files at the base commit (not the
user's working tree, which may be on another branch or dirty). Each answer
comes with the sentence saying why, for the CLI and the report. A rule whose
harness is not defined on the search path is skipped.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from patchheal import proc
from patchheal.harness.composefile import COMPOSE_FILES


@dataclass(frozen=True)
class Rule:
    """Files matching any of `patterns` point at `harness`."""

    harness: str
    patterns: tuple[str, ...]


# Changed files: only the signals specific enough to override what the repository looks like.
CHANGED_RULES = (
    Rule("airflow", ("airflow/dags/*", "dags/*")),
    Rule("dbt", ("dbt_project.yml", "*/dbt_project.yml", "models/*.sql", "*/models/*.sql")),
    Rule("compose", COMPOSE_FILES),
)
# The repository at the base commit, most specific first.
REPO_RULES = (
    Rule("compose", COMPOSE_FILES),
    Rule("airflow", ("airflow/dags/*.py", "dags/*.py")),
    Rule("dbt", ("dbt_project.yml", "*/dbt_project.yml")),
    Rule("python", ("pyproject.toml", "setup.cfg", "setup.py", "requirements*.txt")),
    Rule("node", ("package.json",)),
)


@dataclass(frozen=True)
class Choice:
    harness: str
    reason: str


def _match(rule: Rule, files: Sequence[str]) -> str | None:
    for pattern in rule.patterns:
        for path in files:
            # fnmatch's `*` crosses `/`; a pattern without one matches the root only.
            if fnmatch.fnmatchcase(path, pattern) and ("/" in pattern or "/" not in path):
                return path
    return None


def choose(
    repo_files: Sequence[str],
    changed: Sequence[str],
    defined: Callable[[str], bool],
    where: str = "in the repository",
) -> Choice:
    """The harness the files suggest, and why."""
    for rule in CHANGED_RULES:
        found = _match(rule, changed)
        if found is not None and defined(rule.harness):
            return Choice(rule.harness, f"the failing change touched {found} → {rule.harness}")
    for rule in REPO_RULES:
        found = _match(rule, repo_files)
        if found is not None and defined(rule.harness):
            return Choice(rule.harness, f"found {found} → {rule.harness} ({where})")
    return Choice(
        "generic",
        f"no pyproject, setup.cfg, requirements, package.json, dbt project, DAG folder or "
        f"compose file ({where}) → generic",
    )


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
        return choose(listed, [], defined, where="in the directory, not a git repository")
    commit = proc.git("rev-parse", "--short=12", base, cwd=repo, check=False).output.strip()
    changed = changed_files(repo, base, last_green)
    return choose(files, changed, defined, where=f"in {base} at {commit}")
