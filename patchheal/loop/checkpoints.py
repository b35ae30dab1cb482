"""Checkpoints: each verified step's patch plus the checksums that prove a replay.

A checkpoint is written when a step is fixed (`steps/step-NNNN.patch` and
`.json`). A hard reset, `--resume` and `--from-step` rebuild the workspace by
replaying checkpoints onto a fresh worktree of the base ref; a replay whose
files do not match the recorded checksums fails loudly.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from patchheal.errors import PatchApplyError, ReplayError
from patchheal.models import AttemptRecord
from patchheal.runs import RunPaths
from patchheal.telemetry.events import EventLog
from patchheal.workspace.diffs import exact_hash, touched_files
from patchheal.workspace.worktrees import JobWorkspace, file_checksums


class Checkpoint(BaseModel):
    """The metadata of one verified step (`step-NNNN.json`)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    step_id: str
    step_index: int
    attempt: int
    attempt_id: int | None = None
    diff_hash: str
    files: dict[str, str | None]
    finished_at: float
    commit: str = ""
    message: str = ""
    """The step's commit message, so a replayed branch reads like the original one."""


def write_checkpoint(
    paths: RunPaths,
    *,
    step_id: str,
    step_index: int,
    attempt: int,
    attempt_id: int | None,
    diff: str,
    worktree: Path,
    commit: str,
    message: str = "",
) -> Checkpoint:
    """Record a verified step; the patch is written before its metadata."""
    checkpoint = Checkpoint(
        step_id=step_id,
        step_index=step_index,
        attempt=attempt,
        attempt_id=attempt_id,
        diff_hash=exact_hash(diff),
        files=file_checksums(worktree, touched_files(diff)),
        finished_at=time.time(),
        commit=commit,
        message=message,
    )
    paths.write_text(paths.checkpoint_patch(step_index), diff)
    paths.write_json(paths.checkpoint_meta(step_index), checkpoint.model_dump(mode="json"))
    return checkpoint


def checkpoint_step(
    paths: RunPaths,
    events: EventLog,
    workspace: JobWorkspace,
    tree: Path,
    *,
    start_commit: str,
    step_id: str,
    step_index: int,
    fix: AttemptRecord,
    failure_class: str | None,
) -> str:
    """Commit a verified fix on the step's starting point and write its checkpoint.

    Returns the commit the next step starts from. Each event is written
    before the state change it announces.
    """
    workspace.reset(tree, to=start_commit)
    workspace.apply(tree, fix.diff)
    message = (
        f"patchheal: heal step {step_index} ({step_id})\n\n"
        f"strategy: {fix.strategy}\nfingerprint: {fix.fingerprint}\n{fix.rationale}"
    ).rstrip()
    commit = workspace.commit(tree, message)
    where = {"step_id": step_id, "step_index": step_index, "attempt": fix.attempt_number}
    events.emit("step.checkpointed", diff_hash=fix.diff_hash, strategy=fix.strategy, **where)
    write_checkpoint(
        paths,
        attempt_id=None,
        diff=fix.diff,
        worktree=tree,
        commit=commit,
        message=message,
        step_id=step_id,
        step_index=step_index,
        attempt=fix.attempt_number,
    )
    events.emit(
        "self_heal.recovered",
        fingerprint=fix.fingerprint,
        diff_hash=fix.diff_hash,
        strategy=fix.strategy,
        failure_class=failure_class,
        **where,
    )
    return commit


def load_checkpoints(paths: RunPaths, *, before_step: int | None = None) -> list[Checkpoint]:
    """Checkpoints in step order, contiguous from step 1; stops at the first gap."""
    found: list[Checkpoint] = []
    index = 1
    while before_step is None or index < before_step:
        meta = paths.checkpoint_meta(index)
        if not meta.is_file() or not paths.checkpoint_patch(index).is_file():
            break
        try:
            found.append(Checkpoint.model_validate(json.loads(meta.read_text(encoding="utf-8"))))
        except (ValueError, OSError) as exc:
            raise ReplayError(f"checkpoint {meta} is unreadable: {exc}") from exc
        index += 1
    return found


def discard_checkpoints(paths: RunPaths, *, from_step: int) -> None:
    """Remove checkpoints of `from_step` and later (for `--from-step`)."""
    index = from_step
    while paths.checkpoint_meta(index).exists() or paths.checkpoint_patch(index).exists():
        paths.checkpoint_meta(index).unlink(missing_ok=True)
        paths.checkpoint_patch(index).unlink(missing_ok=True)
        index += 1


def replay(
    paths: RunPaths,
    workspace: JobWorkspace,
    worktree: Path,
    checkpoints: list[Checkpoint],
    *,
    should_stop: Callable[[], bool] = lambda: False,
) -> str:
    """Rebuild the step-start commit: base + each checkpoint, verified by checksum.

    Returns the commit the next step starts from. `should_stop` is polled
    before each checkpoint (a pause blocks inside it), so a cancel leaves no
    checkpoint half-applied; after a stop the head is partial and the caller
    must not build on it.
    """
    workspace.reset(worktree, to=workspace.base_commit)
    head = workspace.base_commit
    for checkpoint in checkpoints:
        if should_stop():
            break
        patch_path = paths.checkpoint_patch(checkpoint.step_index)
        diff = patch_path.read_text(encoding="utf-8")
        if exact_hash(diff) != checkpoint.diff_hash:
            raise ReplayError(
                f"checkpoint {patch_path} does not match its recorded diff hash "
                f"{checkpoint.diff_hash[:12]}; the original attempt logs are kept under "
                f"{paths.root}"
            )
        try:
            workspace.apply(worktree, diff)
        except PatchApplyError as exc:
            raise ReplayError(f"checkpoint {patch_path} no longer applies: {exc}") from exc
        actual = file_checksums(worktree, checkpoint.files)
        mismatched = sorted(f for f, digest in checkpoint.files.items() if actual.get(f) != digest)
        if mismatched:
            raise ReplayError(
                f"replay of step {checkpoint.step_index} ({checkpoint.step_id}) did not reproduce "
                f"{', '.join(mismatched)}; the original attempt logs are kept under {paths.root}"
            )
        head = workspace.commit(
            worktree,
            checkpoint.message
            or f"patchheal: step {checkpoint.step_index} ({checkpoint.step_id}) checkpoint",
        )
    return head
