"""The wheel carries everything a user needs: `pip install .` in a fresh venv runs the demo."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import venv
import zipfile
from pathlib import Path

import pytest

CHECKOUT = Path(__file__).resolve().parents[1]


def _build_wheel(out: Path) -> Path:
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(out), str(CHECKOUT)],
        check=True,
        capture_output=True,
        timeout=600,
    )
    (wheel,) = out.glob("patchheal-*.whl")
    return wheel


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _build_wheel(tmp_path_factory.mktemp("wheel"))


@pytest.mark.slow
def test_the_wheel_ships_harness_definitions_and_the_demo(wheel: Path) -> None:
    """A non-editable install has the bundled harnesses (`unknown harness 'python'` otherwise)
    and the demo's project and candidates."""
    names = set(zipfile.ZipFile(wheel).namelist())
    for required in (
        "patchheal/harnesses/python/harness.toml",
        "patchheal/harnesses/node/harness.toml",
        "patchheal/harnesses/generic/harness.toml",
        "patchheal/harnesses/compose/harness.toml",
        "patchheal/examples/demo/project/pricing/rules.py",
        "patchheal/examples/demo/project/tests/test_rules.py",
        "patchheal/examples/demo/project/pyproject.toml",
        "patchheal/examples/demo/candidates/06-fix_boundary.patch",
        "patchheal/harnesses/airflow/harness.toml",
        "patchheal/harnesses/airflow/Dockerfile",
        "patchheal/harnesses/airflow/entrypoint.sh",
        "patchheal/harnesses/airflow/constraints-2.10.5-py3.11.txt",
        "patchheal/examples/airflow/job.toml",
        "patchheal/examples/airflow/project/.gitignore",
        "patchheal/examples/airflow/project/dags/daily_revenue.py",
        "patchheal/examples/airflow/project/dags/weekly_report.py",
        "patchheal/examples/airflow/project/dags/shop/orders.py",
        "patchheal/examples/airflow/project/dags/shop/data/orders.csv",
        "patchheal/examples/airflow/candidates/04-parse_iso_8601.patch",
        "patchheal/report/templates/report.md.j2",
    ):
        assert required in names, f"{required} is missing from {wheel.name}"


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_the_demo_runs_from_the_wheel_in_a_fresh_venv(wheel: Path, tmp_path: Path) -> None:
    """`pip install WHEEL` into a fresh venv, then `patchheal demo --harness local` from a
    directory outside the checkout exits 0 (fixed) and lists the bundled harnesses."""
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    bin_dir = env_dir / "bin"
    # pytest: the demo's step runs `python -m pytest` in the local harness, as a user's would.
    subprocess.run(
        [str(bin_dir / "python"), "-m", "pip", "install", "-q", str(wheel), "pytest"],
        check=True,
        capture_output=True,
        timeout=600,
    )
    elsewhere = tmp_path / "user"
    elsewhere.mkdir()
    env = {
        **os.environ,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
        "VIRTUAL_ENV": str(env_dir),
    }
    env.pop("PYTHONPATH", None)
    where = subprocess.run(
        [str(bin_dir / "python"), "-c", "import patchheal; print(patchheal.__file__)"],
        cwd=elsewhere,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert str(env_dir) in where, where
    listed = subprocess.run(
        [str(bin_dir / "patchheal"), "harness", "list"],
        cwd=elsewhere,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert listed.returncode == 0, listed.stderr
    assert "python" in listed.stdout
    demo = subprocess.run(
        [str(bin_dir / "patchheal"), "demo", "--harness", "local", "--workdir", "demo"],
        cwd=elsewhere,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert demo.returncode == 0, demo.stdout + demo.stderr
    assert "patchheal/local/demo-pricing" in demo.stdout + demo.stderr


# -- the README's own job example, from the wheel, on a project patchheal did not write --

README = CHECKOUT / "README.md"

# A small project of a user's: its own PyPI dependency (`parse`, which the harness image
# does not have), a src layout (importable only once installed), a real bug and its test.
USER_PROJECT = {
    "pyproject.toml": textwrap.dedent("""\
        [project]
        name = "durations"
        version = "0.3.0"
        dependencies = ["parse>=1.19"]

        [project.optional-dependencies]
        test = ["pytest"]

        [build-system]
        requires = ["setuptools>=64"]
        build-backend = "setuptools.build_meta"
        """),
    "src/durations/__init__.py": textwrap.dedent("""\
        from parse import parse


        def seconds(text):
            \"\"\"'2m30s' -> 150.\"\"\"
            found = parse("{minutes:d}m{seconds:d}s", text)
            if found is None:
                raise ValueError(f"not a duration: {text!r}")
            return found["minutes"] * 60 + found["minutes"]
        """),
    "tests/test_parser.py": textwrap.dedent("""\
        import pytest

        from durations import seconds


        def test_minutes_and_seconds():
            assert seconds("2m30s") == 150


        def test_rejects_what_is_not_a_duration():
            with pytest.raises(ValueError):
                seconds("soon")
        """),
}
BUG = 'found["minutes"] * 60 + found["minutes"]'
WRONG_FIX = 'found["seconds"] * 60 + found["minutes"]'
RIGHT_FIX = 'found["minutes"] * 60 + found["seconds"]'


def readme_job_example() -> str:
    """The first TOML block under README.md's "Healing your own job", as written there."""
    text = README.read_text(encoding="utf-8")
    section = text.split("## Healing your own job", 1)[1]
    return section.split("```toml\n", 1)[1].split("```", 1)[0]


def with_patchfiles_proposer(spec: str, directory: Path) -> str:
    """`spec` with its `[proposer]` table (a model server) replaced by patch files."""
    head, _, rest = spec.partition("[proposer]\n")
    assert rest, "the README's example has no [proposer] table"
    tail = rest[rest.index("\n[") :] if "\n[" in rest else ""
    return f'{head}[proposer]\nkind = "patchfiles"\ndir = "{directory}"\n{tail}'


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=repo, check=True, capture_output=True, text=True
    ).stdout


def _user_project(root: Path) -> Path:
    repo = root / "durations"
    for rel, body in USER_PROJECT.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(body, encoding="utf-8")
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "durations: parse minutes and seconds")
    return repo


def _candidate(repo: Path, replacement: str) -> str:
    module = repo / "src/durations/__init__.py"
    original = module.read_text(encoding="utf-8")
    module.write_text(original.replace(BUG, replacement), encoding="utf-8")
    diff = _git(repo, "diff")
    module.write_text(original, encoding="utf-8")
    return diff


def _fresh_venv(root: Path, *packages: str) -> tuple[Path, dict[str, str]]:
    env_dir = root / "venv"
    venv.create(env_dir, with_pip=True)
    bin_dir = env_dir / "bin"
    subprocess.run(
        [str(bin_dir / "python"), "-m", "pip", "install", "-q", *packages],
        check=True,
        capture_output=True,
        timeout=900,
    )
    env = {
        **os.environ,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
        "VIRTUAL_ENV": str(env_dir),
    }
    env.pop("PYTHONPATH", None)
    return bin_dir, env


def test_the_readme_example_is_extracted_as_written() -> None:
    """The extraction below reads the README's example itself, so the test cannot drift
    from it: the block loads as TOML and names what a user copies."""
    import tomllib

    spec = tomllib.loads(readme_job_example())
    assert spec["job"]["setup"] == ["pip install -e .[test]"]
    assert spec["steps"][0]["command"].startswith("pytest ")
    swapped = tomllib.loads(with_patchfiles_proposer(readme_job_example(), Path("/c")))
    assert swapped["proposer"] == {"kind": "patchfiles", "dir": "/c"}
    assert {k: v for k, v in swapped.items() if k != "proposer"} == {
        k: v for k, v in spec.items() if k != "proposer"
    }


@pytest.mark.slow
@pytest.mark.docker
@pytest.mark.timeout(1800)
@pytest.mark.usefixtures("require_docker")
def test_the_readme_job_example_heals_a_users_project_from_the_wheel(
    wheel: Path, tmp_path: Path
) -> None:
    """Regression (issue 16): the README's job example, as written there (only its model
    server swapped for patch files), run by a wheel installed in a fresh venv, from inside
    a fresh project with its own dependency, in the Docker python harness: it reproduces,
    classifies `code_bug` (not an environment failure: bare `pytest` is the job's
    environment's), rejects a wrong fix and verifies the right one."""
    bin_dir, env = _fresh_venv(tmp_path, str(wheel))
    repo = _user_project(tmp_path)
    candidates = tmp_path / "candidates"
    candidates.mkdir()
    (candidates / "01-swap.patch").write_text(_candidate(repo, WRONG_FIX), encoding="utf-8")
    (candidates / "02-seconds.patch").write_text(_candidate(repo, RIGHT_FIX), encoding="utf-8")
    spec = readme_job_example()
    assert 'repo = "."' in spec
    assert 'harness = "auto"' in spec
    (repo / "job.toml").write_text(with_patchfiles_proposer(spec, candidates), encoding="utf-8")
    # The "CI log" is what the step printed when CI (here `harness run`) ran it.
    ci = subprocess.run(
        [
            *(str(bin_dir / "patchheal"), "harness", "run", "python", "--repo", "."),
            *("--setup", "pip install -e .[test]", "--", "pytest -q tests/test_parser.py"),
        ],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=1200,
        stdin=subprocess.DEVNULL,
    )
    assert ci.returncode == 1, ci.stdout + ci.stderr[-4000:]
    assert "1 failed, 1 passed" in ci.stdout
    (repo / "ci-4821.log").write_text(ci.stdout, encoding="utf-8")
    healed = subprocess.run(
        [str(bin_dir / "patchheal"), "heal", "job.toml", "--json"],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=1700,
        stdin=subprocess.DEVNULL,
    )
    assert healed.returncode == 0, healed.stdout + healed.stderr[-4000:]
    summary = json.loads(healed.stdout)
    assert "harness: docker:python" in healed.stderr
    assert summary["classification"] == "code_bug"
    assert [(a["label"], a["outcome"]) for a in summary["attempts"]] == [
        ("01-swap.patch", "no_effect"),
        ("02-seconds.patch", "fixed"),
    ]
    assert RIGHT_FIX in _git(repo, "show", "patchheal/local/ci-4821:src/durations/__init__.py")
    # Only the user's own files are untracked: patchheal's state is excluded.
    status = _git(repo, "status", "--porcelain", "--untracked-files=all").split("\n")
    assert sorted(filter(None, status)) == ["?? ci-4821.log", "?? job.toml"]


@pytest.mark.slow
@pytest.mark.docker
@pytest.mark.timeout(1800)
@pytest.mark.usefixtures("require_docker")
def test_pipx_install_of_the_wheel_runs_the_demo(wheel: Path, tmp_path: Path) -> None:
    """`pipx install WHEEL` (pipx from PyPI, in a venv of its own), then `patchheal demo`
    from the app pipx made: the demo's project heals in the Docker harness."""
    bin_dir, env = _fresh_venv(tmp_path, "pipx")
    env["PIPX_HOME"] = str(tmp_path / "pipx-home")
    env["PIPX_BIN_DIR"] = str(tmp_path / "pipx-bin")
    installed = subprocess.run(
        [str(bin_dir / "pipx"), "install", str(wheel)],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert installed.returncode == 0, installed.stdout + installed.stderr
    user = tmp_path / "user"
    user.mkdir()
    demo = subprocess.run(
        [str(tmp_path / "pipx-bin" / "patchheal"), "demo", "--workdir", "demo", "--json"],
        cwd=user,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        stdin=subprocess.DEVNULL,
    )
    assert demo.returncode == 0, demo.stderr[-4000:]
    summary = json.loads(demo.stdout)
    assert summary["status"] == "fixed"
    assert "harness: docker:python" in demo.stderr
