"""Secrets never persist: every file a full heal run writes is scanned for seeded secrets."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from patchheal.config import load_spec
from patchheal.intake.toml import spec_to_toml
from patchheal.loop.controller import HealLoop, HealOptions
from tests.healjobs import FIX, diff_for, make_calc_repo, write_spec

GITHUB_TOKEN = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
AWS_KEY = "AKIA" + "Q3EGRIKJ5WPLXNZT"
ENV_SECRET = "s3cr3t-value-from-the-environment-91827"
PASSWORD_URL = "postgres://deploy:hunter2-very-secret@db.internal:5432/app"

LEAKY_TEST = f"""\
import os

from calc import add


def test_add():
    print("token {GITHUB_TOKEN}")
    print("aws {AWS_KEY}")
    print("env", os.environ.get("MY_API_TOKEN"))
    print("db {PASSWORD_URL}")
    assert add(2, 3) == 5
"""


@pytest.mark.slow
def test_no_seeded_secret_survives_in_any_file_a_heal_run_wrote(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MY_API_TOKEN", ENV_SECRET)
    repo = make_calc_repo(tmp_path, files={"tests/test_calc.py": LEAKY_TEST})
    # A candidate that carries a secret in the code it adds, and the real fix.
    leaky_fix = diff_for(repo, {"calc.py": FIX + f'\nAPI_KEY = "{GITHUB_TOKEN}"\n'})
    fix = diff_for(repo, {"calc.py": FIX})
    # The CI log: the same failing run as CI printed it, plus CI's own secret-bearing lines.
    command = f"{sys.executable} -m pytest -q -s tests/test_calc.py::test_add"
    run = subprocess.run(command, shell=True, cwd=repo, capture_output=True, text=True)
    ci_log = tmp_path / "ci.log"
    ci_log.write_text(
        f"Authorization: Bearer {GITHUB_TOKEN}\nAWS_ACCESS_KEY_ID={AWS_KEY}\n"
        f"MY_API_TOKEN={ENV_SECRET}\n{run.stdout}{run.stderr}"
    )
    spec_path = write_spec(
        tmp_path / "job.toml",
        repo,
        diffs=[leaky_fix, fix],
        steps=[("unit", command)],
        extra="",
    )
    text = spec_path.read_text().replace(
        'harness = "local"', 'harness = "local"\nenv = ["MY_API_TOKEN"]'
    )
    text = text.replace("[[steps]]", "[[steps]]\nlog = " + repr(str(ci_log)).replace("'", '"'), 1)
    spec_path.write_text(text)
    spec = load_spec(spec_path)
    state, reports, db = tmp_path / "var", tmp_path / "reports", tmp_path / "store.sqlite3"
    result = HealLoop(
        spec,
        spec_to_toml(spec),
        HealOptions(state_dir=state, db=str(db), reports_dir=reports, keep_worktrees=False),
    ).run()
    outcomes = [a.outcome.value for s in result.report.steps for a in s.attempts]
    assert outcomes == ["rejected_policy", "fixed"], outcomes
    assert "secret" in result.report.steps[0].attempts[0].reason

    written = [p for root in (state, reports) for p in root.rglob("*") if p.is_file()]
    written += [p for p in tmp_path.glob("store.sqlite3*") if p.is_file()]
    assert len(written) >= 8
    for path in written:
        data = path.read_bytes()
        for secret in (GITHUB_TOKEN, AWS_KEY, ENV_SECRET, "hunter2-very-secret"):
            assert secret.encode() not in data, f"{secret[:8]}… survived in {path}"
