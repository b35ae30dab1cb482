"""The local harness: timeouts, process-group kill, output cap, environment, setup once."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from patchheal.config import load_spec
from patchheal.errors import HarnessError
from patchheal.harness.base import Harness
from patchheal.harness.local.harness import LocalHarness
from patchheal.intake.toml import spec_to_toml
from patchheal.loop.controller import HealLoop, HealOptions
from tests.healjobs import BUGGY, FIX, WRONG, diff_for, git, make_calc_repo, toml_str, write_spec


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().rsplit(")", 1)[1].split()[0] != "Z"


def test_satisfies_the_protocol(tmp_path: Path) -> None:
    harness = LocalHarness()
    assert isinstance(harness, Harness)
    result = harness.run("echo out; echo err >&2; exit 4", tmp_path, timeout=30, idle_timeout=30)
    assert result.exit_code == 4
    assert "out" in result.output
    assert "err" in result.output
    assert result.harness == "local"


def test_idle_timeout_kills_the_whole_process_group(tmp_path: Path) -> None:
    """Invariant: a hanging step's children die with it, not only the shell."""
    script = "sleep 300 & echo $! > child.pid; echo started; wait"
    started = time.monotonic()
    result = LocalHarness().run(script, tmp_path, timeout=60, idle_timeout=1.5)
    assert result.timed_out == "idle"
    assert result.exit_code is None
    assert "started" in result.output
    assert time.monotonic() - started < 10
    child = int((tmp_path / "child.pid").read_text())
    deadline = time.monotonic() + 5
    while alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(child)


def test_wall_timeout_stops_a_chatty_step(tmp_path: Path) -> None:
    started = time.monotonic()
    result = LocalHarness().run(
        "while true; do echo tick; sleep 0.1; done", tmp_path, timeout=1.5, idle_timeout=60
    )
    assert result.timed_out == "wall"
    assert result.output.count("tick") >= 5
    assert time.monotonic() - started < 10


def test_output_is_capped_keeping_head_and_tail(tmp_path: Path) -> None:
    script = "echo FIRST-LINE; head -c 6000000 /dev/zero | tr '\\0' x; echo; echo LAST-LINE"
    result = LocalHarness().run(script, tmp_path, timeout=60, idle_timeout=60)
    assert result.exit_code == 0
    assert result.truncated
    assert len(result.output) < 3 * 1024 * 1024
    assert result.output.startswith("FIRST-LINE")
    assert result.output.rstrip().endswith("LAST-LINE")
    assert "elided by patchheal" in result.output


def test_environment_is_deterministic_and_drops_secrets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PH_LOCAL_SECRET", "hunter2")
    monkeypatch.setenv("PH_LOCAL_PASS", "yes")
    monkeypatch.setenv("TZ", "Europe/Paris")
    result = LocalHarness(env_passthrough=["PH_LOCAL_PASS"]).run(
        "env", tmp_path, timeout=30, idle_timeout=30
    )
    env = dict(line.split("=", 1) for line in result.output.splitlines() if "=" in line)
    assert env["TZ"] == "UTC"
    assert env["PYTHONHASHSEED"] == "0"
    assert env["PH_LOCAL_PASS"] == "yes"
    assert "hunter2" not in result.output


def test_setup_runs_once_per_worktree_and_a_failure_is_a_harness_error(tmp_path: Path) -> None:
    harness = LocalHarness(setup=["echo x >> setup.count"])
    harness.prepare(tmp_path)
    harness.prepare(tmp_path)
    assert (tmp_path / "setup.count").read_text() == "x\n"
    with pytest.raises(HarnessError, match="setup command failed"):
        LocalHarness(setup=["echo broken; exit 2"]).prepare(tmp_path)


PRINT_PREFIX = "python -c 'import sys; print(sys.prefix)'"


@pytest.mark.slow
def test_setup_runs_in_a_venv_of_the_jobs_own_and_the_steps_use_it(tmp_path: Path) -> None:
    """Regression: without Docker, the job's setup ran in the active environment, so
    `pip install -e .` installed the user's project into patchheal's own venv."""
    worktree = tmp_path / "wt"
    worktree.mkdir()
    (worktree / "pyproject.toml").write_text("[project]\nname = 'user-project'\n")
    harness = LocalHarness(setup=[f"{PRINT_PREFIX} > setup-prefix.txt"])
    harness.prepare(worktree)
    setup_prefix = Path((worktree / "setup-prefix.txt").read_text().strip())
    root = Path(os.environ["PATCHHEAL_WORKTREE_ROOT"]).resolve()
    assert setup_prefix.resolve() != Path(sys.prefix).resolve()
    assert setup_prefix.resolve().is_relative_to(root / "venvs")
    step = harness.run(PRINT_PREFIX, worktree, timeout=60, idle_timeout=60)
    assert step.output.strip() == str(setup_prefix)


@pytest.mark.slow
def test_a_dependency_change_gets_a_fresh_venv_and_an_unchanged_one_is_reused(
    tmp_path: Path,
) -> None:
    worktree = tmp_path / "wt"
    worktree.mkdir()
    (worktree / "requirements.txt").write_text("one\n")
    setup = [f"{PRINT_PREFIX} >> prefixes.txt"]
    LocalHarness(setup=setup).prepare(worktree)
    LocalHarness(setup=setup).prepare(worktree)  # a later run: the complete venv is reused
    assert len((worktree / "prefixes.txt").read_text().splitlines()) == 1
    (worktree / "requirements.txt").write_text("two\n")
    LocalHarness(setup=setup).prepare(worktree)
    first, second = (worktree / "prefixes.txt").read_text().splitlines()
    assert first != second


