"""The harness's own collectors, and the folder a step container mounts them from."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    pass


from patchheal.harness.engine.hostdirs import cache_dir, shared_copy


def collectors_source() -> Path:
    """The collectors' folder to mount: the package's own, or a copy any user can read when
    patchheal was installed with a private umask (the step's user is often not its owner)."""
    from patchheal.harness.results.collectors import COLLECTORS

    return shared_copy(COLLECTORS, cache_dir() / "collectors")


COLLECTORS = Path(__file__).resolve().parents[2] / "collectors"
