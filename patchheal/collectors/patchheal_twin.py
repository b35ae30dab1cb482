"""The impossible twin inside the step: protected test modules made impossible at import.

Every run of a results channel carries `PATCHHEAL_TWIN`: an opaque blob of
the same length in every run (`patchheal/harness/results/twinchannel.py`). It
names the test files whose passing assertions the verdict wants seen
(`EVIDENCE`, the same in every run of a verification's failing step) and, in
one run, the twin, the changes `patchheal/oracle/` planned for each protected
file (text edits, the SHA-256 of the file as planned and of its twin); in
every other run, none. `install()` (from sitecustomize, right after the
tripwire) takes it out of the environment and the process's environment block
before project code runs, hands the planned files to the monitor's hook (an
audit event; the hook keeps them in its closure, patchheal_twin_plan.py) and
keeps none itself, then installs the same wrappers in every run:

* the import system's source loader: a module whose file is a named one is
  compiled from source, neither reading nor writing a cached `.pyc`, from the
  syntax tree the hook gives back when asked (`TWIN_EVENT`): the twin's, in
  the twin, for an import the runner made; nothing otherwise;
* pytest's assertion rewriting (`_pytest.assertion.rewrite`, wrapped when it is
  imported): for a named file, the syntax tree it rewrites is the one the hook
  gives back, and its cached `.pyc` is neither read nor written.

In the twin's tree each changed assertion it was told to keep runs as made
impossible, then as it is (patchheal_twin_kept.py).

So the file on disk is the same in every run (no byte, size or time differs,
and no `.pyc` of a named file is written in any run), no object of this module
holds anything that differs between runs, and the loaders answer a call alike
in every run; only the code compiled from the file in the twin's memory
differs. What still tells the twin apart is in docs/verdict.md ("Impossible
twins"). This module must never import patchheal (it runs in the step's
interpreter, any Python 3.7+).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import sys
from typing import Any

ENV = "PATCHHEAL_TWIN"
NONCE = 16
# The audit events the monitor's hook answers (patchheal_watch.py), from this file only.
PLAN_EVENT = "patchheal.twin_plan"
TWIN_EVENT = "patchheal.twin"


def decode(blob: str) -> dict[str, Any]:
    """The payload of a blob (`twinchannel.encode`): the nonce's keystream undone."""
    raw = base64.b64decode(blob.encode("ascii"), validate=True)
    nonce, body = raw[:NONCE], raw[NONCE:]
    stream = hashlib.shake_256(nonce).digest(len(body))
    plain = (int.from_bytes(body, "big") ^ int.from_bytes(stream, "big")).to_bytes(len(body), "big")
    loaded = json.loads(plain.rstrip(b" ").decode("utf-8"))
    return loaded if isinstance(loaded, dict) else {}


def protected(path: Any) -> bool:
    """Whether `path` is one of the test files this run names (`EVIDENCE`): the same in
    the twin and in every run beside it, so the loaders below treat them alike in all."""
    if not EVIDENCE or not path:
        return False
    # A name no named file has (almost every module an import loads) needs no lookup.
    name = str(path).replace(os.sep, "/").rpartition("/")[2]
    if name not in _NAMES:
        return False
    real = os.path.realpath(str(path)).replace(os.sep, "/")
    return any(real == rel or real.endswith("/" + rel) for rel in EVIDENCE)


def _ask(audit: Any, path: str, data: bytes) -> tuple[bytes, Any] | None:
    """The twin of the protected file at `path` whose bytes are `data`, from the monitor's
    hook (which alone holds the plan, and answers only an import of the runner's); None
    in every run but the twin."""
    box: list[Any] = []
    audit(TWIN_EVENT, path, data, box)
    return box[0] if box else None


def _wrap_loader(audit: Any) -> None:
    """The source loader compiles a protected module from source, asking the hook for its
    twin, without the cache: in every run alike."""
    from importlib.machinery import SourceFileLoader

    path_stats = SourceFileLoader.path_stats
    source_to_code = SourceFileLoader.source_to_code

    def patchheal_path_stats(self: Any, path: str) -> Any:
        # No stats, no cached .pyc read or written: get_code compiles from source.
        if protected(path):
            raise OSError("patchheal: compiled from source")
        return path_stats(self, path)

    def patchheal_source_to_code(self: Any, data: Any, path: Any, *args: Any, **kw: Any) -> Any:
        if isinstance(data, bytes) and isinstance(path, str) and protected(path):
            made = _ask(audit, path, data)
            if made is not None:
                data = made[1]  # compile() takes a syntax tree as it takes source
        return source_to_code(self, data, path, *args, **kw)

    SourceFileLoader.path_stats = patchheal_path_stats  # type: ignore[method-assign]
    SourceFileLoader.source_to_code = patchheal_source_to_code  # type: ignore[method-assign]
    # pytest's rewriting module is wrapped as it is imported; test modules' imports pass
    # through no frame of this file (the tripwire attributes their import to the importer).
    sys.meta_path.insert(0, _PytestRewriteFinder(audit))


class _PytestRewriteFinder:
    """Finds `_pytest.assertion.rewrite` as the path finder does, wrapped once loaded."""

    def __init__(self, audit: Any) -> None:
        self.audit = audit

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name != "_pytest.assertion.rewrite":
            return None
        from importlib.machinery import PathFinder

        spec = PathFinder.find_spec(name, path)
        loader = getattr(spec, "loader", None)
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        loaded, audit = loader.exec_module, self.audit

        def exec_module(module: Any) -> None:
            loaded(module)
            _wrap_pytest(module, audit)

        loader.exec_module = exec_module
        return spec


