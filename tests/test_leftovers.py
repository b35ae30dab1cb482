"""Temp dirs and containers of killed runs are removed at the end of a run and by `gc`,
each store only its own (issue 25, item 7)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

from patchheal.harness.engine import leftovers, ownership
from patchheal.workspace.worktrees import store_key

MAKE_DIR = (
    "import sys; from patchheal.harness.engine import leftovers, ownership; "
    "ownership.set_store(sys.argv[1] or None); "
    "print(leftovers.make_temp_dir(sys.argv[2]))"
)


@pytest.fixture
def tmpdir_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A temp root of this test's own (TMPDIR), so only its own dirs are looked at."""
    root = tmp_path / "tmp"
    root.mkdir()
    monkeypatch.setenv("TMPDIR", str(root))
    monkeypatch.setattr(tempfile, "tempdir", None)
    return root


def _dir_of_a_process_that_died(store: str, prefix: str) -> Path:
    """A temp dir made by a real patchheal process that then exited (as after a kill)."""
    done = subprocess.run(
        [sys.executable, "-c", MAKE_DIR, store, prefix],
        capture_output=True,
        text=True,
        check=True,
        env=os.environ.copy(),
    )
    return Path(done.stdout.strip())


def test_temp_dirs_of_dead_owners_of_this_store_are_removed_after_a_run(
    tmpdir_root: Path,
) -> None:
    """`patchheal-session-*` / `patchheal-sources-*` dirs of a killed run of this store go at
    the end of the next run; a live owner's, another store's, no store's and unmarked dirs
    stay."""
    mine, theirs = store_key("sqlite:///a.sqlite3"), store_key("sqlite:///b.sqlite3")
    dead_session = _dir_of_a_process_that_died(mine, "patchheal-session-")
    dead_sources = _dir_of_a_process_that_died(mine, "patchheal-sources-")
    other_store = _dir_of_a_process_that_died(theirs, "patchheal-session-")
    no_store = _dir_of_a_process_that_died("", "patchheal-session-")
    ownership.set_store(mine)
    try:
        live = leftovers.make_temp_dir("patchheal-results-")
    finally:
        ownership.set_store(None)
    unmarked = tmpdir_root / "patchheal-session-old"
    unmarked.mkdir()
    assert {p for p, _ in leftovers.stale_temp_dirs(mine)} == {
        dead_session,
        dead_sources,
        no_store,
    }
    leftovers.after_run(mine, None)
    assert no_store.exists()  # no store's: left to gc, which a person runs
    assert not dead_session.exists()
    assert not dead_sources.exists()
    assert other_store.exists()
    assert live.exists()
    assert unmarked.exists()


def test_gc_removes_its_own_stores_dead_temp_dirs_only(tmpdir_root: Path, tmp_path: Path) -> None:
    """`gc --db` after a kill: the store's dead temp dirs are removed, another store's kept."""
    db = tmp_path / "store.sqlite3"
    from patchheal.memory.store import AttemptStore

    store = AttemptStore(str(db))
    key = store_key(store.url)
    store.close()
    dead = _dir_of_a_process_that_died(key, "patchheal-sources-")
    other = _dir_of_a_process_that_died(store_key("sqlite:///elsewhere"), "patchheal-sources-")
    env = {**os.environ, "DOCKER_HOST": f"unix://{tmp_path}/no-engine.sock"}
    done = subprocess.run(
        [sys.executable, "-m", "patchheal", "gc", "--db", str(db), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    rows = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert {"action": "removed", "kind": "temp dir", "name": str(dead)} in [
        {k: r[k] for k in ("action", "kind", "name")} for r in rows
    ], done.stdout + done.stderr
    assert not dead.exists()
    assert other.exists()


@pytest.mark.docker
def test_dead_containers_are_judged_by_store(require_docker: None) -> None:
    """An Exited setup container of a dead owner is this store's to remove only when it
    carries this store's label (or none); another store's is left to that store's gc."""
    import docker

    client = docker.from_env()
    image = next(i for i in client.images.list() if i.tags).tags[0]
    dead_pid = str(_a_dead_pid())
    made: list[Any] = []
    try:
        for name, store in (("mine", "aaaa"), ("theirs", "bbbb")):
            labels = {
                ownership.LABEL: "1",
                ownership.LABEL_JOB: f"leftovers-{name}",
                ownership.LABEL_PID: dead_pid,
                ownership.LABEL_START: "",
                ownership.LABEL_STORE: store,
            }
            made.append(
                client.containers.create(
                    image,
                    command=["true"],
                    labels=labels,
                    name=f"ph-test-leftovers-{name}-{os.getpid()}",
                )
            )
        judged = {getattr(c, "name", "") for c, _ in leftovers.dead_containers(client, "aaaa")}
        assert made[0].name in judged
        assert made[1].name not in judged
    finally:
        for container in made:
            container.remove(force=True)
        client.close()


def _a_dead_pid() -> int:
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid
