"""Checkpoints of a multi-step job: files, the final branch, replay and its checksum failures."""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path

import pytest

from patchheal.errors import ReplayError
from patchheal.loop.checkpoints import load_checkpoints, replay
from patchheal.runs import RunPaths
from patchheal.scrub.scrubber import Scrubber
from patchheal.workspace.diffs import exact_hash
from patchheal.workspace.worktrees import JobWorkspace
from tests.healjobs import (
    STEP_BUG,
    STEP_FIX,
    fixer_proposer,
    git,
    heal_in_process,
    make_multi_repo,
    multi_steps,
    patchheal_cli,
    state_args,
    step_module,
    write_fixer,
    write_spec,
)

JOB = "multi"


def three_step_job(root: Path, **spec: object) -> tuple[Path, Path]:
    repo = make_multi_repo(root, 3)
    fixer = write_fixer(root)
    path = write_spec(
        root / "job.toml",
        repo,
        job_id=JOB,
        steps=multi_steps(3),
        proposer=fixer_proposer(fixer, root / "calls.log"),
        **spec,  # type: ignore[arg-type]
    )
    return repo, path


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def steps_dir(root: Path) -> Path:
    return root / "var" / "runs" / JOB / "steps"


def test_each_verified_step_writes_a_checkpoint_with_checksums(tmp_path: Path) -> None:
    started = time.time()
    _repo, spec = three_step_job(tmp_path)
    result = heal_in_process(tmp_path, spec)
    assert result.exit_code == 0
    fixes = {s.index: s.attempts[-1] for s in result.report.steps}
    for index in (1, 2, 3):
        patch = (steps_dir(tmp_path) / f"step-{index:04d}.patch").read_text()
        meta = json.loads((steps_dir(tmp_path) / f"step-{index:04d}.json").read_text())
        assert meta["step_id"] == f"s{index}"
        assert meta["step_index"] == index
        assert meta["attempt"] == fixes[index].attempt_number
        assert meta["diff_hash"] == exact_hash(patch) == fixes[index].diff_hash
        fixed = step_module(index).replace(STEP_BUG, STEP_FIX)
        assert meta["files"] == {f"bugs/b{index}.py": sha256(fixed)}
        assert started <= meta["finished_at"] <= time.time()
        assert result.report.steps[index - 1].checkpoint_patch == str(
            steps_dir(tmp_path) / f"step-{index:04d}.patch"
        )


def test_final_branch_carries_every_step_one_commit_each(tmp_path: Path) -> None:
    repo, spec = three_step_job(tmp_path)
    heal_in_process(tmp_path, spec)
    branch = f"patchheal/local/{JOB}"
    subjects = git(repo, "log", "--format=%s", f"main..{branch}").splitlines()
    assert subjects == [f"patchheal: heal step {i} (s{i})" for i in (3, 2, 1)]
    for offset, index in enumerate((3, 2, 1)):
        touched = git(repo, "show", "--format=", "--name-only", f"{branch}~{offset}")
        assert touched.splitlines() == [f"bugs/b{index}.py"]
        assert "a + b" in git(repo, "show", f"{branch}:bugs/b{index}.py")
    assert git(repo, "rev-parse", "--abbrev-ref", "HEAD") == "main"
    assert "a - b" in (repo / "bugs" / "b1.py").read_text()


def _replay_fresh(tmp_path: Path, repo: Path) -> str:
    """Replay the recorded checkpoints onto a fresh workspace of the base, as a hard reset does."""
    paths = RunPaths(tmp_path / "var", JOB, Scrubber.from_env(()))
    workspace = JobWorkspace(repo, "main", "replay-check")
    workspace.open()
    try:
        tree = workspace.worktree("verify")
        head = replay(paths, workspace, tree, load_checkpoints(paths))
        assert all("a + b" in (tree / f"bugs/b{i}.py").read_text() for i in (1, 2, 3))
        return head
    finally:
        workspace.destroy()


def test_replay_rebuilds_every_step_from_the_base(tmp_path: Path) -> None:
    repo, spec = three_step_job(tmp_path)
    heal_in_process(tmp_path, spec)
    assert _replay_fresh(tmp_path, repo)


def test_replay_of_a_tampered_patch_fails_loudly(tmp_path: Path) -> None:
    """A checkpoint patch edited after the fact no longer matches its diff hash."""
    repo, spec = three_step_job(tmp_path)
    heal_in_process(tmp_path, spec)
    patch = steps_dir(tmp_path) / "step-0002.patch"
    patch.write_text(patch.read_text().replace("a + b", "a * b"))
    with pytest.raises(
        ReplayError, match=r"step-0002\.patch does not match its recorded diff hash"
    ):
        _replay_fresh(tmp_path, repo)


def test_replay_that_does_not_reproduce_the_checksums_fails_loudly(tmp_path: Path) -> None:
    """Patch and hash agree, but the files it makes are not the ones that were verified."""
    repo, spec = three_step_job(tmp_path)
    heal_in_process(tmp_path, spec)
    patch = steps_dir(tmp_path) / "step-0002.patch"
    tampered = patch.read_text().replace("a + b", "a * b")
    patch.write_text(tampered)
    meta_path = steps_dir(tmp_path) / "step-0002.json"
    meta = json.loads(meta_path.read_text())
    meta_path.write_text(json.dumps({**meta, "diff_hash": exact_hash(tampered)}))
    with pytest.raises(ReplayError, match=r"replay of step 2 \(s2\) did not reproduce bugs/b2\.py"):
        _replay_fresh(tmp_path, repo)


@pytest.mark.slow
def test_resume_over_a_tampered_checkpoint_stops_and_keeps_the_attempt_logs(
    tmp_path: Path,
) -> None:
    """`heal --resume` refuses to build on a checkpoint it cannot reproduce; nothing is lost."""
    _repo, spec = three_step_job(tmp_path)
    first = patchheal_cli("heal", str(spec), *state_args(tmp_path), "--max-proposer-calls", "2")
    assert first.returncode == 1, first.stderr
    attempts = tmp_path / "var" / "runs" / JOB / "attempts"
    logs_before = {p: p.read_bytes() for p in attempts.rglob("*") if p.is_file()}
    assert len(logs_before) == 3 * 2
    meta_path = steps_dir(tmp_path) / "step-0001.json"
    meta = json.loads(meta_path.read_text())
    meta_path.write_text(json.dumps({**meta, "files": {"bugs/b1.py": "0" * 64}}))

    resumed = patchheal_cli("heal", str(spec), *state_args(tmp_path), "--resume")
    assert resumed.returncode == 1
    assert "Traceback" not in resumed.stderr
    assert "replay of step 1 (s1) did not reproduce bugs/b1.py" in resumed.stderr
    assert f"original attempt logs are kept under {tmp_path / 'var' / 'runs' / JOB}" in (
        resumed.stderr.replace("\n", "")
    )
    assert {p: p.read_bytes() for p in attempts.rglob("*") if p.is_file()} == logs_before
    # The checkpoints are left as they were found, for a person to look at.
    assert (steps_dir(tmp_path) / "step-0002.patch").is_file()
    report = json.loads((tmp_path / "reports" / JOB / "report.json").read_text())
    assert report["status"] == "error"
    assert "did not reproduce" in report["stop_reason"]
