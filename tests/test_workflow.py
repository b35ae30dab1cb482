"""The CI harness: job specs derived from realistic GitHub Actions workflows."""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from patchheal.config import build_spec, load_spec
from patchheal.errors import SpecError
from patchheal.harness.ci import log as cilog
from patchheal.harness.ci import workflow
from patchheal.intake.toml import spec_to_toml

# A typical Python project's CI: matrix over versions, env at three levels,
# a secret, a working directory, a coverage upload that cannot run offline.
PYTHON_CI = """\
name: CI
on: [push, pull_request]
env:
  PIP_DISABLE_PIP_VERSION_CHECK: "1"
  APP_MODE: ci
  PYPI_TOKEN: ${{ secrets.PYPI_TOKEN }}
jobs:
  lint:
    runs-on: ubuntu-latest
    steps:
      - uses: actions/checkout@v4
      - run: ruff check .
  test:
    runs-on: ${{ matrix.os }}
    strategy:
      fail-fast: false
      matrix:
        os: [ubuntu-latest]
        python-version: ["3.10", "3.11", "3.12"]
        include:
          - python-version: "3.11"
            extra: fast
    env:
      DATABASE_URL: sqlite:///ci.db
    defaults:
      run:
        working-directory: backend
    steps:
      - uses: actions/checkout@v4
      - uses: actions/setup-python@v5
        with:
          python-version: ${{ matrix.python-version }}
      - uses: actions/cache@v4
        with: {path: ~/.cache/pip, key: pip}
      - name: Install
        run: |
          python -m pip install --upgrade pip
          pip install -e .[test]
      - name: Lint
        run: ruff check src
      - name: Run tests
        env:
          API_TOKEN: ${{ secrets.API_TOKEN }}
          MARKERS: ${{ matrix.extra }}
        run: |
          echo "mode $APP_MODE on ${{ matrix.python-version }}"
          python -m pytest -q -m "not slow"
      - name: Upload coverage
        uses: codecov/codecov-action@v4
      - name: Build docs
        run: make -C docs html
"""

NODE_CI = """\
on: push
jobs:
  build:
    runs-on: ubuntu-latest
    steps:
      - uses: actions/checkout@v4
      - uses: actions/setup-node@v4
        with: {node-version: 20}
      - run: npm ci
      - run: npm test
        shell: sh
"""

# Timestamped lines as GitHub's "download log" gives them: steps open with
# `##[group]Run <first script line>`; a failed one ends with `##[error]Process completed`.
CI_LOG = """\
2024-05-01T10:00:00.0000000Z ##[group]Run actions/checkout@v4
2024-05-01T10:00:01.0000000Z ##[endgroup]
2024-05-01T10:00:02.0000000Z ##[group]Run python -m pip install --upgrade pip
2024-05-01T10:00:30.0000000Z Successfully installed tiny-0.1
2024-05-01T10:00:31.0000000Z ##[group]Run ruff check src
2024-05-01T10:00:32.0000000Z All checks passed!
2024-05-01T10:00:33.0000000Z ##[group]Run echo "mode $APP_MODE on 3.11"
2024-05-01T10:00:40.0000000Z FAILED tests/test_tiny.py::test_double - assert 5 == 4
2024-05-01T10:00:40.1000000Z ##[error]Process completed with exit code 1.
"""


def _write(tmp_path: Path, text: str, name: str = "ci.yml") -> Path:
    path = tmp_path / ".github" / "workflows" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def _argv(command: str | None) -> list[str]:
    assert command is not None
    return shlex.split(command)


def test_python_workflow_becomes_setup_step_env_and_harness(tmp_path: Path) -> None:
    path = _write(tmp_path, PYTHON_CI)
    derived = workflow.derive(path, "test", matrix={"python-version": "3.11"})
    assert derived.harness == "python"
    assert derived.matrix == {"os": "ubuntu-latest", "python-version": "3.11", "extra": "fast"}
    assert derived.step.name == "Build docs"  # no log, no --workflow-step: the last run step
    derived = workflow.derive(path, "test", matrix={"python-version": "3.11"}, step="Run tests")
    argv = _argv(derived.step.command)
    # working-directory, then the env in scope (workflow < job < step), then GitHub's bash.
    assert argv[:3] == ["cd", "backend", "&&"]
    assert argv[3] == "env"
    assert "APP_MODE=ci" in argv
    assert "DATABASE_URL=sqlite:///ci.db" in argv
    assert "MARKERS=fast" in argv
    assert not any(a.startswith(("API_TOKEN=", "PYPI_TOKEN=")) for a in argv)  # never a value
    assert argv[-7:-1] == ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c"]
    assert argv[-1] == 'echo "mode $APP_MODE on 3.11"\npython -m pytest -q -m "not slow"'
    assert derived.passthrough == ["API_TOKEN", "PYPI_TOKEN"]  # step and workflow level
    assert len(derived.setup) == 1
    assert "pip install -e .[test]" in derived.setup[0]
    assert derived.setup[0].startswith("cd backend && ")
    notes = "\n".join(derived.notes)
    assert "codecov/codecov-action@v4` cannot run" in notes
    assert "'Lint' (before the healed step) is not run" in notes
    assert "'Build docs' (after the healed step) is not run" in notes
    assert "actions/cache" not in notes
    assert "actions/checkout" not in notes
    assert "python-version=3.11" in notes
    assert "1 of 3" in notes


def test_a_python_version_the_harness_lacks_runs_on_the_nearest_said_so(tmp_path: Path) -> None:
    """Issue 32 (was issue 26's refusal): the failing job's python-version is what the step
    runs on when offered; one the harness does not offer runs on the nearest offered one,
    and the sentence the report shows says so."""
    from patchheal.harness.definitions import load_harness
    from patchheal.harness.inference import pythons

    derived = workflow.derive(_write(tmp_path, PYTHON_CI), "test")  # first entry: 3.10
    assert derived.matrix["python-version"] == "3.10"
    assert derived.python == "3.10"
    defn, why = pythons.choose(load_harness("python"), tmp_path, "HEAD", None, derived.python)
    assert pythons.of(defn) == "3.11"
    assert "failing CI job's setup-python names 3.10; 3.10 is not offered" in why
    assert why.endswith("so the nearest offered: 3.11")
    picked = workflow.derive(_write(tmp_path, PYTHON_CI), "test", matrix={"python-version": "3.11"})
    assert picked.python == "3.11"


def test_node_workflow_uses_the_node_harness_and_its_shell(tmp_path: Path) -> None:
    derived = workflow.derive(_write(tmp_path, NODE_CI), "build")
    assert derived.harness == "node"
    assert derived.setup == ["bash --noprofile --norc -eo pipefail -c 'npm ci'"]
    assert derived.step.command == "sh -e -c 'npm test'"
    assert derived.node == "20"  # the job's Node: the harness offers it (issue 26)
    from patchheal.harness.definitions import load_harness
    from patchheal.harness.inference import nodes

    defn, why = nodes.choose(load_harness("node"), tmp_path, "HEAD", None, derived.node)
    assert defn.image.suite == "trixie"
    assert why == "Node 20: the failing CI job's setup-node names 20"


