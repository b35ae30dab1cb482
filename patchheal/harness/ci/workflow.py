"""The CI harness: a job spec derived from the CI's own workflow file (GitHub Actions).

`heal --from-workflow .github/workflows/ci.yml --job test` (or `[job] workflow`)
reads the job and turns it into what patchheal runs:

* `run:` steps that install dependencies (pip, npm, poetry, uv, ...) before the
  healed step become `[job] setup` (run once per dependency fingerprint,
  offline from a host-side wheelhouse or npm cache);
* the healed step (named with `--workflow-step`, found from the CI log, or
  the last `run:` step) becomes the `[[steps]]` command, with the workflow's,
  the job's and the step's `env`, `working-directory` and `shell` folded into
  one command line, so `--print-spec` shows exactly what runs;
* `actions/setup-python` / `actions/setup-node` choose the harness, and their
  `python-version` / `node-version` the job's runtime (a Python the harness
  does not offer becomes the nearest offered one `requires-python` allows,
  said so: `pythons.py`; a Node is refused naming the nearest: `runtimes.py`); `actions/checkout`
  is the worktree; every other `uses:` step is named as not run;
* `${{ matrix.X }}` comes from the chosen matrix entry (the first one unless
  `--matrix X=V` picks another), `${{ env.X }}` from the env in scope, and
  `${{ secrets.X }}` becomes a variable passed through from the host by name,
  never a value written into the spec (`expressions.py`).
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from patchheal.errors import SpecError
from patchheal.harness.ci.expressions import _env, _expand, _matrix_entry

_INSTALL = re.compile(
    r"^\s*(python3? -m )?(pip3?|poetry|uv|pipenv|npm|yarn|pnpm)\s+"
    r"(install|ci|sync|add)\b"
)
# Actions whose effect the harness provides; anything else is named as not run.
_PROVIDED = {
    "actions/checkout": "the worktree is the checkout",
    "actions/setup-python": "the python harness",
    "actions/setup-node": "the node harness",
    "actions/cache": "dependency images are cached by fingerprint",
}


@dataclass(frozen=True)
class WorkflowStep:
    """One step of the chosen job, as the workflow says it."""

    index: int
    name: str
    run: str | None  # the script with the expressions GitHub would expand, expanded
    uses: str | None
    command: str | None = None  # the folded command line (run steps only)


@dataclass
class DerivedJob:
    """What a workflow job becomes: the pieces of a job spec and the notes that explain it."""

    workflow: Path
    job: str
    matrix: dict[str, str]
    harness: str
    setup: list[str]
    step: WorkflowStep
    steps: list[WorkflowStep]
    passthrough: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    python: str | None = None  # setup-python's python-version, expanded
    node: str | None = None  # setup-node's node-version, expanded

    def spec_fragment(self) -> dict[str, Any]:
        """The raw `[job]`/`[[steps]]` keys this derivation supplies."""
        return {
            "job": {"harness": self.harness, "setup": self.setup, "env": self.passthrough},
            "steps": [{"name": _slug(self.step.name), "command": self.step.command}],
        }


def load_workflow(path: Path) -> dict[str, Any]:
    from patchheal.intake.yamlsafe import load_yaml_file

    # Bounded: a deep workflow or an alias bomb is refused, not a crash (intake/yamlsafe.py).
    data = load_yaml_file(path, "workflow")
    if not isinstance(data, dict) or not isinstance(data.get("jobs"), dict) or not data["jobs"]:
        raise SpecError(f"workflow {path} has no `jobs` mapping")
    return data


def derive(
    path: Path,
    job: str,
    *,
    matrix: dict[str, str] | None = None,
    step: str | None = None,
    log_text: str | None = None,
) -> DerivedJob:
    """Derive the job spec pieces of `job` in the workflow at `path`."""
    data = load_workflow(path)
    jobs: dict[str, Any] = data["jobs"]
    body = jobs.get(job)
    if not isinstance(body, dict):
        raise SpecError(
            f"workflow {path} has no job {job!r}; its jobs: {', '.join(map(str, jobs))}"
        )
    if "uses" in body:
        raise SpecError(f"job {job!r} calls the reusable workflow {body['uses']!r}; not supported")
    notes: list[str] = []
    chosen = _matrix_entry(body, matrix or {}, notes)
    passthrough: list[str] = []
    env = _env(data.get("env"), {"matrix": chosen}, {}, passthrough)
    env = _env(body.get("env"), {"matrix": chosen}, env, passthrough)
    defaults = ((data.get("defaults") or {}).get("run") or {}) | (
        (body.get("defaults") or {}).get("run") or {}
    )
    raw_steps = body.get("steps")
    if not isinstance(raw_steps, list) or not raw_steps:
        raise SpecError(f"job {job!r} in {path} has no steps")
    harness, parsed, python, node = "generic", [], None, None
    for index, raw in enumerate(raw_steps, start=1):
        if not isinstance(raw, dict):
            raise SpecError(f"job {job!r} step {index} in {path} is not a mapping")
        name = str(raw.get("name") or raw.get("uses") or _first_line(raw.get("run")))
        if "uses" in raw:
            harness = _action(str(raw["uses"]), harness)
            python = _setup_version(raw, "setup-python", chosen) or python
            node = _setup_version(raw, "setup-node", chosen) or node
            parsed.append(WorkflowStep(index, name, None, str(raw["uses"])))
            continue
        if "run" not in raw:
            raise SpecError(f"job {job!r} step {name!r} has neither `run` nor `uses`")
        scope = _env(raw.get("env"), {"matrix": chosen, "env": env}, env, passthrough)
        script = _expand(str(raw["run"]), {"matrix": chosen, "env": scope}, passthrough, notes)
        command = _fold(script, scope, raw, defaults, env)
        parsed.append(WorkflowStep(index, name, script, None, command))
    _not_translated(body, notes)
    runs = [s for s in parsed if s.run is not None]
    if not runs:
        raise SpecError(f"job {job!r} in {path} has no `run:` steps to heal")
    target = _target(runs, step, log_text, notes)
    setup = [s.command for s in runs if s.index < target.index and _installs(s.run)]
    for s in parsed:
        if s.uses and _action_name(s.uses) not in _PROVIDED:
            notes.append(f"step {s.index} `uses: {s.uses}` cannot run in a harness; not run")
        elif s.run and s is not target and not (s.index < target.index and _installs(s.run)):
            when = "before" if s.index < target.index else "after"
            notes.append(f"step {s.index} {s.name!r} ({when} the healed step) is not run")
    return DerivedJob(
        workflow=path,
        job=job,
        matrix=chosen,
        harness=harness,
        setup=[c for c in setup if c],
        step=target,
        steps=parsed,
        passthrough=sorted(set(passthrough)),
        notes=notes,
        python=python,
        node=node,
    )


def _setup_version(raw: dict[str, Any], action: str, matrix: dict[str, str]) -> str | None:
    """The version an `actions/setup-python` (`python-version`) or `actions/setup-node`
    (`node-version`) step asks for; the harness offers it or refuses it (`runtimes.py`)."""
    if _action_name(str(raw["uses"])) != f"actions/{action}":
        return None
    key = action.removeprefix("setup-") + "-version"
    wanted = _expand(str((raw.get("with") or {}).get(key, "")), {"matrix": matrix}, [], [])
    return wanted or None


def _not_translated(body: dict[str, Any], notes: list[str]) -> None:
    """Name the job's `services:` and `container:`: not translated yet, so never started."""
    services = body.get("services")
    if isinstance(services, dict) and services:
        listed = ", ".join(
            f"{name} ({spec.get('image') if isinstance(spec, dict) else spec})"
            for name, spec in services.items()
        )
        notes.append(
            f"job services {listed} are not started: `services:` is not translated yet; "
            "a step that needs them fails without them (a compose file in the repository "
            "runs them offline: docs/harnesses.md)"
        )
    container = body.get("container")
    if container:
        image = container.get("image") if isinstance(container, dict) else container
        notes.append(
            f"job container {image} is not used: `container:` is not translated yet; "
            "the step runs in the harness's image"
        )


