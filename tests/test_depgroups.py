"""`--group` in a setup line: the group's requirements reach the host's pip, filtered."""

from __future__ import annotations

from pathlib import Path

import pytest

from patchheal.harness.setup.depgroups import group_requirements
from patchheal.harness.setup.hostpip import HostPipArgs

# tox-dev/filelock's shape: `test` listed, `dev` made of includes.
PYPROJECT = """\
[project]
name = "demo"
version = "0"

[dependency-groups]
dev = [{ include-group = "test" }, { include-group = "Type_Check" }]
test = ["pytest>=9.0.3", "pytest-mock>=3.15.1", "exceptiongroup>=1.2; python_version<'3.11'"]
type-check = ["ty>=0.0.30", { include-group = "test" }]
local = ["helper @ file:///tmp/helper", "./tools/x.tar.gz", "requests"]
loop-a = [{ include-group = "loop-b" }]
loop-b = [{ include-group = "loop-a" }]
"""


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    (tmp_path / "pyproject.toml").write_text(PYPROJECT)
    return tmp_path


def test_a_group_and_its_includes_expand_in_order(tree: Path) -> None:
    test = ["pytest>=9.0.3", "pytest-mock>=3.15.1", "exceptiongroup>=1.2; python_version<'3.11'"]
    assert group_requirements(tree, "test") == test
    assert group_requirements(tree, "dev") == [*test, "ty>=0.0.30", *test]
    assert group_requirements(tree, "TYPE.check") == ["ty>=0.0.30", *test]  # names normalized


@pytest.mark.parametrize("spec", ["missing", "loop-a", "../pyproject.toml:test", "nope.toml:test"])
def test_a_missing_or_malformed_group_is_none(tree: Path, spec: str) -> None:
    assert group_requirements(tree, spec) is None


def test_a_pyproject_that_is_a_link_out_of_the_tree_is_not_read(tmp_path: Path) -> None:
    outside = tmp_path / "outside.toml"
    outside.write_text(PYPROJECT)
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "pyproject.toml").symlink_to(outside)
    assert group_requirements(tree, "test") is None


@pytest.mark.parametrize(
    "text",
    [
        "[dependency-groups\n",
        "\udc80",
        'dependency-groups = "x"\n',
        "[dependency-groups]\ntest = [1]\n",
    ],
)
def test_a_broken_pyproject_is_none(tmp_path: Path, text: str) -> None:
    (tmp_path / "pyproject.toml").write_bytes(text.encode("utf-8", "surrogateescape"))
    assert group_requirements(tmp_path, "test") is None


def test_the_host_pip_gets_the_groups_named_requirements_only(tree: Path) -> None:
    with HostPipArgs(tree) as pip:
        args = pip.filter(["-e", ".", "--group", "test", "--group=local", "--group", "missing"])
        assert args == [
            "pytest>=9.0.3",
            "pytest-mock>=3.15.1",
            "exceptiongroup>=1.2; python_version<'3.11'",
            "requests",
        ]
        assert pip.dropped == [
            "-e .",
            "helper @ file:///tmp/helper",
            "./tools/x.tar.gz",
            "--group missing",
        ]