def test_the_ci_log_picks_the_failing_step(tmp_path: Path) -> None:
    path = _write(tmp_path, PYTHON_CI)
    derived = workflow.derive(path, "test", matrix={"python-version": "3.11"}, log_text=CI_LOG)
    assert derived.step.name == "Run tests"
    assert "the CI log shows step 'Run tests' failing" in derived.notes
    assert cilog.failed_commands(CI_LOG) == ['echo "mode $APP_MODE on 3.11"']
    passing = CI_LOG.replace("##[error]Process completed with exit code 1.", "done")
    derived = workflow.derive(path, "test", log_text=passing)
    assert derived.step.name == "Build docs"
    assert any("names no failing step" in n for n in derived.notes)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"job": "deploy"}, r"no job 'deploy'; its jobs: lint, test"),
        ({"job": "test", "matrix": {"python-version": "2.7"}}, "no matrix entry"),
        ({"job": "test", "matrix": {"pyversion": "3.11"}}, "not axes"),
        ({"job": "lint", "matrix": {"x": "1"}}, "no strategy.matrix"),
        ({"job": "test", "step": "Deploy"}, r"no `run:` step named 'Deploy'.*'Run tests'"),
    ],
)
def test_bad_choices_name_what_exists(
    tmp_path: Path, kwargs: dict[str, object], message: str
) -> None:
    path = _write(tmp_path, PYTHON_CI)
    with pytest.raises(SpecError, match=message):
        workflow.derive(path, **kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("jobs: {}\n", "no `jobs`"),
        ("jobs:\n  t:\n    uses: org/repo/.github/workflows/x.yml@v1\n", "reusable workflow"),
        ("jobs:\n  t:\n    steps:\n      - uses: actions/checkout@v4\n", "no `run:` steps"),
        ("jobs:\n  t:\n    steps:\n      - run: x\n        shell: pwsh\n", "shell 'pwsh'"),
        ("jobs: [", "not valid YAML"),
    ],
)
def test_unusable_workflows_are_refused_clearly(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(SpecError, match=message):
        workflow.derive(_write(tmp_path, text), "t")


def test_job_spec_workflow_key_derives_the_spec_and_prints_back_the_same(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    _write(repo, PYTHON_CI)
    log = tmp_path / "ci.log"
    log.write_text(CI_LOG)
    data = {
        "job": {
            "id": "wf",
            "repo": str(repo),
            "workflow": ".github/workflows/ci.yml",
            "workflow_job": "test",
            "workflow_log": str(log),
            "matrix": {"python-version": "3.11"},
        }
    }
    spec = build_spec(data, source="(test)", base_dir=tmp_path)
    assert spec.job.harness == "python"
    assert spec.job.env == ("API_TOKEN", "PYPI_TOKEN")
    assert len(spec.steps) == 1
    assert spec.steps[0].name == "run-tests"
    assert spec.steps[0].log == log
    assert "python -m pytest" in spec.steps[0].command
    printed = tmp_path / "printed.toml"
    printed.write_text(spec_to_toml(spec))
    assert load_spec(printed) == spec


def test_workflow_without_a_job_is_bad_input(tmp_path: Path) -> None:
    data = {"job": {"id": "wf", "workflow": "ci.yml"}, "steps": [{"name": "a", "command": "x"}]}
    with pytest.raises(SpecError, match="workflow and workflow_job go together"):
        build_spec(data, source="(test)", base_dir=tmp_path)


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "patchheal", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )


def test_heal_from_workflow_prints_the_spec_and_what_is_not_run(tmp_path: Path) -> None:
    _write(tmp_path, PYTHON_CI)
    (tmp_path / "ci.log").write_text(CI_LOG)
    done = _cli(
        "heal", "--from-workflow", ".github/workflows/ci.yml", "--job", "test",
        "--matrix", "python-version=3.11", "--ci-log", "ci.log", "--print-spec", cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert 'harness = "python"' in done.stdout
    assert 'workflow_job = "test"' in done.stdout
    assert 'name = "run-tests"' in done.stdout
    assert "healing step 6 'Run tests' in the python harness" in done.stderr
    assert "codecov/codecov-action@v4` cannot run in a harness; not run" in done.stderr
    bad = _cli("heal", "--from-workflow", "ci.yml", "--print-spec", cwd=tmp_path)
    assert bad.returncode == 2
    assert "--from-workflow needs --job" in bad.stderr
    bad = _cli("heal", "--repo", ".", "--step", "x", "--matrix", "a=1", cwd=tmp_path)
    assert bad.returncode == 2
    assert "need --from-workflow" in bad.stderr


def test_job_services_and_container_are_named_as_not_translated(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        "jobs:\n  test:\n    runs-on: ubuntu-latest\n    container: python:3.11-slim\n"
        "    services:\n      db:\n        image: postgres:16\n"
        "        env: {POSTGRES_PASSWORD: pw}\n"
        "      cache:\n        image: redis:7\n"
        "    steps:\n      - uses: actions/checkout@v4\n      - run: pytest -q\n",
    )
    notes = "\n".join(workflow.derive(path, "test").notes)
    assert "job services db (postgres:16), cache (redis:7) are not started" in notes
    assert "job container python:3.11-slim is not used" in notes
    quiet = _write(tmp_path, "jobs:\n  t:\n    steps:\n      - run: pytest -q\n", "q.yml")
    assert not any("not translated" in n for n in workflow.derive(quiet, "t").notes)
