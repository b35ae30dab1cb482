"""A pull request is opened only on request, and only after verification."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from patchheal.config import load_spec
from patchheal.errors import BadInput
from patchheal.intake.toml import spec_to_toml
from patchheal.loop.controller import HealLoop, HealOptions
from patchheal.loop.pullrequest import render_command
from patchheal.memory.store import AttemptStore
from tests.healjobs import FIX, WRONG, diff_for, make_calc_repo, write_spec

# Stands in for `gh pr create`: records what it was asked and prints a URL.
RECORDER = (
    f'{sys.executable} -c "import json,sys; '
    "open(sys.argv[1],'w').write(json.dumps(sys.argv[2:])); "
    "print('https://forge.invalid/pr/7')\" {calls} {branch} {base} {report}"
)


def heal(tmp_path: Path, diffs: list[str], *, open_pr: bool):  # type: ignore[no-untyped-def]
    repo = make_calc_repo(tmp_path)
    calls = tmp_path / "pr-calls.json"
    spec_path = write_spec(
        tmp_path / "job.toml",
        repo,
        diffs=[diff_for(repo, {"calc.py": d}) for d in diffs],
        budget="max_attempts = 1",
    )
    command = RECORDER.replace("{calls}", str(calls))
    text = spec_path.read_text().replace(
        'harness = "local"', f"harness = \"local\"\npr_command = '''{command}'''"
    )
    spec_path.write_text(text)
    spec = load_spec(spec_path)
    options = HealOptions(
        state_dir=tmp_path / "var",
        db=str(tmp_path / "db.sqlite3"),
        reports_dir=tmp_path / "reports",
        open_pr=open_pr,
    )
    return HealLoop(spec, spec_to_toml(spec), options).run(), calls


def test_pr_command_runs_after_verification_with_the_branch_and_report(tmp_path: Path) -> None:
    result, calls = heal(tmp_path, [FIX], open_pr=True)
    assert result.report.status == "fixed"
    branch, base, report = json.loads(calls.read_text())
    assert branch == "patchheal/local/calc"
    assert base == "main"
    assert Path(report).is_file()
    assert result.report.pull_request == "https://forge.invalid/pr/7"
    assert "https://forge.invalid/pr/7" in result.report_paths["md"].read_text()
    # The printed URL is kept beside the verified patch, for `patchheal outcome`.
    store = AttemptStore(str(tmp_path / "db.sqlite3"))
    try:
        [row] = store.outcomes("calc")
    finally:
        store.close()
    assert (row.pull_request, row.ci_status, row.step_index) == (
        "https://forge.invalid/pr/7",
        "pending",
        1,
    )


def test_no_pr_without_the_request(tmp_path: Path) -> None:
    result, calls = heal(tmp_path, [FIX], open_pr=False)
    assert result.report.status == "fixed"
    assert not calls.exists()
    assert result.report.pull_request is None


def test_no_pr_for_an_unverified_patch_even_when_asked(tmp_path: Path) -> None:
    result, calls = heal(tmp_path, [WRONG], open_pr=True)
    assert result.report.status == "not_fixed"
    assert not calls.exists()


def test_unknown_placeholder_is_bad_input() -> None:
    with pytest.raises(BadInput, match="unknown placeholder"):
        render_command("gh pr create --head {brnach}", {"branch": "b"})