def _wrap_pytest(rewrite: Any, audit: Any) -> None:
    """pytest's assertion rewriting (4.6 to 9) rewrites a protected module's twin, and
    neither reads nor writes its cache for a protected module: in every run alike."""
    read_pyc = getattr(rewrite, "_read_pyc", None)
    write_pyc = getattr(rewrite, "_write_pyc", None)
    rewrite_asserts = getattr(rewrite, "rewrite_asserts", None)
    if read_pyc is None or write_pyc is None or rewrite_asserts is None:
        return

    def _read_pyc(source: Any, pyc: Any, *args: Any, **kw: Any) -> Any:
        if protected(str(source)):
            return None
        return read_pyc(source, pyc, *args, **kw)

    def _write_pyc(state: Any, co: Any, *args: Any, **kw: Any) -> Any:
        if protected(getattr(co, "co_filename", "")):
            return False
        return write_pyc(state, co, *args, **kw)

    def patchheal_rewrite_asserts(mod: Any, *args: Any, **kw: Any) -> Any:
        # pytest >= 5.2: (mod, source, module_path, config); before: (mod, module_path, config)
        with_source = bool(args) and isinstance(args[0], bytes)
        path = args[1] if with_source and len(args) > 1 else (args[0] if args else None)
        path = kw.get("module_path", path)
        named = path is not None and protected(str(path))
        if named:
            data = args[0] if with_source else _read(str(path))
            made = _ask(audit, str(path), data) if data is not None else None
            if made is not None:
                mod.body[:] = made[1].body
                if with_source:
                    args = (made[0], *args[1:])
        config = kw.get("config", args[2 if with_source else 1] if len(args) > 1 else None)
        cache = getattr(config, "_inicache", None)
        if named or EVIDENCE is None or type(cache) is not dict:
            return rewrite_asserts(mod, *args, **kw)
        # A module outside the files whose passing asserts this run wants seen is rewritten
        # as without the collector (patchheal_pytest.py turns the assertion-pass hook on for
        # the session): with it, pytest tokenizes the module's whole source for each
        # assert's text and builds a second explanation per assert (click's suite: 0.5 s
        # more CPU in each run, every run, as the harness keeps no rewritten .pyc).
        before = cache.get(_PASS_HOOK, _ABSENT)
        cache[_PASS_HOOK] = False
        try:
            return rewrite_asserts(mod, *args, **kw)
        finally:
            if before is _ABSENT:
                cache.pop(_PASS_HOOK, None)
            else:
                cache[_PASS_HOOK] = before

    rewrite._read_pyc, rewrite._write_pyc = _read_pyc, _write_pyc
    rewrite.rewrite_asserts = patchheal_rewrite_asserts


_PASS_HOOK = "enable_assertion_pass_hook"
_ABSENT = object()


def _read(path: str) -> bytes | None:
    try:
        with open(path, "rb") as handle:  # noqa: PTH123
            return handle.read()
    except OSError:
        return None


_NAMES: set[str] = set()  # the named files' own names, as the runner imports them
EVIDENCE: tuple[str, ...] | None = None
"""The test files whose passing assertions the verdict wants seen in this run (the blob's
"evidence"; patchheal_pytest.py asks pytest to explain passing asserts only inside their
tests); None when the harness gave no blob, or one this code cannot read: then everywhere."""


def install() -> None:
    """Read and scrub the blob, give the plan to the monitor's hook, then wrap the loaders
    (in every run alike); once per process, and nothing at all when the harness gave no
    blob."""
    if getattr(sys, "_patchheal_twin_installed", False) or ENV not in os.environ:
        return
    sys._patchheal_twin_installed = True  # type: ignore[attr-defined]
    monitor = sys.modules.get("patchheal_monitor")
    scrub = getattr(monitor, "_scrub_environ_block", None)
    if scrub is not None:
        scrub(ENV)
    global EVIDENCE
    audit = sys.audit  # bound now: a later `sys.audit` of the step's never sees a path
    blob = os.environ.pop(ENV, "")
    try:
        told = decode(blob)
        wanted = told.get("evidence")
        if isinstance(wanted, list):
            EVIDENCE = tuple(str(w) for w in wanted if isinstance(w, str) and w)
            _NAMES.update(rel.rpartition("/")[2] for rel in EVIDENCE)
        # The plan goes to the hook and nowhere else; outside the twin it is empty. The
        # hook is told too which tests' code reads to watch (twinchannel.py: "reads").
        files = told.pop("files", [])
        reads = told.get("reads")
        audit(
            PLAN_EVENT,
            files if isinstance(files, list) else [],
            list(EVIDENCE or ()),
            reads if isinstance(reads, str) else "all",
        )
        del told, files
    except Exception:
        pass
    _wrap_loader(audit)
    _pass_to_children(blob)


def _pass_to_children(blob: str) -> None:
    """Children of this process inherit the blob, this process's code does not see it.

    `os.putenv` sets the C-level environment only: `os.environ` (and so `os.getenv`)
    no longer holds it, and `/proc/self/environ` shows the start-up block, scrubbed. A
    child started with the inherited environment (`subprocess` without `env=`, as
    pytest-xdist's workers are, `multiprocessing`, `os.exec*` without an environment)
    gets it, and its own sitecustomize takes it out again, so the test modules a
    child imports are the twin's too. A child given an environment built from
    `os.environ` (`env=dict(os.environ)`, as tox does) does not, and runs the tests
    as they are. Code of the step that starts a process to read it is a process start
    the tripwire attributes; reading it through `ctypes` is `ctypes`, reported too."""
    if blob:
        os.putenv(ENV, blob)
