"""The tags of a CI checkout, on a benchmark's materialized tree.

A corpus case's tree is materialized from a mirror as one new commit (bench_context's
`materialize`): it has no tags, so a build that versions from git (setuptools-scm,
hatch-vcs) would compute `0.1.dev1` where the project's CI, which checks out with its
tags (`fetch-depth: 0`), computes the parent's real version; and setuptools-scm run
without git metadata (patchheal's metadata sandbox) fails unless it is handed a version.
A real job hands patchheal the user's repository, whose tags give that version
(patchheal/harness/setup/scmversion.py). So a case that installs the project gets the
parent's CI version (scmversion's `ci_version` on the mirror, its local part dropped) as
a tag of the tree's commit, and the harness gets the tree as the job's repository: the
harness reads the version from it, and the fresh venv's build backend from the tag.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from patchheal.harness.setup.scmversion import ci_version


def tag_ci_version(case: dict[str, object], git_dir: Path, tree: Path) -> str | None:
    """Tag `tree`'s HEAD with the version CI's checkout of the case's parent gives; the
    version, or None when the mirror's tags give none (the tree is left untagged)."""
    version = ci_version(git_dir, str(case["parent"]))
    if version is None:
        return None
    public = version.partition("+")[0]
    subprocess.run(["git", "tag", public], cwd=tree, check=True, capture_output=True)
    return public
