"""Which Node a job runs on: the job's word, the failing CI job's, then the repository's.

The repository files are written in the shapes real projects use: an `.nvmrc`
of `lts/iron` or `v20.11.1`, a `.tool-versions` of asdf, package.json's
`engines.node` ranges (`>= 18.0.0`, `^16 || ^18`, `>=14 <17`) and a CI matrix
of `node-version: [18.x, 20.x]`.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

from patchheal.errors import SpecError
from patchheal.harness.config import HarnessDef
from patchheal.harness.definitions import load_harness
from patchheal.harness.inference import nodes
from patchheal.harness.inference.nodesource import allows, major


@pytest.fixture
def node_def() -> HarnessDef:
    return load_harness("node")


def test_the_bundled_node_harness_offers_bullseye_bookworm_and_trixie(node_def: HarnessDef) -> None:
    assert node_def.nodes == {"12": "bullseye", "18": "bookworm", "20": "trixie"}
    assert nodes.offered(node_def) == ["12", "18", "20"]
    assert node_def.image.suite == "bookworm"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("20", "20"),
        ("v20.11.1", "20"),
        ("18.x", "18"),
        ("lts/iron", "20"),
        ("lts/Hydrogen", "18"),
        ("node-18", "18"),
        ("lts/*", None),
        ("node", None),
        (">=18", None),
        ("", None),
    ],
)
def test_a_node_version_is_read_as_its_major(text: str, expected: str | None) -> None:
    assert major(text) == expected


@pytest.mark.parametrize(
    ("spec", "allowed"),
    [
        (">=18", ["18", "20"]),
        (">= 18.0.0", ["18", "20"]),
        ("^16 || ^18", ["18"]),
        (">=14 <17", []),
        ("18.x || 20.x", ["18", "20"]),
        ("^18.17.0", ["18"]),
        ("not a range ~~", ["12", "18", "20"]),  # says nothing, so allows each
    ],
)
def test_engines_ranges_are_npm_ranges(spec: str, allowed: list[str]) -> None:
    assert [v for v in ("12", "18", "20") if allows(spec, v)] == allowed


def test_an_nvmrc_pins_the_node(make_repo: Any, node_def: HarnessDef) -> None:
    repo = make_repo({".nvmrc": "lts/iron\n", "package.json": '{"engines": {"node": ">=12"}}'})
    defn, why = nodes.choose(node_def, repo, "main", None)
    assert defn.image.suite == "trixie"
    assert why == "Node 20: .nvmrc names 20"


def test_the_failing_ci_jobs_node_outranks_the_repository(
    make_repo: Any, node_def: HarnessDef
) -> None:
    repo = make_repo({".node-version": "20\n"})
    defn, why = nodes.choose(node_def, repo, "main", None, "12")
    assert defn.image.suite == "bullseye", why
    assert why == "Node 12: the failing CI job's setup-node names 12"


def test_a_ci_matrix_naming_the_default_keeps_it(make_repo: Any, node_def: HarnessDef) -> None:
    workflow = (
        "jobs:\n  test:\n    strategy:\n      matrix:\n        node-version: [18.x, 20.x]\n"
        "    steps:\n      - uses: actions/setup-node@v4\n"
        "        with:\n          node-version: ${{ matrix.node-version }}\n"
    )
    repo = make_repo({".github/workflows/ci.yml": workflow})
    defn, why = nodes.choose(node_def, repo, "main", None)
    assert defn is node_def, why
    assert "names 18, 20 (the harness's default among them)" in why


def test_engines_keep_the_default_or_take_the_newest_they_allow(
    make_repo: Any, node_def: HarnessDef
) -> None:
    keeps = make_repo({"package.json": json.dumps({"engines": {"node": ">= 16"}})})
    assert nodes.choose(node_def, keeps, "main", None)[0] is node_def
    newest = make_repo({"package.json": json.dumps({"engines": {"node": ">=19"}})})
    defn, why = nodes.choose(node_def, newest, "main", None)
    assert defn.image.suite == "trixie", why


def test_a_node_not_offered_is_refused_naming_the_nearest(
    make_repo: Any, node_def: HarnessDef
) -> None:
    """Invariant: never a silent substitute."""
    repo = make_repo({".nvmrc": "v16.20.2\n"})
    with pytest.raises(SpecError) as raised:
        nodes.choose(node_def, repo, "main", None)
    message = str(raised.value)
    assert "Node 16" in message
    assert "offered: 12, 18, 20" in message
    assert 'the nearest is 18: set node = "18" in [job]' in message
    engines = make_repo({"package.json": json.dumps({"engines": {"node": ">=14 <17"}})})
    with pytest.raises(SpecError, match=r"allows none of 12, 18, 20.*nearest is"):
        nodes.choose(node_def, engines, "main", None)


def test_the_job_may_name_only_an_offered_node(make_repo: Any, node_def: HarnessDef) -> None:
    repo = make_repo({"a.js": ""})
    defn, why = nodes.choose(node_def, repo, "main", "20")
    assert defn.image.suite == "trixie"
    assert why == "Node 20: the job names node = '20'"
    with pytest.raises(SpecError, match="not a version like '20'"):
        nodes.choose(node_def, repo, "main", "latest")
    with pytest.raises(SpecError, match="offers one Node only"):
        nodes.choose(load_harness("python"), repo, "main", "20")


def test_the_repository_is_read_at_the_base_commit(make_repo: Any, node_def: HarnessDef) -> None:
    repo = make_repo({".tool-versions": "nodejs 20.11.1\npython 3.11.7\n"})
    subprocess.run(["git", "-C", str(repo), "rm", "-q", ".tool-versions"], check=True)
    subprocess.run(["git", "-C", str(repo), "commit", "-qm", "no pin"], check=True)
    assert nodes.choose(node_def, repo, "main~1", None)[0].image.suite == "trixie"
    defn, why = nodes.choose(node_def, repo, "main", None)
    assert defn is node_def
    assert why == "Node 18: nothing in the repository names a Node; the harness's default"


def test_harness_explain_says_which_node_and_why(make_repo: Any) -> None:
    repo = make_repo({"package.json": json.dumps({"volta": {"node": "20.11.1"}})})
    done = subprocess.run(
        [sys.executable, "-m", "patchheal", "harness", "explain", "--repo", str(repo), "--json"],
        capture_output=True,
        text=True,
        check=True,
    )
    choice = json.loads(done.stdout)
    assert choice["harness"] == "node", choice
    assert choice["node"] == "Node 20: package.json's volta.node names 20"
    assert choice["nodes"] == ["12", "18", "20"]


@pytest.mark.parametrize("flag", ["--node", "--python"])
def test_harness_build_refuses_a_version_it_cannot_read_with_a_clear_error(flag: str) -> None:
    """Bad input: exit 2 and one line, not a crash log."""
    harness = "node" if flag == "--node" else "python"
    done = subprocess.run(
        [sys.executable, "-m", "patchheal", "harness", "build", harness, flag, "abc"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"{flag} 'abc' is not a version like" in done.stderr, done.stderr
    assert "unexpected error" not in done.stderr
