"""Harness definitions: search path, validation, inference, and which harness a job gets."""

from __future__ import annotations

import typing
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from patchheal.config import build_spec
from patchheal.errors import InfraUnavailable, SpecError
from patchheal.harness import config as hconfig
from patchheal.harness import definitions, registry
from patchheal.harness import tables as htables
from patchheal.harness.local.harness import LocalHarness


def job(repo: Path, harness: str = "auto") -> Any:
    data = {"job": {"id": "j1", "repo": str(repo), "harness": harness},
            "steps": [{"name": "unit", "command": "pytest -q"}]}  # fmt: skip
    return build_spec(data, source="test", base_dir=repo)


def test_bundled_harnesses_are_listed() -> None:
    names = {d.name: d for d in definitions.list_harnesses()}
    assert {"python", "node", "generic", "compose"} <= set(names)
    assert names["compose"].kind == "compose"
    assert all(d.description for d in names.values())


def test_every_definition_model_forbids_extras_and_documents_fields() -> None:
    models = [
        m
        for module in (hconfig, htables)
        for m in vars(module).values()
        if isinstance(m, type) and issubclass(m, BaseModel)
        if m.__module__ == module.__name__ and not m.__name__.startswith("_")
    ]
    assert len(models) >= 5
    for model in models:
        assert model.model_config.get("extra") == "forbid", model
        for name, field in model.model_fields.items():
            assert field.description, f"{model.__name__}.{name} has no description"
    kind = typing.get_args(hconfig.HarnessDef.model_fields["kind"].annotation)
    assert set(kind) == {"docker", "compose"}


def test_unknown_harness_lists_the_known_names(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match=r"unknown harness 'nope'.*local.*python"):
        definitions.load_harness("nope", tmp_path)


def test_repo_harnesses_hide_bundled_ones_and_load_by_path(tmp_path: Path) -> None:
    folder = tmp_path / "harnesses" / "python"
    folder.mkdir(parents=True)
    (folder / "harness.toml").write_text('description = "mine"\n[image]\npackages = ["python3"]\n')
    assert definitions.load_harness("python", tmp_path).description == "mine"
    assert definitions.harness_search_path(tmp_path)[0] == (tmp_path / "harnesses").resolve()
    by_path = definitions.load_harness(str(folder), None)
    assert by_path.name == "python"
    assert by_path.path == folder.resolve()


@pytest.mark.parametrize(
    ("toml", "message"),
    [
        ("[image]\npackages = ['x']\nsurprise = 1\n", "surprise"),
        ("kind = 'compose'\n", "needs a \\[compose\\] table"),
        ("[sandbox]\nuser = 'root'\n", "sandbox.user"),
        ("[sandbox]\nmemory = 'lots'\n", "sandbox.memory"),
        ("[sandbox]\nprocess_memory = 'most'\n", "sandbox.process_memory"),
        ("[image]\ndockerfile = 'Missing'\n", "is not in"),
        ("name = 'Bad Name'\n[image]\npackages = ['x']\n", "name"),
        ("[image\n", "not valid TOML"),
    ],
)
def test_bad_definitions_name_the_file_and_field(tmp_path: Path, toml: str, message: str) -> None:
    folder = tmp_path / "harnesses" / "bad"
    folder.mkdir(parents=True)
    (folder / "harness.toml").write_text(toml)
    with pytest.raises(SpecError, match=message) as info:
        definitions.load_harness("bad", tmp_path)
    assert "harness.toml" in str(info.value)