def write_wheel(path: Path) -> None:
    """A minimal real wheel with a `tinycli` console script, built without any index."""
    import zipfile

    files = {
        "tinycli/__init__.py": "import sys\n\ndef main():\n    print('venv-tinycli', sys.prefix)\n",
        "tinycli-0.1.dist-info/METADATA": "Metadata-Version: 2.1\nName: tinycli\nVersion: 0.1\n",
        "tinycli-0.1.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: test\n"
        "Root-Is-Purelib: true\nTag: py3-none-any\n",
        "tinycli-0.1.dist-info/entry_points.txt": "[console_scripts]\ntinycli = tinycli:main\n",
    }
    record = "".join(f"{name},,\n" for name in files) + "tinycli-0.1.dist-info/RECORD,,\n"
    with zipfile.ZipFile(path, "w") as wheel:
        for name, text in {**files, "tinycli-0.1.dist-info/RECORD": record}.items():
            wheel.writestr(name, text)


@pytest.mark.slow
def test_a_bare_command_installed_by_setup_is_the_job_venvs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Invariant: the job's environment comes first on PATH: a console script that setup
    installed runs from the job's venv, not a same-named command of the host's PATH."""
    host_bin = tmp_path / "host-bin"
    host_bin.mkdir()
    (host_bin / "tinycli").write_text("#!/bin/sh\necho host-tinycli\n")
    (host_bin / "tinycli").chmod(0o755)
    monkeypatch.setenv("PATH", f"{host_bin}{os.pathsep}{os.environ['PATH']}")
    worktree = tmp_path / "wt"
    worktree.mkdir()
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    write_wheel(wheels / "tinycli-0.1-py3-none-any.whl")
    # Offline: pip installs a wheel made here (and writes its console script).
    harness = LocalHarness(setup=[f"pip install -q --no-index --find-links {wheels} tinycli"])
    harness.prepare(worktree)
    step = harness.run("tinycli", worktree, timeout=60, idle_timeout=60)
    assert step.exit_code == 0, step.output
    assert step.output.startswith("venv-tinycli "), step.output
    prefix = Path(step.output.split()[1])
    assert prefix.is_relative_to(Path(os.environ["PATCHHEAL_WORKTREE_ROOT"]).resolve() / "venvs")


# A version file as hatch-vcs or setuptools-scm writes it at install: ignored by git,
# imported by the project, so present in CI (which installs in the tree it tests).
WRITE_VERSION = (
    "python -c \"import pathlib; pathlib.Path('_version.py').write_text('version = 1\\\\n')\""
)


def test_what_setup_generated_in_the_tree_is_laid_again_after_a_reset(tmp_path: Path) -> None:
    """Regression (tox-dev/filelock, hatch-vcs): the local harness ran setup in the verify
    worktree once; the reset before the next attempt (`clean -ffdx`) removed the version
    file it wrote, so every later attempt was a harness error ("module absent")."""
    repo = make_calc_repo(
        tmp_path,
        files={
            "calc.py": "from _version import version\n\n" + BUGGY,
            ".gitignore": "_version.py\n",
        },
    )
    wrong = diff_for(repo, {"calc.py": "from _version import version\n\n" + WRONG})
    fix = diff_for(repo, {"calc.py": "from _version import version\n\n" + FIX})
    spec = write_spec(tmp_path / "job.toml", repo, diffs=[wrong, fix])
    text = spec.read_text().replace(
        'harness = "local"', f'harness = "local"\nsetup = [{toml_str(WRITE_VERSION)}]'
    )
    spec.write_text(text)
    loaded = load_spec(spec)
    result = HealLoop(
        loaded,
        spec_to_toml(loaded),
        HealOptions(
            state_dir=tmp_path / "var",
            db=str(tmp_path / "store.sqlite3"),
            reports_dir=tmp_path / "reports",
        ),
    ).run()
    got = [a.outcome.value for s in result.report.steps for a in s.attempts]
    assert got == ["no_effect", "fixed"], result.report.steps[0].attempts[-1].reason
    branch = result.report.branch
    assert branch is not None
    listed = git(repo, "ls-tree", "-r", "--name-only", branch).split()
    assert "_version.py" not in listed
    assert "calc.py" in listed


def test_a_generated_file_a_step_edits_or_removes_is_laid_again(tmp_path: Path) -> None:
    """Invariant: the generated copy is what every run sees, as CI regenerates it at install;
    a venv reused by a later harness (a resumed job) still carries it."""
    worktree = tmp_path / "wt"
    worktree.mkdir()
    LocalHarness(setup=[WRITE_VERSION]).prepare(worktree)
    assert (worktree / "_version.py").read_text() == "version = 1\n"
    (worktree / "_version.py").write_text("version = 2\n")
    harness = LocalHarness(setup=[WRITE_VERSION])
    harness.prepare(worktree)  # the complete venv is reused: setup does not run again
    first = harness.run("cat _version.py; rm _version.py", worktree, timeout=60, idle_timeout=60)
    assert first.output.strip() == "version = 1"
    second = harness.run("cat _version.py", worktree, timeout=60, idle_timeout=60)
    assert second.output.strip() == "version = 1"
