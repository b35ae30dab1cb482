"""The command line as a person types it: global flags anywhere, --json on every listing and
inspection, one-line errors for a bad base, memory that admits it knows the same failure."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from patchheal.cli import cli
from tests.healjobs import WRONG, diff_for, make_calc_repo, state_args, write_spec


@pytest.fixture
def healed(tmp_path: Path) -> tuple[Path, list[str]]:
    """A real heal of the calc job with one wrong candidate: not fixed, one attempt."""
    repo = make_calc_repo(tmp_path)
    spec = write_spec(tmp_path / "job.toml", repo, diffs=[diff_for(repo, {"calc.py": WRONG})])
    return spec, state_args(tmp_path)


def test_quiet_and_verbose_work_after_the_subcommand(healed: tuple[Path, list[str]]) -> None:
    """Invariant: -q and -v mean the same after the subcommand as before it, and -v shows
    more for heal (every next action, numbered) than the default (the first one)."""
    spec, state = healed
    runner = CliRunner()
    plain = runner.invoke(cli, ["heal", str(spec), *state])
    assert plain.exit_code == 1, plain.output
    assert "[calc] " in plain.stderr
    assert "\nnext: " in plain.stdout
    assert "next actions:" not in plain.stdout
    quiet = runner.invoke(cli, ["heal", str(spec), *state, "-q"])
    assert quiet.exit_code == 1, quiet.output
    assert "[calc] " not in quiet.stderr
    assert "job calc:" in quiet.stdout
    verbose = runner.invoke(cli, ["heal", "-v", str(spec), *state])
    assert "next actions:\n  1. " in verbose.stdout
    assert "  2. " in verbose.stdout


def test_show_store_check_and_explain_print_json(healed: tuple[Path, list[str]]) -> None:
    """Invariant: `show`, `store check` and `harness explain` take --json and print one
    JSON document; `show --diff-against --json` says whether the two are the same patch."""
    spec, state = healed
    runner = CliRunner()
    assert runner.invoke(cli, ["heal", str(spec), *state]).exit_code == 1
    db = state[1]
    shown = runner.invoke(cli, ["show", "1", "--db", db, "--json", "--no-log"])
    assert shown.exit_code == 0, shown.output
    row = json.loads(shown.stdout)
    assert (row["id"], row["job_id"], row["outcome"]) == (1, "calc", "no_effect")
    assert "b - a" in row["diff"]
    assert "log_excerpt" not in row
    pair = json.loads(runner.invoke(cli, ["show", "1", "--diff-against", "1", "--db", db,
                                          "--json"]).stdout)  # fmt: skip
    assert pair["same_patch"] is True
    assert pair["same_failure"] is True
    checked = runner.invoke(cli, ["store", "check", "--db", db, "--json"])
    assert checked.exit_code == 0, checked.output
    assert json.loads(checked.stdout)["ok"] is True
    explained = runner.invoke(cli, ["harness", "explain", "--repo", str(spec.parent / "calc-repo"),
                                    "--json"])  # fmt: skip
    assert explained.exit_code == 0, explained.output
    choice = json.loads(explained.stdout)
    assert choice["harness"] == "python"
    assert choice["image"].startswith("patchheal/python:")


def test_explain_with_a_base_that_does_not_exist_is_exit_2(tmp_path: Path) -> None:
    """Invariant: `harness explain --base` of a commit the repository lacks is bad input
    (exit 2, one line naming the ref), as it is for heal, not an explanation of the folder."""
    repo = make_calc_repo(tmp_path)
    for where in (repo, tmp_path / "plain"):
        where.mkdir(exist_ok=True)
        done = subprocess.run(
            [sys.executable, "-m", "patchheal", "harness", "explain", "--repo", str(where),
             "--base", "nosuch"],
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        assert done.returncode == 2, done.stdout + done.stderr
        assert done.stderr.count("\n") == 1, done.stderr
        assert "nosuch" in done.stderr
        assert "Traceback" not in done.stderr


def test_similar_says_when_memory_holds_the_same_failure(tmp_path: Path) -> None:
    """Regression (issue 27): `similar` said "no similar failure in memory" when the store
    held this very failure, fixed: it searched other fingerprints only."""
    from tests.healjobs import FIX

    repo = make_calc_repo(tmp_path)
    spec = write_spec(tmp_path / "job.toml", repo, diffs=[diff_for(repo, {"calc.py": FIX})])
    runner = CliRunner()
    assert runner.invoke(cli, ["heal", str(spec), *state_args(tmp_path)]).exit_code == 0
    ci = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
         "tests/test_calc.py::test_add"],
        cwd=repo, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    log = tmp_path / "ci.log"
    log.write_text(ci.stdout)
    db = state_args(tmp_path)[1]
    text = runner.invoke(cli, ["similar", str(log), "--db", db])
    assert text.exit_code == 0, text.output
    assert "no similar failure" not in text.stdout
    assert "same failure: 1 verified fix(es)" in text.stdout
    payload = json.loads(runner.invoke(cli, ["similar", str(log), "--db", db, "--json"]).stdout)
    [fix] = payload["same"]["fixes"]
    assert fix["outcome"] == "fixed"
    assert "a + b" in fix["diff"]
