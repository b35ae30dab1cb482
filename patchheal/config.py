"""Job specs: loaded from TOML, merged with repo defaults and flags, validated.

Precedence, lowest first: built-in defaults, `[tool.patchheal]` in the job
repository's pyproject.toml, the job spec, the command line.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from patchheal.errors import SpecError, validation_problems
from patchheal.proposers.config import PatchfilesConfig, ProposerConfig

_JOB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")

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
    model_config = ConfigDict(extra="forbid", frozen=True)


class JobSection(_Spec):
    """The `[job]` table."""

    id: str = Field(description="job id: letters, digits, '.', '_' and '-'")
    repo: str = Field(".", description="path (or URL) of the job's git repository")
    base: str = Field("HEAD", description="the ref that fails")
    harness: str = Field(
        "auto", description="'auto', 'local', a folder under harnesses/, or a path"
    )
    setup: tuple[str, ...] = Field((), description="run once per dependency fingerprint")
    env: tuple[str, ...] = Field((), description="variables passed through by name")
    last_green: str | None = Field(None, description="last ref where the job passed, if known")
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


class StepSpec(_Spec):
    """One `[[steps]]` entry: a command healed in order."""

    name: str = Field(description="short step name used in reports and checkpoints")
    command: str = Field(description="the exact command the CI job runs")
    log: Path | None = Field(None, description="the original CI log, first evidence")
    junit: Path | None = Field(None, description="a JUnit XML report of the original run")


class RegressionSpec(_Spec):
    """The `[regression]` table: commands that must not get worse."""

    command: str | None = Field(None, description="e.g. 'pytest -q'")


class BudgetSpec(_Spec):
    """The `[budget]` table. Per step unless the name says job."""

    max_attempts: int = Field(3, ge=1, description="attempts per step")
    step_timeout_seconds: float = Field(900.0, gt=0, description="wall clock of one step run")
    idle_timeout_seconds: float = Field(
        300.0, gt=0, description="no output for this long kills a run"
    )
    no_progress_limit: int = Field(
        2, ge=1, description="same fingerprint and diff hash this many times in a row"
    )
    max_hard_resets: int = Field(1, ge=0, description="hard resets per step")
    job_wall_seconds: float | None = Field(None, gt=0, description="total wall time of the job")
    max_proposer_calls: int | None = Field(None, ge=1, description="proposer calls per job")
    max_model_tokens: int | None = Field(None, ge=1, description="model tokens per job")
    flaky_reruns: int = Field(0, ge=0, description="extra reproduction runs to detect flakes")


class PolicySpec(_Spec):
    """The `[policy]` table: gates every candidate passes before it runs."""

    protected_paths: tuple[str, ...] = Field(DEFAULT_PROTECTED_PATHS, description="glob patterns")
    extra_protected_paths: tuple[str, ...] = Field((), description="added to protected_paths")
    test_paths: tuple[str, ...] = Field(
        ("tests/**", "test/**", "**/test_*.py", "**/*_test.py", "**/conftest.py"),
        description="files where deleting, skipping or weakening tests is refused",
    )
    allow_test_changes: bool = Field(False, description="let candidates touch test files at all")
    max_changed_lines: int = Field(400, ge=1, description="added + removed lines")
    max_files: int = Field(20, ge=1, description="files touched by one candidate")


class JobSpec(_Spec):
    """A whole job spec file."""

    job: JobSection
    steps: tuple[StepSpec, ...] = Field(min_length=1)
    regression: RegressionSpec = RegressionSpec()
    proposer: ProposerConfig | None = None
    proposers: tuple[ProposerConfig, ...] = ()
    budget: BudgetSpec = BudgetSpec()
    policy: PolicySpec = PolicySpec()

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
    return "\n  ".join([f"invalid job spec {source}:", *validation_problems(error)])


def _deep_merge(low: dict[str, Any], high: dict[str, Any]) -> dict[str, Any]:
    merged = dict(low)
    for key, value in high.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def repo_defaults(repo: Path) -> dict[str, Any]:
    """`[tool.patchheal]` of the repository's pyproject.toml, or {}."""
    pyproject = repo / "pyproject.toml"
    if not pyproject.is_file():
        return {}
    try:
        data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise SpecError(f"{pyproject}: cannot read [tool.patchheal]: {exc}") from exc
    section = data.get("tool", {}).get("patchheal", {})
    if not isinstance(section, dict):
        raise SpecError(f"{pyproject}: [tool.patchheal] must be a table")
    return section


