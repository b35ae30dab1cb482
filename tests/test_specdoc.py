"""docs/job-spec.md is generated from the spec models, and [tool.patchheal] takes what it says."""

from __future__ import annotations

from pathlib import Path

import pytest

from patchheal.config import build_spec
from patchheal.errors import SpecError
from patchheal.intake import specdoc

DOC = Path(__file__).resolve().parents[1] / "docs" / "job-spec.md"


def test_the_reference_is_what_the_models_render() -> None:
    """Regenerate with `python -m patchheal.intake.specdoc > docs/job-spec.md`."""
    assert DOC.read_text(encoding="utf-8") == specdoc.render()


@pytest.mark.parametrize(("title", "model"), specdoc.SECTIONS)
def test_every_key_of_every_table_is_documented(title: str, model: type) -> None:
    text = specdoc.render()
    section = text.split(f"## `{title}`", 1)[1].split("\n## ", 1)[0]
    for name in model.model_fields:
        if name != "kind":
            assert f"| `{name}` |" in section, f"{title}: {name} is not documented"


def _repo_with_pyproject(tmp_path: Path, section: str) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "pyproject.toml").write_text(f"[project]\nname = 'x'\n\n{section}\n")
    return repo


def _spec_for(repo: Path) -> dict[str, object]:
    return {"job": {"id": "j", "repo": str(repo)}, "steps": [{"name": "s", "command": "true"}]}


def test_the_documented_tool_patchheal_example_is_accepted(tmp_path: Path) -> None:
    example = specdoc.FOOTER.split("```toml\n", 1)[1].split("```", 1)[0]
    repo = _repo_with_pyproject(tmp_path, example)
    spec = build_spec(_spec_for(repo), source="(command line)", base_dir=tmp_path)
    assert spec.budget.max_attempts == 5
    assert spec.policy.extra_protected_paths == ("migrations/**",)
    assert spec.regression.command == "pytest -q"


def test_the_job_spec_still_wins_over_tool_patchheal(tmp_path: Path) -> None:
    repo = _repo_with_pyproject(tmp_path, "[tool.patchheal]\nmax_attempts = 5\n")
    data = {**_spec_for(repo), "budget": {"max_attempts": 2}}
    assert build_spec(data, source="job.toml", base_dir=tmp_path).budget.max_attempts == 2


@pytest.mark.parametrize(
    ("section", "complaint"),
    [
        ("[tool.patchheal]\nmax_atempts = 5\n", "unknown key 'max_atempts'"),
        ("[tool.patchheal]\nmax_attempts = 0\n", "max_attempts"),
        ("[tool.patchheal]\nbudget = 3\n", "[budget] must be a table"),
    ],
)
def test_a_mistake_in_tool_patchheal_names_the_pyproject(
    tmp_path: Path, section: str, complaint: str
) -> None:
    """Regression: flat keys under [tool.patchheal] failed with a message blaming
    `(command line)` for a mistake made in pyproject.toml."""
    repo = _repo_with_pyproject(tmp_path, section)
    with pytest.raises(SpecError) as caught:
        build_spec(_spec_for(repo), source="(command line)", base_dir=tmp_path)
    assert str(repo / "pyproject.toml") in str(caught.value)
    assert complaint in str(caught.value)


@pytest.mark.parametrize("bad", ["a..b", "-x", "fix/.hidden", "x.lock", "has space", "a//b", "x/"])
def test_job_branch_takes_only_a_usable_branch_name(tmp_path: Path, bad: str) -> None:
    """`[job] branch` (issue 34) names where a verified patch is published; a name git
    would refuse is refused when the spec loads, naming the key."""
    data = _spec_for(tmp_path)
    data["job"]["branch"] = bad  # type: ignore[index]
    with pytest.raises(SpecError, match=r"job\.branch"):
        build_spec(data, source="job.toml", base_dir=tmp_path)
    data["job"]["branch"] = "review/pricing-1.2"  # type: ignore[index]
    assert build_spec(data, source="job.toml", base_dir=tmp_path).job.branch == "review/pricing-1.2"
