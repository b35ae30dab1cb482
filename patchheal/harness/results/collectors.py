"""The harness's own collectors, and the folder a step container mounts them from."""

from __future__ import annotations

from pathlib import Path

from patchheal.harness.engine.hostdirs import cache_dir, shared_copy

# The package's collectors (a pytest plugin, the audit-hook monitor, the twin).
COLLECTORS = Path(__file__).resolve().parents[2] / "collectors"


def collectors_source() -> Path:
    """The collectors' folder to mount: the package's own, or a copy any user can read when
    patchheal was installed with a private umask (the step's user is often not its owner)."""
    return shared_copy(COLLECTORS, cache_dir() / "collectors")
