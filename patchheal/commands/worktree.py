"""`patchheal worktree list|open|rm`: inspect attempts as real git worktrees."""

from __future__ import annotations

from pathlib import Path

import click

from patchheal.runs import DEFAULT_DB_SHOWN, default_db


@click.group()
def worktree() -> None:
    """List, open (materialize) and remove attempt worktrees."""


@worktree.command("list")
@click.option("--json", "as_json", is_flag=True, help="one JSON object per line")
def list_(as_json: bool) -> None:
    """List the worktrees patchheal holds, per job."""
    import json

    from patchheal.workspace.worktrees import workspace_job, worktree_root

    root = worktree_root()
    found = sorted(p for p in root.glob("*/wt/*") if p.is_dir()) if root.is_dir() else []
    if as_json:
        for path in found:
            job_id, key = workspace_job(path.parent.parent.name)
            row = {"job_id": job_id, "store_key": key, "name": path.name, "path": str(path)}
            click.echo(json.dumps(row))
        return
    if not found:
        click.echo(f"no worktrees under {root}")
        return
    for path in found:
        click.echo(f"{workspace_job(path.parent.parent.name)[0]:<24} {path.name:<20} {path}")


@worktree.command("open")
@click.argument("attempt_id", type=int)
@click.option("--db", default=default_db, show_default=DEFAULT_DB_SHOWN)
@click.option(
    "--state-dir",
    default=None,
    type=click.Path(file_okay=False, path_type=Path),
    help="where the job's checkpoints are (for attempts of step 2 and later) "
    "[default: beside the store]",
)
def open_(attempt_id: int, db: str, state_dir: Path | None) -> None:
    """Materialize ATTEMPT_ID (base, earlier checkpoints, its diff); print its path."""
    from patchheal.errors import BadInput, PatchApplyError
    from patchheal.loop.checkpoints import load_checkpoints
    from patchheal.memory.store import AttemptStore
    from patchheal.runs import RunPaths, state_dir_for
    from patchheal.scrub.scrubber import Scrubber
    from patchheal.workspace.worktrees import JobWorkspace

    store = AttemptStore(db, create=False)
    try:
        record = store.attempt(attempt_id)
        job = store.job(record.job_id)
    finally:
        store.close()
    if job is None:
        raise BadInput(f"attempt {attempt_id} belongs to unknown job {record.job_id!r}")
    # The store keeps the base commit the run resolved, not the moving ref.
    workspace = JobWorkspace(Path(job.repo), job.base, record.job_id, store=store.url)
    workspace.open()
    tree = workspace.worktree(f"attempt-{attempt_id}")
    paths = RunPaths(state_dir_for(db, state_dir), record.job_id, Scrubber())
    for checkpoint in load_checkpoints(paths, before_step=record.step_index):
        workspace.apply(tree, paths.checkpoint_patch(checkpoint.step_index).read_text())
        workspace.commit(tree, f"checkpoint of step {checkpoint.step_index}")
    note = ""
    if record.diff.strip():
        try:
            workspace.apply(tree, record.diff)
        except PatchApplyError as exc:
            note = f" (its diff does not apply, as recorded: {str(exc).splitlines()[0]})"
    click.echo(f"{tree}{note}")


@worktree.command("rm")
@click.argument("job_id")
@click.option("--db", default=default_db, show_default=DEFAULT_DB_SHOWN)
def rm(job_id: str, db: str) -> None:
    """Remove every worktree (and the private repository) of JOB_ID in the store --db."""
    import shutil

    from patchheal.memory.db import resolve_db_url
    from patchheal.workspace.worktrees import workspace_name, worktree_root

    url = resolve_db_url(db, create=False)
    target = worktree_root() / workspace_name(job_id, url)
    if not target.exists():
        click.echo(f"no worktrees for {job_id} of the store {db} under {worktree_root()}")
        return
    shutil.rmtree(target)
    click.echo(f"removed {target}")
