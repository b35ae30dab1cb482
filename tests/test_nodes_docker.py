"""The node harness runs a step on the Node the repository asks for (issue 26, item 2)."""

from __future__ import annotations

import os
import time
from typing import Any

import pytest
from harness_support import engine

from patchheal.config import build_spec
from patchheal.harness import registry
from patchheal.harness.docker.harness import DockerHarness
from patchheal.harness.images import build as images
from patchheal.workspace.worktrees import JobWorkspace

__all__ = ["engine"]


@pytest.mark.docker
@pytest.mark.slow
def test_a_repository_whose_nvmrc_says_20_runs_its_tests_on_debian_trixies_node_20(
    engine: Any, make_repo: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """Invariant: the job's Node comes from the repository (`.nvmrc`), through the
    registry a heal uses, to an image built offline from trixie: the step's tests run on
    Node 20 (`node:test` with `describe`, newer than bookworm's 18 by its major), not 18."""
    repo = make_repo(
        {
            ".nvmrc": "lts/iron\n",
            "package.json": '{"name": "n20", "version": "1.0.0", "scripts": '
            '{"test": "node --test"}}\n',
            "sum.js": "exports.sum = (a, b) => a + b;\n",
            "test/sum.test.js": "const { test } = require('node:test');\n"
            "const assert = require('node:assert');\nconst { sum } = require('../sum');\n"
            "test('adds', () => { assert.strictEqual(sum(2, 3), 5); });\n"
            "test('major', () => { assert.strictEqual(process.versions.node.split('.')[0], "
            "'20'); });\n",
        }
    )
    spec = build_spec(
        {
            "job": {"id": "n20", "repo": str(repo), "base": "main", "harness": "auto"},
            "steps": [{"name": "unit", "command": "npm test"}],
        },
        source="test",
        base_dir=repo,
    )
    harness, why = registry.create(spec, repo)
    assert isinstance(harness, DockerHarness), why
    assert "Node 20: .nvmrc names 20" in why
    assert harness.defn.image.suite == "trixie"
    started = time.monotonic()
    images.ensure_image(engine, harness.defn)
    with capsys.disabled():
        print(f"\nnode 20 image: ready in {time.monotonic() - started:.1f} s")
    workspace = JobWorkspace(repo, "main", f"node20-{os.getpid()}")
    workspace.open()
    tree = workspace.worktree("verify")
    try:
        harness.prepare(tree)
        done = harness.run("npm test", tree, timeout=120, idle_timeout=120)
        assert done.exit_code == 0, done.output
        assert "# pass 2" in done.output, done.output
    finally:
        harness.close()
        workspace.destroy()
