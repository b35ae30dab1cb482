"""The wheel carries everything a user needs: `pip install .` in a fresh venv runs the demo."""

from __future__ import annotations

import os
import subprocess
import sys
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
