"""Harness inference: the repository at the base commit, and what the failing change touched."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

from conftest import git

from patchheal.harness import registry
from patchheal.harness.inference import kind as inference


def _commit(repo: Path, files: dict[str, str], message: str) -> str:
    for rel, text in files.items():
        path = repo / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD").strip()


def test_the_base_commit_decides_not_the_working_tree(make_repo: Any) -> None:
    repo = make_repo({"pyproject.toml": "[project]\nname='x'\n"})
    base = git(repo, "rev-parse", "HEAD").strip()
    git(repo, "rm", "-q", "pyproject.toml")
    _commit(repo, {"package.json": "{}"}, "later: node")
    (repo / "compose.yaml").write_text("services: {}\n")  # uncommitted
    name, why = registry.infer(repo, base)
    assert name == "python"
    assert f"found pyproject.toml → python (in {base} at {base[:12]})" == why
    name, why = registry.infer(repo, "HEAD")
    assert name == "node"
    assert "found package.json → node" in why


def test_files_the_failing_change_touched_speak_first(make_repo: Any) -> None:
    repo = make_repo({"pyproject.toml": "", "airflow/dags/etl.py": "dag = 1\n"})
    green = git(repo, "rev-parse", "HEAD").strip()
    _commit(repo, {"compose.yaml": "services:\n  a: {image: redis:7}\n"}, "add services")
    _commit(repo, {"README.md": "x\n"}, "docs")
    name, why = registry.infer(repo, "HEAD", last_green=green)
    assert name == "compose"
    assert why == "the failing change touched compose.yaml → compose"
    # Only HEAD's own commit when the last green commit is unknown: no compose change there.
    name, why = registry.infer(repo, "HEAD")
    assert name == "compose"
    assert why.startswith("found compose.yaml → compose")


def test_rules_for_pipelines_and_undefined_harnesses_are_skipped() -> None:
    def every(_name: str) -> bool:
        return True

    def read(path: str) -> str:
        return "from airflow.decorators import dag\n" if path.endswith("etl.py") else ""

    files = ["pyproject.toml", "airflow/dags/etl.py", "transform/dbt_project.yml"]
    chosen = inference.choose(files, [], every, read=read)
    assert (chosen.harness, chosen.reason) == (
        "airflow",
        "found airflow/dags/etl.py (imports airflow) → airflow (in the repository)",
    )
    # Without a way to read the DAG file, its folder's name alone says nothing.
    assert inference.choose(files, [], every).harness == "dbt"
    changed = ["transform/models/orders.sql"]
    chosen = inference.choose(files, changed, every, read=read)
    assert (chosen.harness, chosen.reason) == (
        "dbt",
        "the failing change touched transform/models/orders.sql → dbt",
    )
    assert inference.choose(files, changed, lambda n: n == "python", read=read).harness == "python"
    # A root-level pattern does not match deeper: src/package.json is not a node project.
    assert inference.choose(["src/package.json"], [], every).harness == "generic"


def test_harness_explain_prints_the_choice_and_the_service_images(make_repo: Any) -> None:
    repo = make_repo(
        {
            "pyproject.toml": "",
            "compose.yaml": "services:\n  db:\n    image: postgres:16\n"
            "  cache:\n    image: rabbitmq:3\n  step:\n    depends_on: [db]\n",
        }
    )
    done = subprocess.run(
        [sys.executable, "-m", "patchheal", "harness", "explain", "--repo", str(repo)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "harness: compose (compose) — the failing change touched compose.yaml" in done.stdout
    assert "db: postgres:16 → offline harness postgres" in done.stdout
    assert "cache: rabbitmq:3 → the engine only" in done.stdout
    assert "step runs in: python" in done.stdout


def test_a_changed_dag_file_that_imports_airflow_picks_the_airflow_harness(make_repo: Any) -> None:
    repo = make_repo({"pyproject.toml": "[project]\nname='etl'\n", "dags/__init__.py": ""})
    green = git(repo, "rev-parse", "HEAD").strip()
    _commit(
        repo,
        {
            "dags/helpers.py": "ROWS = 3\n",
            "dags/orders.py": "import pendulum\nfrom airflow import DAG\n\nDAG('orders')\n",
        },
        "orders DAG",
    )
    name, why = registry.infer(repo, "HEAD", last_green=green)
    assert (name, why) == (
        "airflow",
        "the failing change touched dags/orders.py (imports airflow) → airflow",
    )


def test_a_dags_folder_without_airflow_is_not_airflow(make_repo: Any) -> None:
    """`dags/` is a common name (a DAG of build steps, a graph library): the import decides."""
    repo = make_repo({"pyproject.toml": "[project]\nname='graphs'\n"})
    _commit(repo, {"dags/topo.py": "import networkx\n# no airflow here: airflow_like = 1\n"}, "x")
    name, why = registry.infer(repo, "HEAD")
    assert name == "python", why
    assert why.startswith("found pyproject.toml → python")


def test_explain_prints_the_airflow_choice_for_the_bundled_example(tmp_path: Path) -> None:
    from patchheal.commands.demo import materialize

    repo, _ = materialize(tmp_path, "airflow")
    done = subprocess.run(
        [sys.executable, "-m", "patchheal", "harness", "explain", "--repo", str(repo)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "harness: airflow (docker) — the failing change touched dags/" in done.stdout
    assert "(imports airflow) → airflow" in done.stdout


# tox-dev/filelock's compose file, in shape: one service built for another platform, for
# one CI job; the project's tests are a plain pytest run.
_BUILT_SERVICE = """\
services:
  termux:
    build:
      context: tasks/termux
    platform: linux/arm64
    volumes:
      - .:/repo:ro
    command: ["bash", "-lc", "tox run -e py"]
"""


def test_a_compose_file_the_compose_harness_cannot_run_is_passed_over(make_repo: Any) -> None:
    """Regression (tox-dev/filelock): `harness = "auto"` took any compose file, so a project
    whose compose file builds a Termux image for one CI job got the compose harness and
    every heal stopped at its `build:`. Now the file is passed over, and the choice says why."""
    repo = make_repo({"pyproject.toml": "[project]\nname='x'\n", "compose.yaml": _BUILT_SERVICE})
    name, why = registry.infer(repo, "HEAD")
    assert name == "python"
    assert why.startswith("found pyproject.toml → python (in HEAD at "), why
    assert "compose.yaml passed over: " in why
    assert "services.termux.build is not supported" in why
    # Changed in the failing commit, it still says nothing about the harness.
    _commit(repo, {"compose.yaml": _BUILT_SERVICE + "# touched\n"}, "touch compose")
    assert registry.infer(repo, "HEAD")[0] == "python"


def test_a_host_bind_mount_or_broken_yaml_passes_over_and_a_runnable_file_still_counts(
    make_repo: Any,
) -> None:
    repo = make_repo(
        {
            "package.json": "{}\n",
            "compose.yaml": "services:\n  db:\n    image: postgres:16\n"
            "    volumes: ['./data:/d']\n",
        }
    )
    name, why = registry.infer(repo, "HEAD")
    assert name == "node"
    assert "only named volumes" in why
    _commit(repo, {"compose.yaml": "services: [unclosed\n"}, "broken yaml")
    name, why = registry.infer(repo, "HEAD")
    assert name == "node"
    assert "is not valid YAML" in why
    _commit(repo, {"compose.yaml": "services:\n  db:\n    image: postgres:16\n"}, "runnable")
    name, why = registry.infer(repo, "HEAD")
    assert name == "compose"
    assert why == "the failing change touched compose.yaml → compose"