def _fold(
    script: str, scope: dict[str, str], raw: dict[str, Any], defaults: dict[str, Any], env: Any
) -> str:
    shell = str(raw.get("shell") or defaults.get("shell") or "bash")
    # GitHub's own invocations of its named shells; a custom `cmd {0}` is not supported.
    argv = {
        "bash": ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c"],
        "sh": ["sh", "-e", "-c"],
        "python": ["python", "-c"],
    }.get(shell)
    if argv is None:
        raise SpecError(f"step shell {shell!r} is not supported (bash, sh or python)")
    changed = {k: v for k, v in scope.items() if v != ""}
    prefix = ["env", *(f"{k}={v}" for k, v in sorted(changed.items()))] if changed else []
    command = shlex.join([*prefix, *argv, script.rstrip("\n")])
    directory = raw.get("working-directory") or defaults.get("working-directory")
    return f"cd {shlex.quote(str(directory))} && {command}" if directory else command


def _action_name(uses: str) -> str:
    return uses.split("@", 1)[0].lower()


def _action(uses: str, harness: str) -> str:
    """The harness a setup action chooses (its version is the job's: `_setup_version`)."""
    name = _action_name(uses)
    for action, kind in (("actions/setup-python", "python"), ("actions/setup-node", "node")):
        if name == action:
            return kind
    return harness


