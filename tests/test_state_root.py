"""One state root: a store's runs live beside it, and read-only commands create nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from patchheal.errors import BadInput
from patchheal.memory.store import AttemptStore
from patchheal.runs import default_db, state_dir_for
from tests.healjobs import FIX, WRONG, diff_for, make_calc_repo, patchheal_cli, write_spec


def test_the_default_store_keeps_the_seed_layout() -> None:
    assert state_dir_for("var/memory/attempts.sqlite3") == Path("var")


def test_the_default_store_is_one_per_user_whatever_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Invariant (issue 34): the default store is the user's, in the platform's state
    directory (XDG_STATE_HOME here, set per test by conftest: never the real user's), not
    under the working directory; $PATCHHEAL_HOME moves it; runs live beside it."""
    state = Path(os.environ["XDG_STATE_HOME"])
    assert Path(os.environ["HOME"]) in state.parents  # the test's own home
    expected = state / "patchheal" / "memory" / "attempts.sqlite3"
    assert default_db() == str(expected)
    monkeypatch.chdir(tmp_path)
    assert default_db() == str(expected)
    assert state_dir_for(default_db()) == state / "patchheal"
    monkeypatch.setenv("PATCHHEAL_HOME", str(tmp_path / "home"))
    assert default_db() == str(tmp_path / "home" / "memory" / "attempts.sqlite3")
    assert state_dir_for(default_db()) == tmp_path / "home"


def test_store_check_names_the_default_store(tmp_path: Path) -> None:
    """`patchheal store check` shows where the default store is, before and after a heal
    made it (from two working directories: the same store)."""
    expected = Path(os.environ["XDG_STATE_HOME"]) / "patchheal" / "memory" / "attempts.sqlite3"
    missing = patchheal_cli("store", "check")
    assert missing.returncode == 2
    assert str(expected) in missing.stderr
    repo = make_calc_repo(tmp_path)
    spec = write_spec(tmp_path / "job.toml", repo, diffs=[diff_for(repo, {"calc.py": FIX})])
    healed = patchheal_cli("heal", str(spec), "--json")
    assert healed.returncode == 0, healed.stderr
    assert expected.is_file()
    assert not (tmp_path / "var").exists()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    checked = subprocess.run(
        [sys.executable, "-m", "patchheal", "store", "check", "--json"],
        cwd=elsewhere,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert checked.returncode == 0, checked.stderr
    assert json.loads(checked.stdout)["store"].endswith(str(expected))


def test_any_other_store_file_has_a_state_folder_of_its_own(tmp_path: Path) -> None:
    assert state_dir_for(str(tmp_path / "a.sqlite3")) == tmp_path / "a-state"
    assert state_dir_for(str(tmp_path / "b.sqlite3")) == tmp_path / "b-state"
    assert state_dir_for(f"sqlite:///{tmp_path}/c.db") == tmp_path / "c-state"
    assert state_dir_for(str(tmp_path / "a.sqlite3"), tmp_path / "chosen") == tmp_path / "chosen"


def test_a_server_store_names_its_state_folder(monkeypatch: pytest.MonkeyPatch) -> None:
    url = "postgresql+psycopg://patchheal@127.0.0.1:5432/patchheal"
    monkeypatch.delenv("PATCHHEAL_HOME", raising=False)
    with pytest.raises(BadInput, match="--state-dir or set PATCHHEAL_HOME"):
        state_dir_for(url)
    monkeypatch.setenv("PATCHHEAL_HOME", "/srv/patchheal")
    assert state_dir_for(url) == Path("/srv/patchheal")


def _heal(spec: Path, db: Path, reports: Path) -> dict[str, object]:
    done = patchheal_cli("heal", str(spec), "--db", str(db), "--reports", str(reports), "--json")
    assert done.returncode in (0, 1), done.stderr
    summary: dict[str, object] = json.loads(done.stdout)
    return summary


def _outcomes(db: Path) -> list[str]:
    with AttemptStore(str(db), create=False) as store:
        return [a.outcome.value for a in store.attempts(job_id="calc")]


def test_a_fresh_store_never_sees_another_stores_runs(tmp_path: Path) -> None:
    """Regression: with runs keyed by job id under ./var, a run with a fresh --db imported
    another store's attempts from the shared run folder (crash recovery took them for its
    own) and refused candidates as repeats it had never tried."""
    repo = make_calc_repo(tmp_path)
    wrong, fix = diff_for(repo, {"calc.py": WRONG}), diff_for(repo, {"calc.py": FIX})
    spec = write_spec(tmp_path / "job.toml", repo, diffs=[wrong, fix])
    first, second = tmp_path / "one.sqlite3", tmp_path / "two.sqlite3"
    _heal(spec, first, tmp_path / "reports")
    assert (tmp_path / "one-state" / "runs" / "calc" / "events.jsonl").is_file()
    _heal(spec, second, tmp_path / "reports")
    assert (tmp_path / "two-state" / "runs" / "calc" / "events.jsonl").is_file()
    assert _outcomes(second) == _outcomes(first) == ["no_effect", "fixed"]


@pytest.mark.parametrize(
    "command",
    [["attempts"], ["show", "1"], ["store", "check"], ["locks"], ["control", "calc", "pause"]],
)
def test_read_only_commands_on_a_missing_store_say_so_and_create_nothing(
    tmp_path: Path, command: list[str]
) -> None:
    db = tmp_path / "nowhere" / "store.sqlite3"
    done = patchheal_cli(*command, "--db", str(db))
    assert done.returncode == 2, done.stdout + done.stderr
    assert "no attempt store at" in done.stderr
    assert list(tmp_path.iterdir()) == []


def test_control_on_a_job_with_no_live_run_is_refused(tmp_path: Path) -> None:
    """Regression: a control for a job that is not running was queued silently, then
    blocked the job's next run naming a dead pid."""
    db = tmp_path / "store.sqlite3"
    AttemptStore(str(db)).close()
    done = patchheal_cli("control", "calc", "pause", "--db", str(db))
    assert done.returncode == 2
    assert "has no running heal" in done.stderr
    with AttemptStore(str(db)) as store:
        assert store.controls("calc") == []


def test_a_workspace_is_keyed_by_store_and_job(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from patchheal.memory.db import resolve_db_url
    from patchheal.workspace.worktrees import JobWorkspace, workspace_job

    repo = make_calc_repo(tmp_path)
    a, b = resolve_db_url(str(tmp_path / "a.sqlite3")), resolve_db_url(str(tmp_path / "b.sqlite3"))
    one, other = (JobWorkspace(repo, "main", "job", store=url).dir for url in (a, b))
    assert one != other
    assert one.parent == other.parent
    assert workspace_job(one.name)[0] == workspace_job(other.name)[0] == "job"
    # The same store however it is spelled (relative, from its folder): the same folder.
    monkeypatch.chdir(tmp_path)
    spelled = resolve_db_url("a.sqlite3")
    assert JobWorkspace(repo, "main", "job", store=spelled).dir == one


@pytest.mark.slow
def test_two_runs_of_one_job_id_against_two_stores_share_no_workspace(tmp_path: Path) -> None:
    """Both runs mid-proposal at once: each has its own private repository and worktrees,
    and neither's cleanup takes the other's away."""
    from tests.healjobs import (
        fixer_calls,
        fixer_proposer,
        make_multi_repo,
        multi_steps,
        start_heal,
        wait_for,
        workspace_of,
        write_fixer,
    )

    gate, log = tmp_path / "gate", tmp_path / "calls.log"
    gate.mkdir()
    spec = write_spec(
        tmp_path / "job.toml",
        make_multi_repo(tmp_path, 1),
        job_id="same-id",
        steps=multi_steps(1),
        proposer=fixer_proposer(write_fixer(tmp_path), log, gate=gate),
    )
    roots = [tmp_path / "a", tmp_path / "b"]
    runs = [start_heal(spec, root) for root in roots]
    try:
        wait_for(lambda: len(fixer_calls(log)) == 2, timeout=120, what="both runs proposing")
        spaces = [workspace_of("same-id", root / "store.sqlite3") for root in roots]
        assert spaces[0] != spaces[1]
        assert all((space / "repo.git").is_dir() for space in spaces)
        calls = fixer_calls(log)
        assert {c["target"] for c in calls} == {"b1.py"}  # each found its bug in its own tree
        # Which run's agent came first is up to the scheduler: release that one first.
        first = next(
            i
            for i, space in enumerate(spaces)
            if Path(calls[0]["cwd"]).resolve().is_relative_to(space.resolve())
        )
        second = 1 - first
        (gate / "go-1").touch()
        _, err = runs[first].communicate(timeout=180)
        assert runs[first].returncode == 0, err
        assert not spaces[first].exists()  # cleaned up after itself ...
        assert (spaces[second] / "repo.git").is_dir()  # ... and only after itself
        (gate / "go-2").touch()
        _, err = runs[second].communicate(timeout=180)
        assert runs[second].returncode == 0, err
    finally:
        for run in runs:
            if run.poll() is None:
                run.kill()
                run.communicate()
