"""`patchheal gc`: remove what dead runs left behind.

Containers, volumes and networks labelled by patchheal whose owning process is
gone (a `kill -9`, a crash), temporary images of interrupted builds, and job
workspaces under the worktree root that no live run owns. Live runs, cached
images and deliberately kept worktrees are left alone.
"""

from __future__ import annotations

import json
import shutil

import click

from patchheal.harness.engine import dockerapi
from patchheal.runs import DEFAULT_DB_SHOWN, default_db


@click.command()
@click.option("--dry-run", is_flag=True, help="Only print what would be removed.")
@click.option(
    "--db",
    default=default_db,
    show_default=DEFAULT_DB_SHOWN,
    help="Attempt store whose job locks and statuses tell which workspaces are live.",
)
@click.option(
    "--images",
    "prune_images",
    is_flag=True,
    help="Also remove cached dependency images (patchheal-deps/*) that no live run is "
    "using; rebuilt on demand.",
)
@click.option("--json", "as_json", is_flag=True, help="one JSON object per line")
def gc(dry_run: bool, db: str, prune_images: bool, as_json: bool) -> None:
    """Remove orphaned containers, volumes, networks and stale worktrees."""
    from patchheal.harness.engine import leftovers, orphans
    from patchheal.workspace.worktrees import worktree_root

    verb = "would remove" if dry_run else "removed"

    def said(kind: str, name: str, reason: str) -> None:
        if as_json:
            action = "would_remove" if dry_run else "removed"
            row = {"action": action, "kind": kind, "name": name, "reason": reason}
            click.echo(json.dumps(row))
        else:
            click.echo(f"{verb} {kind} {name} ({reason})")

    store = _store_key(db)
    for path, why in leftovers.stale_temp_dirs(store):
        if not dry_run:
            leftovers.remove_temp_dir(path)
        said("temp dir", str(path), why)
    client = None
    if dockerapi.docker_reachable():
        client = dockerapi.engine()
        found = orphans.engine_orphans(client, store)
        if prune_images:
            found += orphans.dependency_images(client)
        for orphan in found:
            if not dry_run and not orphans.remove(client, orphan):
                continue  # an image a run began to use since it was listed
            said(orphan.kind, orphan.name, orphan.reason)
    else:
        click.echo("no Docker engine reachable: containers not checked", err=True)
    root = worktree_root()
    mounted = orphans.live_worktrees(client)
    kept = 0
    for job_dir, reason in orphans.stale_workspaces(root, db=db, mounted=mounted):
        if reason is None:
            kept += 1
            _prune(job_dir, dry_run)
            continue
        if not dry_run:
            # Garbage already: its private repository and worktrees go as one folder.
            shutil.rmtree(job_dir, ignore_errors=True)
        said("workspace", str(job_dir), reason)
    if kept:
        kept_line = f"kept {kept} workspace(s) of live or finished runs under {root}"
        click.echo(kept_line, err=as_json)
    if client is not None:
        client.close()


def _store_key(db: str) -> str | None:
    """The key `db`'s runs label their leftovers with; None when it names no store (then
    only unlabelled leftovers are removed)."""
    from patchheal.errors import BadInput
    from patchheal.memory.db import resolve_db_url
    from patchheal.workspace.worktrees import store_key

    try:
        return store_key(resolve_db_url(db, create=False))
    except (BadInput, ValueError):
        return None


def _prune(job_dir: object, dry_run: bool) -> None:
    """Drop registrations of worktrees whose folder is gone, in a kept workspace."""
    from pathlib import Path

    from patchheal import proc

    private = Path(str(job_dir)) / "repo.git"
    if private.is_dir() and not dry_run:
        proc.git("worktree", "prune", cwd=private, check=False)