@pytest.mark.parametrize(
    ("files", "name", "why"),
    [
        ({"pyproject.toml": ""}, "python", "found pyproject.toml → python"),
        ({"setup.cfg": ""}, "python", "found setup.cfg → python"),
        ({"requirements-dev.txt": ""}, "python", "found requirements-dev.txt → python"),
        ({"package.json": "{}"}, "node", "found package.json → node"),
        (
            {"compose.yaml": "services:\n  db:\n    image: postgres:16\n", "pyproject.toml": ""},
            "compose",
            "found compose.yaml → compose",
        ),
        # A compose file the compose harness cannot run (here: no services) says nothing.
        ({"compose.yaml": "", "pyproject.toml": ""}, "python", "compose.yaml passed over"),
        ({"Makefile": ""}, "generic", "→ generic"),
    ],
)
def test_auto_infers_from_the_repository(
    tmp_path: Path, files: dict[str, str], name: str, why: str
) -> None:
    for rel, text in files.items():
        (tmp_path / rel).write_text(text)
    defn, reason = registry.resolve(job(tmp_path), tmp_path)
    assert defn is not None
    assert defn.name == name
    assert why in reason


def test_local_resolves_to_no_definition(tmp_path: Path) -> None:
    defn, reason = registry.resolve(job(tmp_path, "local"), tmp_path)
    assert defn is None
    assert "local" in reason
    harness, said = registry.create(job(tmp_path, "local"), tmp_path)
    assert isinstance(harness, LocalHarness)
    assert said.startswith("local harness")


def test_unreachable_engine_falls_back_to_local_only_for_auto(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A socket path that does not exist: the real client fails to connect.
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")
    (tmp_path / "pyproject.toml").write_text("")
    assert not registry.docker_reachable()
    harness, said = registry.create(job(tmp_path), tmp_path)
    assert isinstance(harness, LocalHarness)
    assert "no Docker engine is reachable" in said
    with pytest.raises(InfraUnavailable, match="names the Docker harness 'python'") as info:
        registry.create(job(tmp_path, "python"), tmp_path)
    assert info.value.exit_code == 3


@pytest.mark.docker
def test_reachable_engine_gives_the_docker_harness(require_docker: None, tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("")
    harness, said = registry.create(job(tmp_path), tmp_path)
    try:
        assert harness.name == "docker:python"
        assert said.startswith("docker:python in Docker: found pyproject.toml → python (")
    finally:
        harness.close()


def test_a_refused_harness_run_leaves_no_workspace(tmp_path: Path) -> None:
    """Regression (issue 27): `harness run` with an unknown harness (or a ref the
    repository lacks) exited 2 and left its harness-run-* workspace under the worktree
    root, where nothing removed it."""
    import os
    import subprocess
    import sys

    from tests.healjobs import make_calc_repo

    repo = make_calc_repo(tmp_path)
    root = tmp_path / "worktrees"
    env = {**os.environ, "PATCHHEAL_WORKTREE_ROOT": str(root)}
    for extra in (["nosuch-harness"], ["local", "--ref", "nosuch-ref"]):
        done = subprocess.run(
            [sys.executable, "-m", "patchheal", "harness", "run", *extra, "--repo", str(repo),
             "--", "true"],
            env=env, capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        assert done.returncode == 2, done.stderr
        assert "Traceback" not in done.stderr
        left = sorted(p.name for p in root.glob("harness-run-*")) if root.is_dir() else []
        assert left == [], (extra, left)


def test_process_memory_is_a_share_of_memory_a_size_or_off() -> None:
    from patchheal.harness.engine.sandbox import process_limits
    from patchheal.harness.tables import SandboxSpec

    def data_limit(**sandbox: str) -> int | None:
        limits = process_limits(SandboxSpec(**sandbox))  # type: ignore[arg-type]
        if not limits:
            return None
        assert limits[0]["Hard"] == -1  # a step may raise its own soft limit
        return int(limits[0]["Soft"])

    assert data_limit(memory="2g") == 2 * 1024**3 * 7 // 8
    assert data_limit(memory="2g", process_memory="1g") == 1024**3
    assert data_limit(memory="512m", process_memory="4g") == 512 * 1024**2  # never above memory
    assert data_limit(memory="2g", process_memory="off") is None
