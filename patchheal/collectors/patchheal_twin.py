"""The impossible twin inside the step: protected test modules made impossible at import.

Every run of a results channel carries `PATCHHEAL_TWIN`: an opaque blob of
the same length in every run (`patchheal/harness/results/twinchannel.py`). In one
verification run, the twin, it holds the changes `patchheal/oracle/` planned
for each protected test file (text edits, the fresh test appended, the
SHA-256 of the file as planned and of its twin); in every other run, none.
`install()` (from sitecustomize, right after the tripwire) takes it out of
the environment and the process's environment block before project code
runs, and installs the same wrappers in every run:

* the import system's source loader: a module whose file is a planned one
  (its path ends with the planned path, its bytes hash as planned) is compiled
  from its twin's text, and neither reads nor writes a cached `.pyc`;
* pytest's assertion rewriting (`_pytest.assertion.rewrite`, wrapped when it is
  imported): the syntax tree it rewrites is the twin's, and its cached `.pyc`
  is neither read nor written for a planned file.

In the twin's tree each changed assertion it was told to keep runs as made
impossible, then as it is (patchheal_twin_kept.py).

So the file on disk is the same in every run (no byte, size or time differs);
only the code compiled from it in the twin's memory does. What still tells
the twin apart is in docs/verdict.md ("Impossible twins"). This module must
never import patchheal (it runs in the step's interpreter, any Python 3.7+).
"""

from __future__ import annotations

import ast
import base64
import hashlib
import json
import os
import sys
from typing import Any

import patchheal_twin_kept as kept

ENV = "PATCHHEAL_TWIN"
NONCE = 16


def decode(blob: str) -> dict[str, Any]:
    """The payload of a blob (`twinchannel.encode`): the nonce's keystream undone."""
    raw = base64.b64decode(blob.encode("ascii"), validate=True)
    nonce, body = raw[:NONCE], raw[NONCE:]
    stream = hashlib.shake_256(nonce).digest(len(body))
    plain = (int.from_bytes(body, "big") ^ int.from_bytes(stream, "big")).to_bytes(len(body), "big")
    loaded = json.loads(plain.rstrip(b" ").decode("utf-8"))
    return loaded if isinstance(loaded, dict) else {}


def apply_edits(text: str, edits: list[list[Any]]) -> str:
    """`text` with each (line, col, end_line, end_col, new text) replaced, as
    `patchheal/oracle/mutate.py` applies them (1-based lines, columns in characters)."""
    lines = text.split("\n")
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line) + 1)
    for line, col, end_line, end_col, new in sorted(
        edits, key=lambda e: (e[0], e[1]), reverse=True
    ):
        begin = starts[line - 1] + col
        end = starts[end_line - 1] + end_col
        text = text[:begin] + new + text[end:]
    return text


class Twin:
    """The planned files of this run (none outside the twin) and their twins' bytes."""

    def __init__(self, files: list[dict[str, Any]]) -> None:
        self.files = [f for f in files if isinstance(f, dict) and f.get("rel")]

    def planned(self, path: str) -> bool:
        """Whether `path` is one of the planned files (by path only)."""
        if not self.files or not path:
            return False
        real = os.path.realpath(str(path)).replace(os.sep, "/")
        return any(real == f["rel"] or real.endswith("/" + f["rel"]) for f in self.files)

    def source(self, path: str, data: bytes) -> tuple[bytes, dict[str, Any]] | None:
        """The twin's bytes for the file at `path` whose bytes are `data`, and its plan;
        None when it is not a planned file or not the file as planned."""
        if not self.planned(path):
            return None
        digest = hashlib.sha256(data).hexdigest()
        real = os.path.realpath(str(path)).replace(os.sep, "/")
        for planned in self.files:
            suffix = real == planned["rel"] or real.endswith("/" + planned["rel"])
            if not suffix or planned.get("sha256") != digest:
                continue
            text = data.decode("utf-8", "surrogateescape")
            made = apply_edits(text, planned.get("edits", [])) + str(planned.get("tail", ""))
            twin = made.encode("utf-8", "surrogateescape")
            if hashlib.sha256(twin).hexdigest() == planned.get("twin_sha256"):
                return twin, planned
        return None

    def tree(self, path: str, data: bytes) -> tuple[bytes, ast.Module] | None:
        """The twin's bytes and syntax tree (None: not a planned file, as above). Each
        assertion on a `keep` line runs as made impossible, then as it was: evidence
        (pytest's assertion-pass hook or a TestCase helper, at that line) that the test as
        it is passed (patchheal_twin_kept.py)."""
        found = self.source(path, data)
        if found is None:
            return None
        twin, planned = found
        module = ast.parse(twin, filename=str(path))
        keep = {line for line in planned.get("keep", []) if isinstance(line, int)}
        if keep:
            kept.keep_originals(module, ast.parse(data, filename=str(path)), keep)
        return twin, module


