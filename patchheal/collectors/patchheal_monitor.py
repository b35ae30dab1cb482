"""patchheal's tripwire inside the step: a PEP 578 audit hook, the first code in the process.

`sitecustomize` calls `install()` before anything else of the step runs (a
`python -S` step gets it when a collector is imported). `install` takes the
signing token out of the environment (and wipes it from the process's
original environment block, which `/proc/self/environ` shows), then adds an
audit hook, which Python offers no way to remove. From then on the token
lives only in that hook's closure: no module, class or global holds it, and
reaching a closure takes the object graph (`gc`) or frames, which the hook
audits. Collectors get a record signed by raising the `patchheal.sign` audit
event from `patchheal_results.write`; the hook adds what it saw to the payload.

The hook's code runs from a private copy of this module (its own globals,
its own copy of the builtins, C functions bound at install), so replacing
`json.dumps`, `os.path.realpath`, `hmac.new` or a builtin later changes
nothing it does, and nothing it calls ever sees the token but C code.

Each watched operation (`patchheal_watch.py`) is attributed to the Python
file that performed it: the nearest frame past thin stdlib wrappers
(`inspect`, `functools`, `threading`, the import machinery), so `logging`'s
own frame access is logging's while `inspect.currentframe()` in a project
file is that file's. Operations performed by project files are kept,
deduplicated and bounded, in every signed record and, at once, as a signed
line of a `monitor-*.log` in the results directory: a process that later
silences the hook or exits early has already said it. The verdict
(`patchheal/verdict/tripwire.py`) decides; the hook refuses at once only what
no test run needs (see `patchheal_watch.py`).
"""

from __future__ import annotations

import builtins
import os
import sys
from typing import Any

DIR_ENV = "PATCHHEAL_RESULTS_DIR"
TOKEN_ENV = "PATCHHEAL_RESULTS_TOKEN"


def _scrub_environ_block(name: str) -> None:
    """Overwrite `name`'s value in the process's original environment block.

    `os.environ.pop` only unsets the variable; the kernel shows the block the
    process started with (`/proc/<pid>/environ`) to this process and to any
    child of the same user. Best effort: without ctypes the block stays. ctypes is
    unloaded again when the step had not loaded it: a project's code that walks every
    object (`gc.get_objects()`, `getattr(obj, name, None)`) meets `ctypes.cdll`, whose
    attributes load libraries (an OSError), only when it would without patchheal.
    """
    loaded = set(sys.modules)
    try:
        _overwrite(name)
    finally:
        for module in set(sys.modules) - loaded:
            if module.partition(".")[0] in ("ctypes", "_ctypes"):
                del sys.modules[module]


def _overwrite(name: str) -> None:
    try:
        import ctypes

        libc = ctypes.CDLL(None)
        block = ctypes.POINTER(ctypes.c_void_p).in_dll(libc, "environ")
        prefix = name.encode() + b"="
        index = 0
        while block[index]:
            address = block[index]
            entry = ctypes.string_at(address)
            if entry.startswith(prefix):
                ctypes.memset(address + len(prefix), ord("0"), len(entry) - len(prefix))
            index += 1
    except Exception:
        return


def _project_root() -> str:
    """The repository the step runs in: the nearest directory up from cwd with `.git`."""
    here = os.getcwd()  # noqa: PTH109
    probe = here
    while True:
        if os.path.exists(os.path.join(probe, ".git")):  # noqa: PTH110, PTH118
            return probe
        parent = os.path.dirname(probe)  # noqa: PTH120
        if parent == probe:
            return here
        probe = parent


def _code(path: str) -> Any:
    """The code of the collector at `path`: from the checked-hash pyc patchheal compiled
    beside it for this Python (harness/results/collectors.py `precompiled`) when that pyc
    was compiled from these very bytes, else compiled now (some 17 ms of every process's
    start). The pyc lies in the collectors' folder itself, not in a `__pycache__` under it:
    whoever could write it could write the source (a step container mounts the folder
    read-only, and the hook refuses the step's writes into it)."""
    with open(path, "rb") as handle:  # noqa: PTH123
        source = handle.read()
    try:
        cached = _cached(path, source)
    except Exception:  # an old Python, a torn file: compile as before
        cached = None
    return cached if cached is not None else compile(source.decode("utf-8"), path, "exec")


def _cached(path: str, source: bytes) -> Any:
    import _frozen_importlib_external as external
    import _imp
    import marshal

    tag = sys.implementation.cache_tag
    if tag is None:
        return None
    folder, name = os.path.split(path)
    pyc = os.path.join(folder, f"{name[:-3]}.{tag}.pyc")  # noqa: PTH118
    try:
        with open(pyc, "rb") as handle:  # noqa: PTH123
            data = handle.read()
    except OSError:
        return None
    flags = int.from_bytes(data[4:8], "little")
    # A hash-based pyc (bit 0), of this Python's bytecode, of exactly these source bytes: a
    # timestamp-based one says nothing of the bytes it was compiled from.
    if data[:4] != external.MAGIC_NUMBER or not flags & 0b1:
        return None
    key = external._RAW_MAGIC_NUMBER  # type: ignore[attr-defined]
    if data[8:16] != _imp.source_hash(key, source):
        return None
    code = marshal.loads(data[16:])
    if type(code) is not type(_cached.__code__):
        return None
    # Compiled on the host, under the host's path.
    _imp._fix_co_filename(code, path)  # type: ignore[attr-defined]
    return code


def install() -> None:
    """Arm the tripwire once per process; a second call does nothing."""
    if getattr(sys, "_patchheal_monitor_armed", False):
        return
    sys._patchheal_monitor_armed = True  # type: ignore[attr-defined]
    folder = os.environ.get(DIR_ENV, "")
    if os.environ.get(TOKEN_ENV):
        _scrub_environ_block(TOKEN_ENV)
    here = os.path.dirname(os.path.abspath(__file__))  # noqa: PTH100, PTH120
    stdlib = os.path.dirname(os.__file__)  # noqa: PTH120
    results = os.path.realpath(folder) if folder else ""
    # A private copy of the watch module: its globals and builtins are its own.
    private: dict[str, Any] = {"__builtins__": dict(vars(builtins)), "__name__": "patchheal_watch"}
    for name in ("patchheal_runnerwatch.py", "patchheal_pluginwatch.py", "patchheal_watch.py"):
        path = os.path.join(here, name)  # noqa: PTH118
        exec(_code(path), private)
    # The twin's plan is made in a namespace of its own too (its names are not the watch's).
    twin: dict[str, Any] = {"__builtins__": dict(vars(builtins)), "__name__": "patchheal_twin_plan"}
    for name in ("patchheal_twin_kept.py", "patchheal_twin_plan.py"):
        path = os.path.join(here, name)  # noqa: PTH118
        exec(_code(path), twin)
    # Only in this frame, then in the hook's closure.
    token = os.environ.pop(TOKEN_ENV, "").encode()
    runner_watch = private["make_runner_watch"](sys.modules, type(sys))
    planner = private["make_twin_planner"](twin["make_plan"], twin["keep_originals"])
    hook = private["make_hook"](
        token,
        results,
        _project_root(),
        here,
        stdlib,
        runner_watch,
        planner,
        private["is_runner_module"],
        private["make_plugin_watch"](sys.modules, type(sys), type(install)),
    )
    sys.addaudithook(hook)
    # The runner's modules imported so far (`builtins`, `ast`) as they are now, before any
    # code of the step's runs: those imported later are taken as they are first seen.
    runner_watch(True)
