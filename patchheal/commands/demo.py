"""`patchheal demo [--example python|dbt|airflow]`: heal a bundled example end to end.

It materializes patchheal/examples/<folder>/project (package data, so it ships
in the wheel) as a fresh git repository, writes its job spec, and runs exactly
what `patchheal heal JOB.toml` runs. The python example's spec is below; the
others ship theirs as examples/<folder>/job.toml.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import click

from patchheal import proc
from patchheal.commands.options import StateArgs, state_options

DEMO_JOB_ID = "demo-pricing"
# A fixed identity and date, so the example's base commit is the same on
# every machine (and so is everything derived from it).
_GIT_ENV = {
    "GIT_AUTHOR_NAME": "Demo Shop",
    "GIT_AUTHOR_EMAIL": "dev@demo-shop.invalid",
    "GIT_COMMITTER_NAME": "Demo Shop",
    "GIT_COMMITTER_EMAIL": "dev@demo-shop.invalid",
    "GIT_AUTHOR_DATE": "2026-01-05T09:00:00Z",
    "GIT_COMMITTER_DATE": "2026-01-05T09:00:00Z",
}

JOB_TEMPLATE = """\
# Written by `patchheal demo`: heal it again with `patchheal heal {job_file}`.
[job]
id = "{job_id}"
repo = "{repo}"
base = "main"
harness = "{harness}"
objective = "The pricing unit tests pass."

[[steps]]
name = "unit"
command = "python -m pytest -q tests/test_rules.py::test_bulk_discount_starts_at_ten"

[regression]
command = "python -m pytest -q"

[proposer]
kind = "patchfiles"
dir = "{candidates}"

[budget]
max_attempts = 3
step_timeout_seconds = 300
idle_timeout_seconds = 120
"""


@dataclass(frozen=True)
class Example:
    """A bundled example: its folder under examples/, the repository it becomes, its job."""

    folder: str
    repo_name: str
    job_id: str
    commit_message: str
    default_harness: str


EXAMPLES = {
    "python": Example(
        "demo", "pricing", DEMO_JOB_ID, "pricing: bulk discounts and shipping", "auto"
    ),
    "dbt": Example("dbt", "shop", "demo-dbt-shop", "shop: amounts in cents", "dbt"),
    "airflow": Example(
        "airflow", "orders", "demo-airflow-orders", "orders: daily revenue DAG", "airflow"
    ),
}


def example_dir(name: str = "python") -> Path:
    from patchheal.errors import BadInput

    root = Path(__file__).resolve().parents[1] / "examples" / EXAMPLES[name].folder
    if not (root / "project").is_dir():
        raise BadInput(f"the bundled example is missing at {root}; reinstall patchheal")
    return root


def materialize(workdir: Path, name: str = "python") -> tuple[Path, Path]:
    """Create workdir/<repo> as a fresh git repository; returns (repo, job file)."""
    from patchheal.proc import no_git_env

    example = example_dir(name)
    repo = workdir / EXAMPLES[name].repo_name
    if repo.exists():
        shutil.rmtree(repo)
    shutil.copytree(
        example / "project",
        repo,
        ignore=shutil.ignore_patterns("__pycache__", ".pytest_cache", "*.egg-info"),
    )
    env = {**no_git_env(), **_GIT_ENV}
    for args in (
        ["init", "-q", "-b", "main"],
        ["add", "-A"],
        ["commit", "-q", "-m", EXAMPLES[name].commit_message],
    ):
        subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True)
    return repo, workdir / "job.toml"


# Written into a temporary folder `demo` made itself, with the pid of the demo that uses
# it: only such folders, of demos no longer running, are ever removed.
DEMO_MARKER = ".patchheal-demo"


def _running(pid_text: str) -> bool:
    try:
        pid = int(pid_text.strip())
    except ValueError:
        return False
    return proc.pid_alive(pid)


def remove_finished_demos(tmp: Path) -> list[Path]:
    """Remove this user's earlier `patchheal-demo-*` folders whose demo has finished."""
    removed: list[Path] = []
    for folder in sorted(tmp.glob("patchheal-demo-*")):
        marker = folder / DEMO_MARKER
        try:
            if folder.is_symlink() or folder.lstat().st_uid != os.getuid():
                continue
            if not marker.is_file() or _running(marker.read_text(encoding="utf-8")):
                continue
            shutil.rmtree(folder)
        except OSError:
            continue  # a folder that cannot be read or removed stays, as it was
        removed.append(folder)
    return removed


@click.command()
@click.option(
    "--workdir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="where the example repository is created [default: a new private temp directory "
    "per run, kept so the printed commands work, removed by the next demo]",
)
@click.option(
    "--example",
    type=click.Choice(sorted(EXAMPLES)),
    default="python",
    show_default=True,
    help="python: a pytest failure; dbt: a model and a data test on DuckDB; "
    "airflow: a DAG's task (airflow tasks test) and the DAG parse check",
)
@click.option(
    "--harness",
    default=None,
    help="auto, local, or a harness name [default: auto for python, else the example's own]",
)
@state_options
def demo(
    workdir: Path | None,
    example: str,
    harness: str | None,
    state: StateArgs,
) -> None:
    """Heal a bundled failing example; prints the verified branch and the report."""
    from patchheal.commands.heal import run_heal
    from patchheal.commands.options import verbosity
    from patchheal.config import load_spec
    from patchheal.intake.toml import spec_to_toml

    chosen = EXAMPLES[example]
    if workdir is None:
        # A private directory of this run's own (mode 0700): two demos, or two users of
        # one machine, never wipe each other's repository as a shared fixed path did.
        # It is kept so the report's printed commands work, and removed by the next demo.
        prefix = "patchheal-demo-" if example == "python" else f"patchheal-demo-{example}-"
        removed = remove_finished_demos(Path(tempfile.gettempdir()))
        workdir = Path(tempfile.mkdtemp(prefix=prefix))
        (workdir / DEMO_MARKER).write_text(f"{os.getpid()}\n", encoding="utf-8")
        if removed and not state.as_json and verbosity() >= 0:
            click.echo(f"demo: removed {len(removed)} earlier demo folder(s): {removed[0]} …")
    workdir = workdir.resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    repo, job_file = materialize(workdir, example)
    own = example_dir(example) / "job.toml"
    template = own.read_text(encoding="utf-8") if own.is_file() else JOB_TEMPLATE
    job_file.write_text(
        template.format(
            job_file=job_file,
            job_id=chosen.job_id,
            repo=repo,
            harness=harness or chosen.default_harness,
            candidates=example_dir(example) / "candidates",
        ),
        encoding="utf-8",
    )
    if not state.as_json and verbosity() >= 0:
        click.echo(f"demo: example repository {repo} ({example}: a real bug, a failing step)")
        if (workdir / DEMO_MARKER).is_file():
            click.echo(
                f"demo: {workdir} is kept for the report's commands; the next demo removes it"
            )
        click.echo(f"demo: job spec {job_file}")
    spec = load_spec(job_file)
    sys.exit(
        run_heal(
            spec,
            spec_to_toml(spec),
            state,
        )
    )
