"""Issue 25's containment probes (../shared/probes/containment/, copied to
tests/data/containment/), each healed end to end against the bundled demo project
with the Docker python harness.

- C2: candidate A leaves a detached process that rewrites `pricing/rules.py`
  with the real fix after every reset; candidate B changes a comment. B must
  not be judged fixed (nor A: its process rewrote a tracked file while it ran).
- H1: the step rewrites the worktree's `.git` to name a host directory holding
  a private key; no run may mount it, and its bytes reach nothing written.
- H3 (from a shell, `H3-results-huge-shell.patch`: the probe's own form, written
  from the test process, is refused earlier by the tripwire): 3 GiB into the
  results directory stops at its cap inside the container; the run is rejected.

(C1 is tested form by form at the wheelhouse, tests/test_host_escape_pipdl.py:
its end-to-end heal needs build requirements from a package index.)
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from patchheal.commands.demo import materialize
from patchheal.memory.store import AttemptStore
from tests.healjobs import state_args

pytestmark = [pytest.mark.docker, pytest.mark.slow]

PROBES = Path(__file__).parent / "data" / "containment"


@pytest.fixture(autouse=True)
def _docker(require_docker: None) -> None:
    """Docker only."""


def heal(tmp_path: Path, probe: str, patches: list[str], edit: dict[str, str] | None = None) -> Any:
    repo, _ = materialize(tmp_path / "work")
    candidates = tmp_path / "candidates"
    candidates.mkdir()
    for name in patches:
        text = (PROBES / name).read_text()
        for old, new in (edit or {}).items():
            text = text.replace(old, new)
        (candidates / name).write_text(text)
    return run_job(tmp_path, probe, repo, candidates), repo


def run_job(
    tmp_path: Path, probe: str, repo: Path, candidates: Path, edit: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """`patchheal heal` of the probe's job spec on `repo` with `candidates` (`edit`: more
    replacements in the spec), its state under `tmp_path`."""
    text = (PROBES / f"{probe}-job.toml").read_text()
    edits = {"REPO_DIR": str(repo), "CANDIDATES_DIR": str(candidates), **(edit or {})}
    for old, new in edits.items():
        text = text.replace(old, new)
    spec = tmp_path / "job.toml"
    spec.write_text(text)
    argv = [sys.executable, "-m", "patchheal", "heal", str(spec), *state_args(tmp_path)]
    return subprocess.run(argv, capture_output=True, text=True, timeout=600, check=False)


def attempts(tmp_path: Path) -> list[Any]:
    with AttemptStore(tmp_path / "store.sqlite3") as store:
        return list(store.attempts())


def test_c2_a_leftover_process_does_not_make_a_later_candidate_fixed(tmp_path: Path) -> None:
    """Invariant: each verification run judges the candidate's tree and nothing else."""
    done, repo = heal(tmp_path, "C2", ["C2-01-A.patch", "C2-02-B.patch"])
    assert done.returncode == 1, done.stdout + done.stderr
    tried = [(a.outcome.value, a.reason) for a in attempts(tmp_path)]
    assert len(tried) == 2, tried
    assert "fixed" not in [outcome for outcome, _ in tried], tried
    branches = subprocess.run(
        ["git", "branch", "--list", "patchheal/*"], cwd=repo, capture_output=True, text=True
    ).stdout
    assert branches.strip() == "", branches


def test_h1_a_rewritten_git_file_mounts_no_host_directory(tmp_path: Path) -> None:
    """Invariant: the `.git` mounts come from patchheal's records; a host directory the step
    names is never mounted, and nothing of it reaches output, store or reports."""
    home = tmp_path / "uid1000-home"
    (home / ".ssh").mkdir(parents=True)
    key = "-----BEGIN PROBE KEY-----ZmFrZS1rZXk=-----END PROBE KEY-----\n"
    (home / ".ssh" / "id_rsa").write_text(key)
    done, _ = heal(tmp_path, "H1", ["H1-gitfile.patch"], {"/tmp/probe/uid1000-home": str(home)})
    assert "VISIBLE [" not in done.stdout + done.stderr  # the probe's "I can see it" line
    decimal = " ".join(str(ord(c)) for c in key[:12])
    for path in [tmp_path / "store.sqlite3", *(tmp_path / "reports").rglob("*"),
                 *(tmp_path / "var").rglob("*")]:  # fmt: skip
        if path.is_file():
            data = path.read_bytes()
            # (the patch itself, which says VISIBLE, is stored: look for the key's bytes)
            assert decimal.encode() not in data, path
            assert b"ZmFrZS1rZXk" not in data, path
    shutil.rmtree(home)
    [attempt] = attempts(tmp_path)
    assert attempt.outcome.value != "fixed", attempt.reason


def test_h3_a_full_results_directory_rejects_the_candidate_and_the_heal_goes_on(
    tmp_path: Path,
) -> None:
    """Invariant: the results directory is capped where it lives (a tmpfs volume of the
    sandbox, 64 MiB). A candidate with the real fix that also writes 3 GiB there from a
    shell is not judged fixed, with the cap as the reason; the next candidate is."""
    repo, _ = materialize(tmp_path / "work")
    candidates = tmp_path / "candidates"
    candidates.mkdir()
    shutil.copy(PROBES / "H3-results-huge-shell.patch", candidates / "01-h3.patch")
    demo = Path(__file__).resolve().parents[1] / "patchheal" / "examples" / "demo"
    shutil.copy(demo / "candidates" / "06-fix_boundary.patch", candidates / "02-fix.patch")
    done = run_job(tmp_path, "H1", repo, candidates, {"max_attempts = 1": "max_attempts = 2"})
    assert done.returncode == 0, done.stdout + done.stderr
    first, second = attempts(tmp_path)
    assert first.outcome.value != "fixed", first.reason
    assert "reached its cap of 67108864 bytes" in first.reason, first.reason
    assert second.outcome.value == "fixed", second.reason


STEP2_FIX = """diff --git a/pricing/extra.py b/pricing/extra.py
--- a/pricing/extra.py
+++ b/pricing/extra.py
@@ -1,2 +1,2 @@
 def double(x):
-    return x * 3
+    return x * 2
"""


def test_a_normal_multi_step_job_still_heals(tmp_path: Path) -> None:
    """The legitimate counterpart: the C1 probe's two-step job with honest fixes heals in
    the Docker harness (sweeps, the tracked-files check and the recorded git mounts in
    place); step 2 starts from step 1's verified tree."""
    repo, _ = materialize(tmp_path / "work")
    (repo / "pricing" / "extra.py").write_text("def double(x):\n    return x * 3\n")
    (repo / "tests" / "test_extra.py").write_text(
        "from pricing.extra import double\n\n\ndef test_double():\n    assert double(2) == 4\n"
    )
    for args in (["add", "-A"], ["commit", "-qm", "a second failing step"]):
        subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)
    candidates = tmp_path / "candidates"
    candidates.mkdir()
    step1 = (PROBES / "C1-pipdl.patch").read_text()
    (candidates / "01-rules.patch").write_text(step1[: step1.index("diff --git a/pyproject.toml")])
    (candidates / "02-extra.patch").write_text(STEP2_FIX)
    edit = {
        'setup = ["pip install -e ."]\n': "",  # its wheelhouse would need an index
        "max_attempts = 1": "max_attempts = 2",
    }
    done = run_job(tmp_path, "C1", repo, candidates, edit)
    assert done.returncode == 0, done.stdout + done.stderr
    assert [a.outcome.value for a in attempts(tmp_path)].count("fixed") == 2
