"""Job specs: loaded from TOML, merged with repo defaults and flags, validated.

Precedence, lowest first: built-in defaults, `[tool.patchheal]` in the job
repository's pyproject.toml, the job spec, the command line.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from patchheal.errors import SpecError, validation_problems
from patchheal.harness.tables import check_debian_package
from patchheal.intake import rawspec
from patchheal.proposers.config import PatchfilesConfig, ProposerConfig

_JOB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,255}$")
# A subset of what `git check-ref-format --branch` takes: parts of safe characters joined by
# '/', none starting with '.' or ending in '.lock', no '..' (git refuses those).
_BRANCH_PART = (
    r"(?!\.)(?![A-Za-z0-9._-]*\.lock(?:/|$))(?![A-Za-z0-9._-]*\.\.)[A-Za-z0-9._-]+(?<!\.)"
)
_BRANCH = re.compile(rf"^(?!-){_BRANCH_PART}(?:/{_BRANCH_PART})*$")
# Upper bounds: a count or a timeout beyond these is a typo, and an unbounded
# one (flaky_reruns = 1e9) would run for ever instead of being refused.
_DAY = 86400.0

DEFAULT_PROTECTED_PATHS: tuple[str, ...] = (
    ".github/**",
    ".gitlab-ci.yml",
    ".ci/**",
    ".circleci/**",
    "Jenkinsfile",
    "azure-pipelines.yml",
    "*.lock",
    "poetry.lock",
    "uv.lock",
    "Pipfile.lock",
    "package-lock.json",
    "yarn.lock",
    "pnpm-lock.yaml",
    "requirements*.txt",
    "Cargo.lock",
    "go.sum",
)


class _Spec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class JobSection(_Spec):
    """The `[job]` table."""

    id: str = Field(description="job id: letters, digits, '.', '_' and '-'")
    repo: str = Field(".", description="path (or URL) of the job's git repository")
    base: str = Field("HEAD", description="the ref that fails")
    harness: str = Field(
        "auto", description="'auto', 'local', a folder under harnesses/, or a path"
    )
    setup: tuple[str, ...] = Field(
        (), max_length=100, description="run once per dependency fingerprint"
    )
    env: tuple[str, ...] = Field((), max_length=200, description="variables passed through by name")
    last_green: str | None = Field(None, description="last ref where the job passed, if known")
    python: str | None = Field(
        None,
        description="the Python the step runs on ('3.9'), among the harness's [pythons]; "
        "unset: inferred from the repository (docs/harnesses.md)",
    )
    python_from_workflow: str | None = Field(
        None,
        description="the python-version the failing CI job's setup-python asked for (set "
        "from `workflow`); trusted before the repository's files, after `python`",
    )
    node: str | None = Field(
        None,
        description="the Node the step runs on ('20'), among the harness's [nodes]; "
        "unset: inferred from the repository (docs/harnesses.md)",
    )
    node_from_workflow: str | None = Field(
        None,
        description="the node-version the failing CI job's setup-node asked for (set from "
        "`workflow`); trusted before the repository's files, after `node`",
    )
    packages: tuple[str, ...] = Field(
        (),
        max_length=100,
        description="Debian packages the job's steps need beside the harness image's "
        "(e.g. ['graphviz', 'libpq-dev']): installed offline from Debian's packages into "
        "an image of their own, built once per sorted list (docker harnesses)",
    )
    objective: str = Field("", description="what the job is for, shown to proposers")
    workflow: str | None = Field(
        None,
        description="CI workflow file (repo-relative, e.g. '.github/workflows/ci.yml'): "
        "the harness, setup and the step are derived from its job `workflow_job`",
    )
    workflow_job: str | None = Field(None, description="the workflow's job (with `workflow`)")
    workflow_step: str | None = Field(
        None, description="the `run:` step to heal: its name or number (default: from the log)"
    )
    workflow_log: Path | None = Field(
        None, description="the CI job's log: finds the failing step, and is its first evidence"
    )
    matrix: dict[str, str] = Field(
        default_factory=dict, description="the workflow matrix entry (default: the first one)"
    )
    pr_command: str | None = Field(
        None,
        description="opens a pull request for the verified branch when `heal --open-pr` asks: "
        "e.g. 'gh pr create --head {branch} --base {base} --body-file {report}'",
    )
    branch: str | None = Field(
        None,
        max_length=200,
        description="the branch a verified patch is published to; unset: patchheal/local/<id>",
    )

    @model_validator(mode="after")
    def _workflow_needs_a_job(self) -> JobSection:
        if (self.workflow is None) != (self.workflow_job is None):
            raise ValueError("workflow and workflow_job go together: give both or neither")
        return self

    @field_validator("id")
    @classmethod
    def _id_is_safe(cls, value: str) -> str:
        if not _JOB_ID.match(value):
            raise ValueError(
                "must be 1-128 of letters, digits, '.', '_' or '-', starting with a letter or digit"
            )
        return value

    @field_validator("packages")
    @classmethod
    def _debian_packages(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for name in value:
            check_debian_package(name)
        return value

    @field_validator("harness")
    @classmethod
    def _usable_harness(cls, value: str) -> str:
        try:  # a name or a path: either becomes a file system path
            rawspec.check_name(value, "harness")
        except SpecError as exc:
            raise ValueError(str(exc).removeprefix("harness: ")) from None
        return value

    @field_validator("base", "last_green")
    @classmethod
    def _usable_revision(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                rawspec.check_ref(value, "revision")
            except SpecError as exc:
                raise ValueError(str(exc).removeprefix("revision: ")) from None
        return value

    @field_validator("branch")
    @classmethod
    def _usable_branch(cls, value: str | None) -> str | None:
        if value is not None and not _BRANCH.match(value):
            raise ValueError(
                f"{value[:80]!r} is not a usable branch name (letters, digits, '.', '_', '-' and "
                "'/' between parts; no part starting with '.' or ending in '.lock', no '..')"
            )
        return value

    @field_validator("env")
    @classmethod
    def _variable_names(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        bad = [name for name in value if not _ENV_NAME.match(name)]
        if bad:
            raise ValueError(f"not environment variable names: {bad[:5]}")
        return value


class StepSpec(_Spec):
    """One `[[steps]]` entry: a command healed in order."""

    name: str = Field(description="short step name used in reports and checkpoints")
    command: str = Field(description="the exact command the CI job runs")
    log: Path | None = Field(None, description="the original CI log, first evidence")
    junit: Path | None = Field(None, description="a JUnit XML report of the original run")
    results: str | None = Field(
        None,
        description="a glob (relative to the worktree) of JUnit XML files the step writes, "
        "for runners patchheal has no collector for; read after every run",
    )

    @field_validator("results")
    @classmethod
    def _results_inside_worktree(cls, value: str | None) -> str | None:
        if value is not None and (value.startswith("/") or ".." in Path(value).parts):
            raise ValueError("must be a glob relative to the worktree, without '..'")
        problem = None if value is None else rawspec.results_glob_problem(value)
        if problem:
            raise ValueError(problem)
        return value


class RegressionSpec(_Spec):
    """The `[regression]` table: commands that must not get worse."""

    command: str | None = Field(None, description="e.g. 'pytest -q'")
    harness: bool = Field(
        True,
        description="also run the harness definition's own regression steps (its "
        "`regression` list, e.g. the airflow harness's DAG parse check); false leaves "
        "only `command`",
    )

    def steps(self, harness_steps: Sequence[str]) -> tuple[str, ...]:
        """The job's regression commands: `command`, then the harness's (unless turned
        off), each once: a spec that already names the harness's command runs it once."""
        named = [self.command] if self.command else []
        if self.harness:
            named += harness_steps
        unique: dict[str, str] = {}
        for command in named:
            unique.setdefault(" ".join(command.split()), command)
        return tuple(unique.values())


