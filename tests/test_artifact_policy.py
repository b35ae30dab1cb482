"""The policy gate refuses artifacts in a candidate: binaries, bytecode, build outputs
(issue 33 item 5), unless the job allows the path; hostile and legitimate cases, on
diffs made by real git."""

from __future__ import annotations

from pathlib import Path

import pytest

from patchheal.config import PolicySpec
from patchheal.gates.policy import check_candidate
from tests.artifact_patches import pycache_name, staged_binary_diff, unchecked_pyc

SOURCE = "def total(xs):\n    return sum(xs) + 1\n"
FIXED = "def total(xs):\n    return sum(xs)\n"
PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256))


@pytest.fixture
def repo(make_repo) -> Path:
    return make_repo({"app/core.py": SOURCE, "tests/test_app.py": "def test_x():\n    pass\n"})


def test_the_probes_unchecked_hash_pyc_is_refused_in_one_sentence(repo: Path, tmp_path) -> None:
    pyc = unchecked_pyc(FIXED, tmp_path / "build", "core")
    diff = staged_binary_diff(repo, {pycache_name("app/core"): pyc})
    assert "GIT binary patch" in diff
    decision = check_candidate(diff, PolicySpec())
    assert not decision.allowed
    assert decision.rule == "artifact"
    [reason] = decision.reasons
    assert reason.startswith(f"{pycache_name('app/core')} is a file under __pycache__/: ")
    assert "allow_artifacts" in reason
    assert reason.count(". ") == 0


@pytest.mark.parametrize(
    ("path", "what"),
    [
        ("app/core.pyc", "compiled Python bytecode"),
        ("app/core.pyo", "compiled Python bytecode"),
        ("app/_speedups.cpython-311-x86_64-linux-gnu.so", "a shared library"),
        ("lib/libfast.so.1", "a shared library"),
        ("app/_fast.pyd", "a shared library"),
        ("bin/helper.dll", "a shared library"),
        ("lib/libx.dylib", "a shared library"),
        ("build/core.o", "a native object file or archive"),
        ("build/libcore.a", "a native object file or archive"),
        ("java/Main.class", "compiled Java"),
        ("vendor/dep.jar", "compiled Java"),
        ("vendor/dep-1.0-py3-none-any.whl", "a built Python package"),
        ("vendor/dep-1.0.egg", "a built Python package"),
        ("assets/logo.png", "a binary file (a git binary patch)"),
    ],
)
def test_build_outputs_and_binaries_are_refused(repo: Path, path: str, what: str) -> None:
    diff = staged_binary_diff(repo, {path: PNG})
    decision = check_candidate(diff, PolicySpec())
    assert decision.rule == "artifact", decision
    assert f"{path} is {what}:" in decision.reasons[0]


def test_a_text_file_with_nul_bytes_is_refused(repo: Path) -> None:
    diff = "--- /dev/null\n+++ b/app/blob.txt\n@@ -0,0 +1,1 @@\n+payload\0\0here\n"
    decision = check_candidate(diff, PolicySpec())
    assert decision.rule == "artifact"
    assert "NUL bytes" in decision.reasons[0]


def test_a_text_build_output_name_is_refused_even_as_text(repo: Path) -> None:
    """A `.pyc` path is refused by its name, whatever git made of its bytes."""
    diff = "--- /dev/null\n+++ b/pricing/__pycache__/rules.cpython-311.pyc\n@@ -0,0 +1 @@\n+x\n"
    assert check_candidate(diff, PolicySpec()).rule == "artifact"


def test_a_pth_file_is_refused_even_in_a_virtual_environment_of_the_worktree(
    repo: Path,
) -> None:
    """A `.pth` runs its import lines when an interpreter reading its directory starts, before
    the tripwire is armed: a step that uses a virtual environment kept in the worktree would
    run it first and unseen."""
    path = ".venv/lib/python3.11/site-packages/_speedup.pth"
    diff = f"--- /dev/null\n+++ b/{path}\n@@ -0,0 +1 @@\n+import calc_hooks\n"
    decision = check_candidate(diff, PolicySpec())
    assert decision.rule == "artifact", decision
    assert f"{path} is a Python path-configuration file" in decision.reasons[0]


@pytest.mark.parametrize(
    "path", ["calc.egg-info/entry_points.txt", "src/calc-1.0.dist-info/entry_points.txt"]
)
def test_package_metadata_is_refused(repo: Path, path: str) -> None:
    """Under `python -m pytest` the worktree is on sys.path, so pytest loads the module this
    entry point names as a plugin (tests/verdict_battery.py, "package metadata ...")."""
    diff = f"--- /dev/null\n+++ b/{path}\n@@ -0,0 +1,2 @@\n+[pytest11]\n+calc = app.core\n"
    decision = check_candidate(diff, PolicySpec())
    assert decision.rule == "artifact", decision
    assert f"{path} is package metadata (its entry points load plugins" in decision.reasons[0]


def test_a_fix_that_also_carries_a_pyc_is_refused(repo: Path, tmp_path) -> None:
    pyc = unchecked_pyc(FIXED, tmp_path / "build", "core")
    diff = staged_binary_diff(repo, {"app/core.py": FIXED.encode(), "app/core.pyc": pyc})
    decision = check_candidate(diff, PolicySpec())
    assert decision.rule == "artifact"
    assert len(decision.reasons) == 1
    assert decision.reasons[0].startswith("app/core.pyc ")


# -- legitimate: what stays allowed --


def test_a_source_fix_and_a_text_fixture_are_allowed(repo: Path) -> None:
    diff = staged_binary_diff(
        repo,
        {"app/core.py": FIXED.encode(), "tests/data/orders.csv": b"sku,qty\nA-1,10\n"},
    )
    assert check_candidate(diff, PolicySpec()).allowed


def test_a_png_the_job_allows_by_path_is_allowed(repo: Path) -> None:
    diff = staged_binary_diff(repo, {"assets/logo.png": PNG, "app/core.py": FIXED.encode()})
    policy = PolicySpec(allow_artifacts=("assets/*.png",))
    assert check_candidate(diff, policy).allowed
    # ...and only that path: the same bytes elsewhere are still refused.
    elsewhere = staged_binary_diff(repo, {"docs/logo.png": PNG})
    assert check_candidate(elsewhere, policy).rule == "artifact"


def test_deleting_a_stray_committed_pyc_is_allowed(make_repo, tmp_path) -> None:
    repo = make_repo({"app/core.py": SOURCE})
    (repo / "app" / "core.pyc").write_bytes(unchecked_pyc(SOURCE, tmp_path / "b", "core"))
    from tests.artifact_patches import git

    git(repo, "add", "-f", "app/core.pyc")
    git(repo, "commit", "-qm", "a stray pyc")
    diff = staged_binary_diff(repo, {"app/core.pyc": None, "app/core.py": FIXED.encode()})
    assert "deleted file mode" in diff
    assert check_candidate(diff, PolicySpec()).allowed


def test_allow_artifacts_globs_are_checked_when_the_spec_loads() -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="allow_artifacts"):
        PolicySpec(allow_artifacts=("[",))