def _wrap_loader(twin: Twin) -> None:
    """The source loader compiles a planned module from its twin, without the cache."""
    from importlib.machinery import SourceFileLoader

    path_stats = SourceFileLoader.path_stats
    source_to_code = SourceFileLoader.source_to_code

    def patchheal_path_stats(self: Any, path: str) -> Any:
        # No stats, no cached .pyc read or written: get_code compiles from source.
        if twin.planned(path):
            raise OSError("patchheal: compiled from source")
        return path_stats(self, path)

    def patchheal_source_to_code(self: Any, data: Any, path: Any, *args: Any, **kw: Any) -> Any:
        if isinstance(data, bytes) and isinstance(path, str):
            made = twin.tree(path, data)
            if made is not None:
                data = made[1]  # compile() takes a syntax tree as it takes source
        return source_to_code(self, data, path, *args, **kw)

    SourceFileLoader.path_stats = patchheal_path_stats  # type: ignore[method-assign]
    SourceFileLoader.source_to_code = patchheal_source_to_code  # type: ignore[method-assign]
    # pytest's rewriting module is wrapped as it is imported; test modules' imports pass
    # through no frame of this file (the tripwire attributes their import to the importer).
    sys.meta_path.insert(0, _PytestRewriteFinder(twin))


class _PytestRewriteFinder:
    """Finds `_pytest.assertion.rewrite` as the path finder does, wrapped once loaded."""

    def __init__(self, twin: Twin) -> None:
        self.twin = twin

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name != "_pytest.assertion.rewrite":
            return None
        from importlib.machinery import PathFinder

        spec = PathFinder.find_spec(name, path)
        loader = getattr(spec, "loader", None)
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        loaded, twin = loader.exec_module, self.twin

        def exec_module(module: Any) -> None:
            loaded(module)
            _wrap_pytest(module, twin)

        loader.exec_module = exec_module
        return spec


def _wrap_pytest(rewrite: Any, twin: Twin) -> None:
    """pytest's assertion rewriting (4.6 to 9) rewrites a planned module's twin."""
    read_pyc = getattr(rewrite, "_read_pyc", None)
    write_pyc = getattr(rewrite, "_write_pyc", None)
    rewrite_asserts = getattr(rewrite, "rewrite_asserts", None)
    if read_pyc is None or write_pyc is None or rewrite_asserts is None:
        return

    def _read_pyc(source: Any, pyc: Any, *args: Any, **kw: Any) -> Any:
        if twin.planned(str(source)):
            return None
        return read_pyc(source, pyc, *args, **kw)

    def _write_pyc(state: Any, co: Any, *args: Any, **kw: Any) -> Any:
        if twin.planned(getattr(co, "co_filename", "")):
            return False
        return write_pyc(state, co, *args, **kw)

    def patchheal_rewrite_asserts(mod: Any, *args: Any, **kw: Any) -> Any:
        # pytest >= 5.2: (mod, source, module_path, config); before: (mod, module_path, config)
        with_source = bool(args) and isinstance(args[0], bytes)
        path = args[1] if with_source and len(args) > 1 else (args[0] if args else None)
        path = kw.get("module_path", path)
        if path is not None and twin.planned(str(path)):
            data = args[0] if with_source else _read(str(path))
            made = twin.tree(str(path), data) if data is not None else None
            if made is not None:
                mod.body[:] = made[1].body
                if with_source:
                    args = (made[0], *args[1:])
        return rewrite_asserts(mod, *args, **kw)

    rewrite._read_pyc, rewrite._write_pyc = _read_pyc, _write_pyc
    rewrite.rewrite_asserts = patchheal_rewrite_asserts


def _read(path: str) -> bytes | None:
    try:
        with open(path, "rb") as handle:  # noqa: PTH123
            return handle.read()
    except OSError:
        return None


EVIDENCE: tuple[str, ...] | None = None
"""The test files whose passing assertions the verdict wants seen in this run (the blob's
"evidence"; patchheal_pytest.py asks pytest to explain passing asserts only inside their
tests); None when the harness gave no blob, or one this code cannot read: then everywhere."""


def install() -> None:
    """Read and scrub the blob, then wrap the loaders (in every run alike); once per
    process, and nothing at all when the harness gave no blob."""
    if getattr(sys, "_patchheal_twin_installed", False) or ENV not in os.environ:
        return
    sys._patchheal_twin_installed = True  # type: ignore[attr-defined]
    monitor = sys.modules.get("patchheal_monitor")
    scrub = getattr(monitor, "_scrub_environ_block", None)
    if scrub is not None:
        scrub(ENV)
    global EVIDENCE
    blob = os.environ.pop(ENV, "")
    try:
        told = decode(blob)
        files = told.get("files", [])
        wanted = told.get("evidence")
        if isinstance(wanted, list):
            EVIDENCE = tuple(str(w) for w in wanted if isinstance(w, str) and w)
    except Exception:
        files = []
    _wrap_loader(Twin(files if isinstance(files, list) else []))
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