def _target(
    runs: list[WorkflowStep], wanted: str | None, log_text: str | None, notes: list[str]
) -> WorkflowStep:
    if wanted is not None:
        for s in runs:
            if wanted in (s.name, str(s.index), _slug(s.name)):
                return s
        names = ", ".join(repr(s.name) for s in runs)
        raise SpecError(f"no `run:` step named {wanted!r}; the job's run steps: {names}")
    if log_text:
        from patchheal.harness.ci.log import failing_step

        found = failing_step(log_text, [(s.name, s.run or "") for s in runs])
        if found is not None:
            notes.append(f"the CI log shows step {found!r} failing")
            return next(s for s in runs if s.name == found)
        notes.append("the CI log names no failing step this job has; healing the last run step")
    return runs[-1]


def _installs(run: str | None) -> bool:
    return bool(run) and all(_INSTALL.match(line) for line in _lines(run or ""))


def _lines(script: str) -> list[str]:
    return [ln for ln in script.replace("\\\n", " ").splitlines() if ln.strip()]


def _first_line(run: Any) -> str:
    lines = _lines(str(run or ""))
    return lines[0].strip()[:60] if lines else "step"


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-").lower()[:60] or "step"


def derive_for_job(job: dict[str, Any]) -> DerivedJob:
    """`derive` for a raw `[job]` table: the workflow is relative to the job's repository."""
    repo = Path(str(job.get("repo", ".")))
    path = Path(str(job["workflow"]))
    path = path if path.is_absolute() else repo / path
    log_text = None
    if job.get("workflow_log"):
        log_path = Path(str(job["workflow_log"]))
        try:
            log_text = log_path.read_text(encoding="utf-8", errors="replace")
        except OSError as exc:
            raise SpecError(f"cannot read workflow_log {log_path}: {exc.strerror or exc}") from None
    matrix = job.get("matrix") or {}
    if not isinstance(matrix, dict):
        raise SpecError("[job] matrix must be a table of axis = value")
    return derive(
        path,
        str(job["workflow_job"]),
        matrix={str(k): str(v) for k, v in matrix.items()},
        step=None if job.get("workflow_step") is None else str(job["workflow_step"]),
        log_text=log_text,
    )
