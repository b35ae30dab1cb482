"""The harness's own collectors, and the folder a step container mounts them from."""

from __future__ import annotations

import contextlib
import importlib.util
import py_compile
import stat
import sys
from pathlib import Path

from patchheal.harness.engine.hostdirs import cache_dir, shared_copy

# The package's collectors (a pytest plugin, the audit-hook monitor, the twin).
COLLECTORS = Path(__file__).resolve().parents[2] / "collectors"
# What the monitor runs from private copies (patchheal_monitor.install), compiling them in
# every process of a step unless a checked-hash pyc of this Python is beside them.
PRIVATE_MODULES = (
    "patchheal_runnerwatch.py",
    "patchheal_pluginwatch.py",
    "patchheal_watch.py",
    "patchheal_twin_kept.py",
    "patchheal_twin_plan.py",
)


def collectors_source() -> Path:
    """The collectors' folder to mount: the package's own, or a copy any user can read when
    patchheal was installed with a private umask (the step's user is often not its owner)."""
    return precompiled(shared_copy(COLLECTORS, cache_dir() / "collectors"))


def precompiled(folder: Path) -> Path:
    """`folder`, with a checked-hash pyc of each of the monitor's private modules for this
    Python beside it (`cached_code`): a step on the same Python version (the local harness;
    the Debian image of the Python harness) starts its monitor without compiling it, some
    17 ms of every process. Best effort: a folder patchheal cannot write is left as it is."""
    for name in PRIVATE_MODULES:
        source = folder / name
        target = cached_code(source)
        with contextlib.suppress(OSError, py_compile.PyCompileError):
            if not _matches(target, source.read_bytes()):
                py_compile.compile(
                    str(source),
                    cfile=str(target),
                    doraise=True,
                    invalidation_mode=py_compile.PycInvalidationMode.CHECKED_HASH,
                )
                # As readable as the folder: a private umask must not make a folder any
                # user could read (and so mount as it is, shared_copy) one they cannot.
                if stat.S_IMODE(folder.stat().st_mode) & 0o005 == 0o005:
                    target.chmod(stat.S_IMODE(target.stat().st_mode) | 0o444)
    return folder


def cached_code(source: Path) -> Path:
    """Where the monitor looks for `source`'s bytecode (patchheal_monitor.py `_cached`): in
    the collectors' folder itself, which the hook guards, not in a `__pycache__` under it,
    which it does not (a step that wrote one there would run its code in the next run's
    monitor). No import finds it: its name is no module's."""
    return source.with_name(f"{source.stem}.{sys.implementation.cache_tag}.pyc")


def _matches(pyc: Path, source: bytes) -> bool:
    """Whether `pyc` is a checked-hash pyc of this Python compiled from `source`."""
    try:
        with pyc.open("rb") as handle:
            header = handle.read(16)  # the header only: each run asks
    except OSError:
        return False
    flags = int.from_bytes(header[4:8], "little")
    return (
        header[:4] == importlib.util.MAGIC_NUMBER
        and flags == 0b11
        and header[8:16] == importlib.util.source_hash(source)
    )
