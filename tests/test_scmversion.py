"""The version a CI checkout gives git-versioned builds, from the user's repository (issue 32, 2a).

Real git repositories: a tag `v1.4.2` and commits after it, a job workspace whose
private repository holds the base at depth 1 without tags, and patchheal's own
commit on top of the base.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from conftest import git

from patchheal.harness.setup import scmversion
from patchheal.workspace.worktrees import JobWorkspace


def _tagged_repo(make_repo: Any, after: int) -> Path:
    repo: Path = make_repo({"README": "0\n", "pyproject.toml": '[project]\nname = "Shapes.Lib"\n'})
    git(repo, "tag", "v1.4.2")
    for n in range(after):
        (repo / "README").write_text(f"{n + 1}\n")
        git(repo, "commit", "-qam", f"change {n + 1}")
    return repo


def test_commits_after_a_tag_give_the_next_dev_release_with_the_node(make_repo: Any) -> None:
    repo = _tagged_repo(make_repo, 3)
    head = git(repo, "rev-parse", "HEAD")
    short = git(repo, "rev-parse", "--short", "HEAD")
    assert scmversion.ci_version(repo, head) == f"1.4.3.dev3+g{short}"


def test_a_tagged_commit_gives_the_tags_version(make_repo: Any) -> None:
    repo = _tagged_repo(make_repo, 0)
    assert scmversion.ci_version(repo, git(repo, "rev-parse", "HEAD")) == "1.4.2"


def test_no_tag_gives_zero_one_dev_with_the_commit_count(make_repo: Any) -> None:
    repo: Path = make_repo({"README": "0\n"})
    (repo / "README").write_text("1\n")
    git(repo, "commit", "-qam", "second")
    short = git(repo, "rev-parse", "--short", "HEAD")
    assert scmversion.ci_version(repo, "HEAD") == f"0.1.dev2+g{short}"


@pytest.mark.parametrize(
    ("tag", "distance", "expected"),
    [
        ("2.0rc1", 2, "2.0rc2.dev2+gabc1234"),
        ("release-3.1", 1, "3.2.dev1+gabc1234"),  # a `name-` prefix; the last number goes up
        ("v1.0.dev0", 5, "1.0.dev5+gabc1234"),  # a dev release is its own next
        ("v1.0.dev4", 5, None),  # setuptools-scm refuses a tag's own dev number: left alone
        ("nightly", 1, None),  # a tag that is no version: the tools are left alone
    ],
)
def test_the_default_scheme_on_other_tags(tag: str, distance: int, expected: str | None) -> None:
    assert scmversion.scm_version(tag, distance, "abc1234") == expected


def test_the_base_is_found_under_patchheals_own_commits(make_repo: Any) -> None:
    repo = _tagged_repo(make_repo, 3)
    base = git(repo, "rev-parse", "HEAD")
    workspace = JobWorkspace(repo, "main", f"scm-{os.getpid()}")
    workspace.open()
    try:
        tree = workspace.worktree("fix")
        # The private repository has no tag: what setuptools-scm saw there was 0.1.dev1.
        assert git(workspace.private, "tag") == ""
        (tree / "README").write_text("fixed\n")
        fix = workspace.commit(tree, "a verified fix")
        assert scmversion.base_commit(repo, tree) == base
        # Published into the user's repository, the fix is still not what CI checked out.
        workspace.publish(fix, "patchheal/fix")
        assert scmversion.base_commit(repo, tree) == base
        # Not a repository at all: no version, no override.
        assert scmversion.ci_version(tree.parent, base) is None
    finally:
        workspace.destroy()


def test_overrides_name_the_projects_distribution_and_its_backends_variables(
    tmp_path: Path,
) -> None:
    tree = tmp_path / "p"
    tree.mkdir()
    (tree / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools>=64", "setuptools-scm>=8"]\n'
        '[project]\nname = "Shapes.Lib"\ndynamic = ["version"]\n'
    )
    # Scoped to the distribution: a dependency built from an sdist keeps its own version.
    assert scmversion.override_env("1.4.3.dev3+gabc", tree) == {
        "SETUPTOOLS_SCM_PRETEND_VERSION_FOR_SHAPES_LIB": "1.4.3.dev3+gabc"
    }
    (tree / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["hatchling", "hatch_vcs"]\n[project]\nname = "humanize"\n'
    )
    # hatch-vcs calls setuptools-scm without the distribution's name: the unscoped one too.
    assert scmversion.override_env("1.0", tree) == {
        "SETUPTOOLS_SCM_PRETEND_VERSION_FOR_HUMANIZE": "1.0",
        "SETUPTOOLS_SCM_PRETEND_VERSION": "1.0",
    }
    (tree / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["pdm-backend"]\n[project]\nname = "x"\n'
    )
    assert scmversion.override_env("1.0", tree)["PDM_BUILD_SCM_VERSION"] == "1.0"
    (tree / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["poetry-core", "poetry-dynamic-versioning>=1"]\n'
        '[tool.poetry]\nname = "y"\n'
    )
    assert scmversion.override_env("1.0", tree)["POETRY_DYNAMIC_VERSIONING_BYPASS"] == "1.0"
    (tree / "pyproject.toml").write_text("not toml [")
    # Nothing says the name: the unscoped variable only.
    assert scmversion.override_env("1.0", tree) == {"SETUPTOOLS_SCM_PRETEND_VERSION": "1.0"}


def test_a_tree_used_as_is_hands_the_metadata_sandbox_its_own_gits_version(
    make_repo: Any,
) -> None:
    # A plain checkout (no job worktree) gets no override from the harness; the sandbox's
    # copy has no `.git`, so setuptools-scm failed there ("unable to detect version": pluggy
    # with setup.cfg metadata, bench_reproduce --corpus generated). It gets what the tree's
    # own git gives, the version its build computes in setup.
    from patchheal.harness.setup.metadata import own_version_env

    repo = _tagged_repo(make_repo, after=0)
    assert own_version_env(repo) == {"SETUPTOOLS_SCM_PRETEND_VERSION_FOR_SHAPES_LIB": "1.4.2"}


def test_a_tree_without_git_metadata_gets_no_version(tmp_path: Path) -> None:
    from patchheal.harness.setup.metadata import own_version_env

    (tmp_path / "pyproject.toml").write_text('[project]\nname = "a"\n')
    assert own_version_env(tmp_path) == {}