def build_spec(
    data: dict[str, Any], *, source: str, base_dir: Path, overrides: dict[str, Any] | None = None
) -> JobSpec:
    """Validate raw spec data, resolving relative paths against `base_dir`."""
    data = _resolve_paths(data, base_dir)
    repo = Path(str(data.get("job", {}).get("repo", "."))).expanduser()
    if repo.is_dir():
        data = _deep_merge(repo_defaults(repo), data)
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
    from patchheal.harness.workflow import derive_for_job

    derived = derive_for_job(job)
    job = dict(job)
    if job.get("harness", "auto") == "auto":
        job["harness"] = derived.harness
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
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise SpecError(f"cannot read job spec {path}: {exc.strerror or exc}") from None
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise SpecError(f"job spec {path} is not UTF-8 text") from None
    except tomllib.TOMLDecodeError as exc:
        raise SpecError(f"job spec {path} is not valid TOML: {exc}") from None
    return build_spec(data, source=str(path), base_dir=path.resolve().parent, overrides=overrides)


def _resolve_paths(data: dict[str, Any], base_dir: Path) -> dict[str, Any]:
    """Make the spec's relative paths relative to the spec file, not the cwd."""
    data = {k: (dict(v) if isinstance(v, dict) else v) for k, v in data.items()}

    def absolute(value: Any) -> Any:
        if isinstance(value, str) and "://" not in value and not value.startswith("git@"):
            return str((base_dir / Path(value).expanduser()).resolve())
        return value

    job = data.get("job")
    if isinstance(job, dict) and "repo" in job:
        job["repo"] = absolute(job["repo"])
    elif isinstance(job, dict):
        job["repo"] = str(base_dir)
    if isinstance(job, dict) and "workflow_log" in job:
        job["workflow_log"] = absolute(job["workflow_log"])
    steps = data.get("steps")
    if isinstance(steps, list):
        data["steps"] = [
            {**s, **{k: absolute(s[k]) for k in ("log", "junit") if k in s}}
            if isinstance(s, dict)
            else s
            for s in steps
        ]
    chain = (
        [data["proposer"]] if isinstance(data.get("proposer"), dict) else data.get("proposers", [])
    )
    for proposer in chain if isinstance(chain, list) else []:
        if isinstance(proposer, dict):
            if "dir" in proposer:
                proposer["dir"] = absolute(proposer["dir"])
            if isinstance(proposer.get("paths"), list):
                proposer["paths"] = [absolute(p) for p in proposer["paths"]]
    return data


def spec_from_flags(
    *,
    job_id: str,
    repo: str,
    base: str,
    steps: list[str],
    proposer: str | None,
    harness: str,
    regression: str | None,
) -> dict[str, Any]:
    """The raw spec that `patchheal heal --repo … --step …` describes."""
    data: dict[str, Any] = {
        "job": {"id": job_id, "repo": repo, "base": base, "harness": harness},
        "steps": [{"name": f"step-{i + 1}", "command": c} for i, c in enumerate(steps)],
    }
    if regression:
        data["regression"] = {"command": regression}
    if proposer:
        kind, _, arg = proposer.partition(":")
        if kind == "patchfiles":
            data["proposer"] = {"kind": "patchfiles", "dir": arg}
        elif kind == "agent":
            data["proposer"] = {"kind": "agent", "command": arg}
        else:
            raise SpecError(f"--proposer must be patchfiles:DIR or agent:COMMAND, got {proposer!r}")
    return data


def spec_to_toml(spec: JobSpec) -> str:
    """Render a spec as TOML (for `heal --print-spec`)."""
    dumped = spec.model_dump(mode="json", exclude_none=True, exclude_defaults=True)
    dumped.setdefault("job", {})["id"] = spec.job.id
    # `kind` is a default on each proposer config, but it is what selects it.
    if spec.proposer is not None:
        dumped["proposer"] = {"kind": spec.proposer.kind, **dumped.get("proposer", {})}
    if spec.proposers:
        dumped["proposers"] = [
            {"kind": c.kind, **d} for c, d in zip(spec.proposers, dumped["proposers"], strict=True)
        ]
    return _toml(dumped)


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        pairs = (f"{_toml_value(k)} = {_toml_value(v)}" for k, v in value.items())
        return "{ " + ", ".join(pairs) + " }"
    text = str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{text}"'


def _toml(data: dict[str, Any]) -> str:
    out: list[str] = []
    order = ["job", "steps", "regression", "proposer", "proposers", "budget", "policy"]
    for key in sorted(data, key=lambda k: order.index(k) if k in order else 99):
        value = data[key]
        if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            for item in value:
                out.append(f"[[{key}]]")
                out.extend(f"{k} = {_toml_value(v)}" for k, v in item.items())
                out.append("")
        elif isinstance(value, dict):
            out.append(f"[{key}]")
            out.extend(f"{k} = {_toml_value(v)}" for k, v in value.items())
            out.append("")
    return "\n".join(out)


__all__ = [
    "DEFAULT_PROTECTED_PATHS",
    "BudgetSpec",
    "JobSpec",
    "PatchfilesConfig",
    "PolicySpec",
    "StepSpec",
    "build_spec",
    "load_spec",
    "spec_from_flags",
    "spec_to_toml",
]
