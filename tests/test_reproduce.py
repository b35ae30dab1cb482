"""The reproduction gate: flaky and env_mismatch steps are reported, never patched."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from patchheal.config import load_spec
from patchheal.intake.toml import spec_to_toml
from patchheal.loop.controller import HealLoop, HealOptions
from tests.healjobs import FIX, diff_for, make_calc_repo, write_spec

# Fails on every other run, whatever the code: a counter file outside the repo.
FLAKY_STEP = (
    "{python} -c \"import pathlib,sys; p=pathlib.Path(r'{counter}'); "
    "n=int(p.read_text() or 0) if p.exists() else 0; p.write_text(str(n+1)); "
    'sys.exit(1 if n % 2 == 0 else 0)"'
)


def run(tmp_path: Path, spec_path: Path):  # type: ignore[no-untyped-def]
    spec = load_spec(spec_path)
    options = HealOptions(
        state_dir=tmp_path / "var",
        db=str(tmp_path / "db.sqlite3"),
        reports_dir=tmp_path / "reports",
    )
    return HealLoop(spec, spec_to_toml(spec), options).run()


def test_flaky_step_is_reported_with_its_pass_rate_and_not_patched(tmp_path: Path) -> None:
    repo = make_calc_repo(tmp_path)
    step = FLAKY_STEP.format(python=sys.executable, counter=tmp_path / "counter")
    spec = write_spec(
        tmp_path / "job.toml",
        repo,
        diffs=[diff_for(repo, {"calc.py": FIX})],
        steps=[("flaky", step)],
        budget="flaky_reruns = 3",
    )
    result = run(tmp_path, spec)
    step_report = result.report.steps[0]
    assert step_report.classification is not None
    assert step_report.classification.failure_class.value == "flaky"
    assert step_report.classification.pass_rate == 0.5
    assert step_report.attempts == ()
    assert result.report.status == "not_patchable"
    assert result.exit_code == 1


def test_ci_log_with_another_fingerprint_is_env_mismatch_with_both(tmp_path: Path) -> None:
    repo = make_calc_repo(tmp_path)
    command = f"{sys.executable} -m pytest -q tests/test_calc.py::test_add"
    # What CI printed: the multiplication test failing, not the addition one.
    other = subprocess.run(
        f"{sys.executable} -m pytest -q tests/test_calc.py::test_mul",
        shell=True,
        cwd=repo,
        capture_output=True,
        text=True,
    )
    assert other.returncode == 0
    ci_log = tmp_path / "ci.log"
    ci_log.write_text(
        "tests/test_calc.py F\n"
        "____ test_mul ____\n"
        "    def test_mul():\n"
        ">       assert mul(2, 3) == 6\n"
        "E       assert 5 == 6\n"
        "tests/test_calc.py:9: AssertionError\n"
        "FAILED tests/test_calc.py::test_mul - assert 5 == 6\n"
        "1 failed in 0.01s\n"
    )
    spec = write_spec(
        tmp_path / "job.toml",
        repo,
        diffs=[diff_for(repo, {"calc.py": FIX})],
        steps=[("unit", command)],
    )
    spec.write_text(spec.read_text().replace("[[steps]]", f'[[steps]]\nlog = "{ci_log}"', 1))
    result = run(tmp_path, spec)
    step_report = result.report.steps[0]
    assert step_report.classification is not None
    assert step_report.classification.failure_class.value == "env_mismatch"
    assert step_report.ci_fingerprint is not None
    assert step_report.failure is not None
    assert step_report.ci_fingerprint != step_report.failure.fingerprint
    evidence = " ".join(step_report.classification.evidence)
    assert step_report.ci_fingerprint in evidence
    assert step_report.failure.fingerprint in evidence
    assert step_report.attempts == ()


def test_ci_log_of_the_same_failure_is_healed(tmp_path: Path) -> None:
    repo = make_calc_repo(tmp_path)
    command = f"{sys.executable} -m pytest -q tests/test_calc.py::test_add"
    ci = subprocess.run(command, shell=True, cwd=repo, capture_output=True, text=True)
    ci_log = tmp_path / "ci.log"
    ci_log.write_text(
        "2026-11-20T10:00:01Z runner started in /home/runner/work/calc\n" + ci.stdout + ci.stderr
    )
    spec = write_spec(
        tmp_path / "job.toml",
        repo,
        diffs=[diff_for(repo, {"calc.py": FIX})],
        steps=[("unit", command)],
    )
    spec.write_text(spec.read_text().replace("[[steps]]", f'[[steps]]\nlog = "{ci_log}"', 1))
    result = run(tmp_path, spec)
    assert result.report.status == "fixed"
