"""`patchheal gc` after a real patchheal process is SIGKILLed mid-attempt."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from harness_support import engine, labelled, python_def, python_image, python_project

from patchheal.harness.engine import containers, ownership
from patchheal.workspace.worktrees import worktree_root
from tests.healjobs import workspace_of

__all__ = ["engine", "python_def", "python_image"]

pytestmark = [pytest.mark.docker, pytest.mark.slow]


@pytest.fixture(autouse=True)
def _shared_cache(
    monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory
) -> None:
    monkeypatch.setenv("PATCHHEAL_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "ph-cache"))


def patchheal(*args: str, **kw: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "patchheal", *args],
        capture_output=True,
        text=True,
        timeout=180,
        **kw,
    )


def wait_for_container(client: Any, job_id: str, proc: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 150
    flt = {"label": f"{ownership.LABEL_JOB}={job_id}", "status": "running"}
    while time.monotonic() < deadline:
        running = [
            c
            for c in client.containers.list(filters=flt, ignore_removed=True)
            if c.labels.get(ownership.LABEL_PURPOSE, "").startswith("run")
        ]
        if running:
            return
        if proc.poll() is not None:
            output = proc.stdout.read() if proc.stdout else ""
            pytest.fail(f"patchheal exited early ({proc.returncode}): {output}")
        time.sleep(0.2)
    pytest.fail("the step container never started")


def gone_by_itself(client: Any, job_id: str, within: float = 30.0) -> bool:
    """Whether the run's containers went without gc (their owner's stdin closed)."""
    deadline = time.monotonic() + within
    while labelled(client, job_id)["containers"]:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.5)
    return True


def kill9(proc: subprocess.Popen[str]) -> None:
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)


def test_gc_removes_the_container_and_worktree_of_a_killed_harness_run(
    engine: Any, python_image: str, make_repo: Any
) -> None:
    """Invariant: after kill -9 mid-attempt, no container of that run is left (it goes with
    its owner, see harness/engine/session.py) and gc leaves no worktree of it."""
    repo = python_project(make_repo)
    proc = subprocess.Popen(
        [sys.executable, "-m", "patchheal", "harness", "run", "python", "--repo", str(repo),
         "--", "sh", "-c", "echo started; sleep 120"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    job_id = f"harness-run-{proc.pid}"
    wait_for_container(engine, job_id, proc)
    kill9(proc)
    workspace = worktree_root() / job_id
    assert gone_by_itself(engine, job_id)
    # The kill really left its workspace behind: otherwise this test could not fail.
    assert workspace.is_dir()

    dry = patchheal("gc", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "would remove" in dry.stdout
    assert workspace.is_dir()
    listed = patchheal("gc", "--dry-run", "--json")
    assert listed.returncode == 0, listed.stderr
    rows = [json.loads(line) for line in listed.stdout.splitlines()]  # JSON lines, nothing else
    assert {"action": "would_remove", "kind": "workspace", "name": str(workspace)} in [
        {k: row[k] for k in ("action", "kind", "name")} for row in rows
    ]

    done = patchheal("gc")
    assert done.returncode == 0, done.stderr
    assert labelled(engine, job_id) == {"containers": [], "networks": [], "volumes": []}
    assert not workspace.exists()


def test_gc_cleans_up_after_a_killed_heal(
    engine: Any, python_image: str, make_repo: Any, tmp_path: Path
) -> None:
    repo = python_project(make_repo)
    (tmp_path / "candidates").mkdir()
    (tmp_path / "candidates" / "01-noop.patch").write_text(
        "--- a/tiny.py\n+++ b/tiny.py\n@@ -1,2 +1,2 @@\n def double(x):\n-    return 2 * x\n"
        "+    return x * 2\n"
    )
    spec = tmp_path / "job.toml"
    spec.write_text(
        f'[job]\nid = "gc-heal-{os.getpid()}"\nrepo = "{repo}"\nbase = "main"\n'
        'harness = "python"\n\n[[steps]]\nname = "unit"\n'
        'command = "echo started; sleep 120"\n\n'
        '[proposer]\nkind = "patchfiles"\ndir = "candidates"\n'
    )
    db = tmp_path / "store.sqlite3"
    proc = subprocess.Popen(
        [sys.executable, "-m", "patchheal", "heal", str(spec), "--db", str(db),
         "--reports", str(tmp_path / "reports"), "--state-dir", str(tmp_path / "var")],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    job_id = f"gc-heal-{os.getpid()}"
    wait_for_container(engine, job_id, proc)
    kill9(proc)
    assert gone_by_itself(engine, job_id)
    assert workspace_of(job_id, db).is_dir()

    done = patchheal("gc", "--db", str(db))
    assert done.returncode == 0, done.stderr
    assert labelled(engine, job_id) == {"containers": [], "networks": [], "volumes": []}
    assert not workspace_of(job_id, db).exists()


def test_gc_leaves_a_live_owner_alone(engine: Any, python_image: str) -> None:
    job_id = f"gc-live-{os.getpid()}"
    container = engine.containers.create(
        python_image, ["sleep", "60"], name=ownership.container_name(job_id, "run"),
        labels=ownership.owner_labels(job_id, "run"),
    )  # fmt: skip
    try:
        done = patchheal("gc")
        assert done.returncode == 0, done.stderr
        assert labelled(engine, job_id)["containers"] == [container.name]
    finally:
        containers.teardown(container)
    assert labelled(engine, job_id)["containers"] == []


def test_gc_images_prunes_cached_dependency_images(engine: Any, python_image: str) -> None:
    tag = f"{os.getpid()}gc"
    ref = f"patchheal-deps/gc-test:{tag}"
    # An image of its own (a label makes a new id): a tag on the python image itself would
    # share its id with every container that runs it, and gc rightly spares images in use.
    dockerfile = f"FROM {python_image}\nLABEL patchheal.test={tag}\n".encode()
    engine.images.build(fileobj=io.BytesIO(dockerfile), tag=ref, pull=False, rm=True)
    assert ref in patchheal("gc", "--images", "--dry-run").stdout
    assert engine.images.get(ref)
    done = patchheal("gc", "--images")
    assert done.returncode == 0, done.stderr
    assert ref in done.stdout
    assert not engine.images.list(name="patchheal-deps/gc-test")
    assert engine.images.get(python_image)  # the base image is never pruned


def test_gc_spares_a_dependency_image_a_run_began_to_use_after_the_listing(
    engine: Any, python_image: str
) -> None:
    """Invariant: gc lists a dependency image as unused, then a run pins it (a container made
    from it, as imagepin.py makes the moment a run has its image): the removal that follows
    leaves the image and its tag, where a forced one untagged it under the live run."""
    from patchheal.harness.engine import orphans

    tag = f"{os.getpid()}race"
    ref = f"patchheal-deps/gc-race:{tag}"
    dockerfile = f"FROM {python_image}\nLABEL patchheal.test={tag}\n".encode()
    engine.images.build(fileobj=io.BytesIO(dockerfile), tag=ref, pull=False, rm=True)
    pin = None
    try:
        listed = [o for o in orphans.dependency_images(engine) if o.name == ref]
        assert listed, "unused and unheld: gc's to prune"
        pin = engine.containers.create(ref, command=["true"])
        assert orphans.remove(engine, listed[0]) is False
        assert ref in engine.images.get(ref).tags
        pin.remove(force=True)
        pin = None
        assert orphans.remove(engine, listed[0]) is True  # unused again: removed
        assert not engine.images.list(name="patchheal-deps/gc-race")
    finally:
        if pin is not None:
            pin.remove(force=True)
        containers.remove_image(engine, ref)


def test_gc_removes_a_workspace_whose_run_died_while_deleting_it(require_docker: None) -> None:
    """Invariant: a run killed in the middle of deleting its workspace leaves nothing that
    gc keeps: the deletion starts by renaming the workspace to a trash name."""
    from patchheal.workspace.worktrees import TRASH_PREFIX, worktree_root

    half_deleted = worktree_root() / f"{TRASH_PREFIX}some-job.4242"
    (half_deleted / "wt" / "verify").mkdir(parents=True)
    done = patchheal("gc")
    assert done.returncode == 0, done.stderr
    assert not half_deleted.exists(), done.stdout


# A patchheal process of one store that leaves a temp dir and the labels of its
# containers, then exits (as after a kill): its owner pid is dead.
_LEAVE = (
    "import json, sys; from patchheal.harness.engine import leftovers, ownership; "
    "ownership.set_store(sys.argv[1]); "
    "print(json.dumps([str(leftovers.make_temp_dir('patchheal-sources-')), "
    "ownership.owner_labels(sys.argv[2], 'run')]))"
)


def test_gc_dry_run_lists_only_the_leftovers_of_the_store_it_is_pointed_at(
    engine: Any, python_image: str, tmp_path: Path
) -> None:
    """Two stores in two folders, each with a dead run's container (`docker create` of the
    python harness image) and temp dir labelled by it: `gc --dry-run --db A` lists A's
    and not B's, and removes nothing (issue 27: it offered another store's containers)."""
    from patchheal.memory.store import AttemptStore
    from patchheal.workspace.worktrees import store_key

    env = {**os.environ, "TMPDIR": str(tmp_path / "tmp"), "PATCHHEAL_WORKTREE_ROOT": str(tmp_path)}
    (tmp_path / "tmp").mkdir()
    left: dict[str, tuple[Path, str, str]] = {}  # store -> (db, container, temp dir)
    try:
        for name in ("a", "b"):
            (tmp_path / name).mkdir()
            db = tmp_path / name / "store.sqlite3"
            store = AttemptStore(str(db))
            key = store_key(store.url)
            store.close()
            job_id = f"gc-store-{name}-{os.getpid()}"
            made = subprocess.run(
                [sys.executable, "-c", _LEAVE, key, job_id],
                capture_output=True, text=True, check=True, env=env,
            )  # fmt: skip
            temp_dir, labels = json.loads(made.stdout)
            assert labels[ownership.LABEL_STORE] == key
            flags = [f"--label={k}={v}" for k, v in labels.items()]
            container = ownership.container_name(job_id, "run")
            left[name] = (db, container, temp_dir)
            subprocess.run(
                ["docker", "create", "--name", container, *flags, python_image, "true"],
                capture_output=True, check=True,
            )  # fmt: skip
        for mine, theirs in (("a", "b"), ("b", "a")):
            db, *own = left[mine]
            done = patchheal("gc", "--dry-run", "--json", "--db", str(db), env=env)
            assert done.returncode == 0, done.stderr
            listed = {json.loads(line)["name"] for line in done.stdout.splitlines()}
            assert set(own) <= listed, done.stdout
            assert not set(left[theirs][1:]) & listed, done.stdout
        for _, container, temp_dir in left.values():  # a dry run: everything still there
            assert engine.containers.get(container)
            assert Path(temp_dir).is_dir()
    finally:
        for _, container, _ in left.values():
            subprocess.run(["docker", "rm", "-f", container], capture_output=True)