class BudgetSpec(_Spec):
    """The `[budget]` table. Per step unless the name says job."""

    max_attempts: int = Field(3, ge=1, le=1000, description="attempts per step")
    step_timeout_seconds: float = Field(
        900.0, gt=0, le=7 * _DAY, description="wall clock of one step run"
    )
    idle_timeout_seconds: float = Field(
        300.0, gt=0, le=7 * _DAY, description="no output for this long kills a run"
    )
    no_progress_limit: int = Field(
        2, ge=1, le=1000, description="same fingerprint and diff hash this many times in a row"
    )
    max_hard_resets: int = Field(1, ge=0, le=100, description="hard resets per step")
    job_wall_seconds: float | None = Field(
        None, gt=0, le=30 * _DAY, description="total wall time of the job"
    )
    max_proposer_calls: int | None = Field(
        None, ge=1, le=100_000, description="proposer calls per job"
    )
    max_model_tokens: int | None = Field(None, ge=1, le=10**10, description="model tokens per job")
    flaky_reruns: int = Field(
        1,
        ge=0,
        le=20,
        description="extra reproduction runs of a failing step before any patch: a pass "
        "among them makes the step flaky (never patched); when ≥ 1, each regression step's "
        "baseline is two runs of the base, and what they disagree on is compared by count",
    )
    verify_runs: int = Field(
        2, ge=1, le=10, description="runs of the failing step per candidate; every one must pass"
    )
    bucket_limit: int = Field(
        2,
        ge=1,
        le=1000,
        description="failures of one bucket (strategy + touched files + fingerprint) after "
        "which its next candidate is not verified and the approach escalates",
    )


class MemorySpec(_Spec):
    """The `[memory]` table: the similar-failure search's limits; proposal leases."""

    similar_fixes: int = Field(3, ge=0, le=100, description="fixes of similar failures shown")
    similar_failed: int = Field(
        3, ge=0, le=100, description="failed approaches of similar failures shown"
    )
    similar_threshold: float = Field(0.6, ge=0, le=1, description="least similarity to count")
    similar_scan: int = Field(
        500, ge=1, le=100_000, description="recent fingerprints compared at most"
    )
    similar_time_budget_seconds: float = Field(
        2.0,
        gt=0,
        le=600,
        description="time the search may take; past it, results are marked degraded",
    )
    lease_wait_seconds: float = Field(
        600.0,
        ge=0,
        le=86_400,
        description="how long a step waits while another run holds the proposal lease of its "
        "fingerprint (asks that run's fix first); then it asks its own proposer. 0: never waits",
    )
    lease_ttl_seconds: float = Field(
        60.0,
        ge=2,
        le=3_600,
        description="a proposal lease lapses this long after its holder's last heartbeat "
        "(a holder whose pid is gone on this host loses it at once)",
    )


class PolicySpec(_Spec):
    """The `[policy]` table: gates every candidate passes before it runs."""

    protected_paths: tuple[str, ...] = Field(
        DEFAULT_PROTECTED_PATHS,
        description="gitignore-style patterns (the last match wins; `!pattern` excepts)",
    )
    extra_protected_paths: tuple[str, ...] = Field(
        (),
        description="added to protected_paths (a `!` here excepts from these patterns only, "
        "never from protected_paths)",
    )
    test_paths: tuple[str, ...] = Field(
        ("tests/**", "test/**", "**/test_*.py", "**/*_test.py", "**/conftest.py"),
        description="files where deleting, skipping or weakening tests is refused",
    )
    allow_test_changes: bool = Field(
        False,
        description="let candidates change existing test files (false: a candidate may add "
        "tests, but not change, delete or move a line that is there)",
    )
    allow_artifacts: tuple[str, ...] = Field(
        (),
        description="gitignore-style patterns of binary or compiled files a candidate may add "
        "or change (e.g. `assets/*.png`); anywhere else binaries, `.pyc`, `__pycache__/`, "
        "shared objects and other build outputs are refused",
    )
    max_changed_lines: int = Field(400, ge=1, le=1_000_000, description="added + removed lines")
    max_files: int = Field(20, ge=1, le=100_000, description="files touched by one candidate")

    @field_validator("protected_paths", "extra_protected_paths", "test_paths", "allow_artifacts")
    @classmethod
    def _globs_compile(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for pattern in value:
            problem = rawspec.glob_problem(pattern)
            if problem:
                raise ValueError(f"glob {pattern[:80]!r}: {problem}")
        return value


class JobSpec(_Spec):
    """A whole job spec file."""

    job: JobSection
    steps: tuple[StepSpec, ...] = Field(min_length=1, max_length=rawspec.MAX_ITEMS)
    regression: RegressionSpec = RegressionSpec()
    proposer: ProposerConfig | None = None
    proposers: tuple[ProposerConfig, ...] = ()
    budget: BudgetSpec = BudgetSpec()
    policy: PolicySpec = PolicySpec()
    memory: MemorySpec = MemorySpec()

    @model_validator(mode="after")
    def _one_proposer_form(self) -> JobSpec:
        if self.proposer is not None and self.proposers:
            raise ValueError("set either [proposer] or [[proposers]], not both")
        names = [s.name for s in self.steps]
        if len(set(names)) != len(names):
            raise ValueError(f"[[steps]] names must be unique, got {names}")
        return self

    @property
    def proposer_chain(self) -> tuple[ProposerConfig, ...]:
        if self.proposer is not None:
            return (self.proposer,)
        return self.proposers


def _format_errors(error: ValidationError, source: str) -> str:
    problems = validation_problems(error)
    # pydantic's words for a discriminated union ("Input tag ... found using 'kind'")
    # become the spec's: which kinds there are.
    for i, item in enumerate(error.errors()):
        where = ".".join(str(part) for part in item["loc"])
        ctx = item.get("ctx", {})
        if item["type"] == "union_tag_invalid":
            problems[i] = f"{where}: unknown kind {ctx.get('tag')!r}; known: " + ctx.get(
                "expected_tags", ""
            ).replace("'", "")
        elif item["type"] == "union_tag_not_found":
            problems[i] = f"{where}: needs a kind (patchfiles, llm, agent or scripted)"
    return "\n  ".join([f"invalid job spec {source}:", *problems])


def _deep_merge(low: dict[str, Any], high: dict[str, Any]) -> dict[str, Any]:
    merged = dict(low)
    for key, value in high.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def repo_defaults(repo: Path) -> dict[str, Any]:
    """`[tool.patchheal]` of the repository's pyproject.toml as spec tables, or {}.

    It takes the spec's tables (`[tool.patchheal.budget]`, `.policy`, ...) and,
    as a shorthand, flat budget and policy keys (`max_attempts = 5`).
    """
    pyproject = repo / "pyproject.toml"
    try:
        if not pyproject.is_file():
            return {}
        text = rawspec.read_spec_bytes(pyproject).decode("utf-8")
        rawspec.check_toml_text(text, str(pyproject))
        data = tomllib.loads(text)
    except (tomllib.TOMLDecodeError, UnicodeDecodeError, RecursionError, OSError) as exc:
        raise SpecError(f"{pyproject}: cannot read [tool.patchheal]: {exc}") from None
    tool = data.get("tool", {})
    section = tool.get("patchheal", {}) if isinstance(tool, dict) else {}
    if not isinstance(section, dict):
        raise SpecError(f"{pyproject}: [tool.patchheal] must be a table")
    rawspec.check_raw(section, f"{pyproject} [tool.patchheal]")
    tables: dict[str, Any] = {}
    for key, value in section.items():
        if key in rawspec.TABLES:
            tables[key] = _deep_merge(tables.get(key, {}), value) if key in tables else value
        elif key == "python":  # shorthand for [tool.patchheal.job] python
            tables.setdefault("job", {})["python"] = value
        elif key in BudgetSpec.model_fields or key in PolicySpec.model_fields:
            table = "budget" if key in BudgetSpec.model_fields else "policy"
            tables.setdefault(table, {})[key] = value
        else:
            known = sorted([*rawspec.TABLES, *BudgetSpec.model_fields, *PolicySpec.model_fields])
            raise SpecError(
                f"{pyproject}: [tool.patchheal] has an unknown key {key!r}; known: "
                + ", ".join(known)
            )
    try:  # so that a mistake here is blamed on pyproject.toml, not on the job spec
        BudgetSpec.model_validate(tables.get("budget", {}))
        PolicySpec.model_validate(tables.get("policy", {}))
    except ValidationError as exc:
        raise SpecError(_format_errors(exc, f"{pyproject} [tool.patchheal]")) from None
    return tables


def build_spec(
    data: dict[str, Any], *, source: str, base_dir: Path, overrides: dict[str, Any] | None = None
) -> JobSpec:
    """Validate raw spec data, resolving relative paths against `base_dir`."""
    rawspec.check_raw(data, source)
    try:
        data = _resolve_paths(data, base_dir)
        repo = Path(str(data.get("job", {}).get("repo", ".")))
        if not _looks_remote(str(repo)) and repo.is_dir():
            data = _deep_merge(repo_defaults(repo), data)
    except SpecError as exc:
        raise SpecError(f"invalid job spec {source}: {exc}") from None
    if overrides:
        data = _deep_merge(data, overrides)
    data = _with_workflow(data)
    try:
        return JobSpec.model_validate(data)
    except ValidationError as exc:
        raise SpecError(_format_errors(exc, source)) from None


def _with_workflow(data: dict[str, Any]) -> dict[str, Any]:
    """Fill harness, setup, passthrough and the step from `[job] workflow`, when it is set.

    What the spec says itself wins: an explicit harness, its own [[steps]]; the
    derived setup runs before the spec's own.
    """
    job = data.get("job")
    if not isinstance(job, dict) or not job.get("workflow") or not job.get("workflow_job"):
        return data
    from patchheal.harness.ci.workflow import derive_for_job

    derived = derive_for_job(job)
    job = dict(job)
    if job.get("harness", "auto") == "auto":
        job["harness"] = derived.harness
    if derived.python and not job.get("python") and not job.get("python_from_workflow"):
        job["python_from_workflow"] = derived.python
    if derived.node and not job.get("node") and not job.get("node_from_workflow"):
        job["node_from_workflow"] = derived.node
    # Idempotent, so a printed spec (which carries the derived setup) loads to the same spec.
    own = [c for c in job.get("setup", []) if c not in derived.setup]
    job["setup"] = [*derived.setup, *own]
    job["env"] = sorted({*derived.passthrough, *job.get("env", [])})
    out = {**data, "job": job}
    if not data.get("steps"):
        step = dict(derived.spec_fragment()["steps"][0])
        if job.get("workflow_log"):
            step["log"] = job["workflow_log"]
        out["steps"] = [step]
    return out


def load_spec(path: Path, overrides: dict[str, Any] | None = None) -> JobSpec:
    """Read, merge and validate a job spec file."""
    raw = rawspec.read_spec_bytes(path)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise SpecError(f"job spec {path} is not UTF-8 text") from None
    rawspec.check_toml_text(text, str(path))  # before the parser, whose time it bounds
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise SpecError(f"job spec {path} is not valid TOML: {exc}") from None
    except RecursionError:
        raise SpecError(f"job spec {path}: arrays or tables nested too deeply") from None
    return build_spec(data, source=str(path), base_dir=path.resolve().parent, overrides=overrides)


def _looks_remote(value: str) -> bool:
    return "://" in value or value.startswith("git@")


def _resolve_paths(data: dict[str, Any], base_dir: Path) -> dict[str, Any]:
    """Make the spec's relative paths relative to the spec file, not the cwd; refuse paths
    the file system cannot take, and files that are not regular files."""
    data = {k: (dict(v) if isinstance(v, dict) else v) for k, v in data.items()}

    def absolute(value: Any, where: str) -> Any:
        if isinstance(value, str) and not _looks_remote(value):
            return str(rawspec.resolve(base_dir / rawspec.check_path(value, where), where))
        return value

    job = data.get("job")
    if isinstance(job, dict) and "repo" in job:
        job["repo"] = absolute(job["repo"], "job.repo")
    elif isinstance(job, dict):
        job["repo"] = str(base_dir)
    if isinstance(job, dict) and "workflow_log" in job:
        job["workflow_log"] = absolute(job["workflow_log"], "job.workflow_log")
    steps = data.get("steps")
    if isinstance(steps, list):
        resolved = []
        for i, step in enumerate(steps):
            if isinstance(step, dict):
                step = {**step}
                for key in ("log", "junit"):
                    if key in step:
                        step[key] = absolute(step[key], f"steps.{i}.{key}")
                        if isinstance(step[key], str):
                            rawspec.check_regular_file(Path(step[key]), f"steps.{i}.{key}")
            resolved.append(step)
        data["steps"] = resolved
    chain = (
        [data["proposer"]] if isinstance(data.get("proposer"), dict) else data.get("proposers", [])
    )
    for proposer in chain if isinstance(chain, list) else []:
        if isinstance(proposer, dict):
            if "dir" in proposer:
                proposer["dir"] = absolute(proposer["dir"], "proposer.dir")
            if isinstance(proposer.get("paths"), list):
                proposer["paths"] = [absolute(p, "proposer.paths") for p in proposer["paths"]]
                for path in proposer["paths"]:
                    if isinstance(path, str):
                        rawspec.check_regular_file(Path(path), "proposer.paths")
    return data


__all__ = [
    "DEFAULT_PROTECTED_PATHS",
    "BudgetSpec",
    "JobSpec",
    "MemorySpec",
    "PatchfilesConfig",
    "PolicySpec",
    "StepSpec",
    "build_spec",
    "load_spec",
]
