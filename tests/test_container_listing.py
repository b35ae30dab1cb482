"""Listing containers while others come and go, with the real engine.

The SDK's `containers.list` asks the engine for ids, then inspects each one. A sandbox
created with auto-remove that ends between the two is gone by the inspect: `patchheal gc`
once died of that 404 ("No such container") in a full test run, while another test's
runs were ending. The listing is replayed here from a real container the engine really
removed, so the window is hit every time instead of once in a thousand runs.
"""

from __future__ import annotations

import os
from typing import Any

import docker.errors
import pytest
from harness_support import engine, python_def, python_image

from patchheal.harness.engine import dockerapi, leftovers, orphans, ownership

__all__ = ["engine", "python_def", "python_image"]

pytestmark = pytest.mark.docker


@pytest.fixture
def vanished(engine: Any, python_image: str, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """The filter of one labelled container that the engine listed and then removed: every
    later listing returns the engine's own answer from before the removal."""
    job = f"listing-{os.getpid()}"
    labels = {
        ownership.LABEL: "1",
        ownership.LABEL_JOB: job,
        ownership.LABEL_WORKTREE: f"/nonexistent/{job}",
        ownership.LABEL_PID: "1",
        ownership.LABEL_START: "0",  # owner pid 1 with another start time: a dead owner
    }
    flt = {"label": f"{ownership.LABEL_JOB}={job}"}
    container = engine.containers.create(python_image, ["true"], labels=labels)
    stale = engine.api.containers(all=True, filters=flt)
    assert [c["Id"] for c in stale] == [container.id]
    container.remove(force=True)
    real = engine.api.containers

    def listed_before_the_removal(*args: Any, **kwargs: Any) -> Any:
        return stale + real(*args, **kwargs)

    monkeypatch.setattr(engine.api, "containers", listed_before_the_removal)
    return flt


def test_the_sdk_alone_fails_on_a_container_gone_before_its_inspect(
    engine: Any, vanished: dict[str, str]
) -> None:
    """The window is real: without the fix the listing raises (this test proves the others
    can fail)."""
    with pytest.raises(docker.errors.NotFound):
        engine.containers.list(all=True, filters=vanished)


def test_a_container_gone_before_its_inspect_is_left_out(
    engine: Any, vanished: dict[str, str]
) -> None:
    assert dockerapi.list_containers(engine, filters=vanished) == []


def test_gc_and_the_end_of_a_run_go_on_past_a_vanished_container(
    engine: Any, vanished: dict[str, str]
) -> None:
    """Every listing gc and a run's cleanup make: dead owners' containers, live worktrees,
    the dependency images in use. None raises; the vanished container is in none."""
    job = vanished["label"].split("=", 1)[1]
    dead = leftovers.dead_containers(engine, None)
    assert all(c.labels.get(ownership.LABEL_JOB) != job for c, _ in dead)  # type: ignore[attr-defined]
    assert f"/nonexistent/{job}" not in orphans.live_worktrees(engine)
    orphans.dependency_images(engine)  # raises NotFound without the fix
