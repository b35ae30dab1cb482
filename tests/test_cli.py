"""The command line as a user runs it: real processes, real exit codes."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from tests.healjobs import git, make_calc_repo

DEMO_OUTCOMES = [
    "apply_failed",
    "no_effect",
    "rejected_repeat",
    "rejected_policy",
    "regression",
    "fixed",
]


def patchheal(*args: str, cwd: Path, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_DIR")}
    return subprocess.run(
        [sys.executable, "-m", "patchheal", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


def test_help_lists_every_command(tmp_path: Path) -> None:
    result = patchheal("--help", cwd=tmp_path)
    assert result.returncode == 0
    for command in (
        "heal",
        "demo",
        "batch",
        "attempts",
        "show",
        "worktree",
        "report",
        "outcome",
        "control",
        "fingerprint",
        "harness",
        "gc",
        "locks",
        "store",
    ):
        assert command in result.stdout


@pytest.mark.slow
def test_demo_shows_every_gate_then_memory_on_the_second_run(tmp_path: Path) -> None:
    """One demo run shows all six outcomes; a second run against the same store rejects the
    already-tried patches without running them, refuses the test-skipping one again (in its
    log and report, never silently), and tries the known fix first."""
    args = ("demo", "--harness", "local", "--workdir", str(tmp_path / "work"), "--json")
    first = patchheal(*args, cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    summary = json.loads(first.stdout)
    assert [a["outcome"] for a in summary["attempts"]] == DEMO_OUTCOMES
    assert summary["status"] == "fixed"
    assert summary["branch"] == "patchheal/local/demo-pricing"
    repo = tmp_path / "work" / "pricing"
    assert git(repo, "rev-parse", "--abbrev-ref", "HEAD") == "main"
    assert ">= 10" in git(repo, "show", "patchheal/local/demo-pricing:pricing/rules.py")
    report = Path(summary["reports"]["md"])
    assert report.is_file()
    text = report.read_text()
    for outcome in DEMO_OUTCOMES:
        assert outcome in text
    # The user's one default store, not one under the working directory (issue 34).
    assert (Path(os.environ["XDG_STATE_HOME"]) / "patchheal/memory/attempts.sqlite3").is_file()
    assert not (tmp_path / "var").exists()

    second = patchheal(*args, cwd=tmp_path)
    assert second.returncode == 0, second.stderr
    attempts = json.loads(second.stdout)["attempts"]
    rejected = [a["label"] for a in attempts if a["outcome"] == "rejected_repeat"]
    assert rejected == [
        "01-fix_rounding.patch",
        "02-add_guard.patch",
        "03-add_guard_again.patch",
        "05-fix_logic.patch",
    ]
    # Regression (issue 27): the test-skipping patch was dropped silently on the second
    # run; it is offered again, so it is refused (and recorded) again.
    refused = [a["label"] for a in attempts if a["outcome"] == "rejected_policy"]
    assert refused == ["04-skip_test.patch"]
    assert "04-skip_test.patch [" in second.stderr
    assert attempts[-1]["outcome"] == "fixed"
    assert attempts[-1]["label"] == "06-fix_boundary.patch"
    assert "verified for this fingerprint before" in second.stderr

    listing = patchheal("attempts", "--job", "demo-pricing", cwd=tmp_path)
    assert listing.returncode == 0
    assert listing.stdout.count("rejected_repeat") == 5
    first_id = listing.stdout.splitlines()[1].split()[0]
    shown = patchheal("show", first_id, cwd=tmp_path)
    assert "apply_failed" in shown.stdout
    opened = patchheal("worktree", "open", first_id, cwd=tmp_path)
    assert opened.returncode == 0, opened.stderr
    assert Path(opened.stdout.split()[0]).is_dir()


def test_print_spec_shows_the_toml_the_flags_make(tmp_path: Path) -> None:
    repo = make_calc_repo(tmp_path)
    (tmp_path / "cands").mkdir()
    result = patchheal(
        "heal",
        "--repo",
        str(repo),
        "--base",
        "main",
        "--step",
        "pytest -q",
        "--proposer",
        f"patchfiles:{tmp_path / 'cands'}",
        "--print-spec",
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert "[[steps]]" in result.stdout
    assert 'command = "pytest -q"' in result.stdout
    assert 'kind = "patchfiles"' in result.stdout


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("[job\nid = 1", "not valid TOML"),
        ('[job]\nid = "x"\nrepoo = "."\n[[steps]]\nname = "a"\ncommand = "true"\n', "job.repoo"),
        ('[job]\nid = "x"\n', "steps"),
        (
            '[job]\nid = "x"\nharness = "no-such-harness"\n'
            '[[steps]]\nname = "a"\ncommand = "true"\n'
            '[proposer]\nkind = "scripted"\ndiffs = []\n',
            "no-such-harness",
        ),
        # [job] packages are Debian package names (issue 32): no option, no shell word.
        (
            '[job]\nid = "x"\npackages = ["graphviz", "Lib_PQ"]\n'
            '[[steps]]\nname = "a"\ncommand = "true"\n',
            "'Lib_PQ' is not a Debian package name",
        ),
        (
            '[job]\nid = "x"\npackages = ["--allow-unauthenticated"]\n'
            '[[steps]]\nname = "a"\ncommand = "true"\n',
            "is not a Debian package name",
        ),
    ],
)
def test_bad_spec_is_exit_2_with_a_clear_message(tmp_path: Path, spec: str, expected: str) -> None:
    make_calc_repo(tmp_path)
    path = tmp_path / "job.toml"
    path.write_text(spec.replace('id = "x"', f'id = "x"\nrepo = "{tmp_path / "calc-repo"}"'))
    result = patchheal("heal", str(path), cwd=tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    assert expected in result.stderr
    assert "Traceback" not in result.stderr


def test_non_git_repository_is_exit_2(tmp_path: Path) -> None:
    result = patchheal(
        "heal", "--repo", str(tmp_path), "--step", "true", "--harness", "local", cwd=tmp_path
    )
    assert result.returncode == 2
    assert "not a git repository" in result.stderr
    assert "Traceback" not in result.stderr


def test_binary_spec_file_is_exit_2(tmp_path: Path) -> None:
    path = tmp_path / "job.toml"
    path.write_bytes(bytes(range(256)) * 4)
    result = patchheal("heal", str(path), cwd=tmp_path)
    assert result.returncode == 2
    assert "not UTF-8" in result.stderr or "not valid TOML" in result.stderr


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.usefixtures("require_docker")
def test_demo_heals_inside_docker_when_an_engine_is_reachable(tmp_path: Path) -> None:
    """The authoritative harness: with an engine, the demo's steps run in a container,
    whose image patchheal builds itself when none can be pulled."""
    result = patchheal(
        "demo", "--workdir", str(tmp_path / "work"), "--json", cwd=tmp_path, timeout=900
    )
    assert result.returncode == 0, result.stderr[-3000:]
    summary = json.loads(result.stdout)
    assert [a["outcome"] for a in summary["attempts"]] == DEMO_OUTCOMES
    assert "harness: docker:python" in result.stderr
    report = json.loads(Path(summary["reports"]["json"]).read_text())
    assert report["harness"] == "docker:python"


@pytest.mark.slow
def test_each_demo_run_gets_a_private_directory_of_its_own(tmp_path: Path) -> None:
    """Regression (issue 27): without --workdir every demo wiped and reused one shared
    `/tmp/patchheal-demo`, so two users (or two runs) clobbered each other's repository.
    A run makes a private temp directory of its own (and keeps it for its printed
    commands); another run's repository at the old shared path is left alone."""
    other = tmp_path / "patchheal-demo" / "pricing"
    other.mkdir(parents=True)
    (other / "someone-elses-work.txt").write_text("keep me\n")
    done = subprocess.run(
        [sys.executable, "-m", "patchheal", "demo", "--harness", "local", "--json",
         "--db", str(tmp_path / "store.sqlite3"), "--reports", str(tmp_path / "reports")],
        cwd=tmp_path, env={**os.environ, "TMPDIR": str(tmp_path)},
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(Path(json.loads(done.stdout)["reports"]["json"]).read_text())
    workdir = Path(report["repo"]).parent
    assert workdir.parent == tmp_path.resolve()
    assert workdir.name.startswith("patchheal-demo-")
    assert stat.S_IMODE(workdir.stat().st_mode) == 0o700
    assert (other / "someone-elses-work.txt").read_text() == "keep me\n"
    # The next demo removes the finished one's folder (issue 34), never a folder it did
    # not make, nor one whose demo still runs.
    live = tmp_path / "patchheal-demo-live"
    live.mkdir()
    (live / ".patchheal-demo").write_text(f"{os.getpid()}\n")
    again = subprocess.run(
        [sys.executable, "-m", "patchheal", "demo", "--harness", "local",
         "--db", str(tmp_path / "store.sqlite3"), "--reports", str(tmp_path / "reports")],
        cwd=tmp_path, env={**os.environ, "TMPDIR": str(tmp_path)},
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert again.returncode == 0, again.stderr[-2000:]
    assert not workdir.exists()
    assert f"removed 1 earlier demo folder(s): {workdir}" in again.stdout
    assert "the next demo removes it" in again.stdout
    assert live.is_dir()
    assert (other / "someone-elses-work.txt").read_text() == "keep me\n"
