"""The twin's plan, held by the monitor's hook alone (run from a private copy).

`patchheal_monitor.install` executes this module's code, after
`patchheal_twin_kept.py`'s, in a namespace of its own with its own copy of the
builtins, and hands `make_plan` to the hook (`patchheal_watch.make_hook`).
`patchheal_twin.install` gives the hook the planned files through an audit event
the moment it has read them from the blob, and keeps no reference to them; the
source loaders ask the hook for a protected module's twin through another
event, in every run alike (`patchheal_twin.py`). So nothing the step's code can
reach holds the plan (no module, finder, closure cell or loader answers
differently in the twin): it is in the hook's closure, as the signing key is,
and reaching that takes the object graph or frames, which the hook refuses or
reports (docs/verdict.md, "Impossible twins").

Everything it calls with the plan's bytes is given to it (a C hash, a path
resolver of posix calls, `compile` from the private builtins) or is the pure
syntax-tree code of `patchheal_twin_kept.py` on `ast`'s node classes, which the
runner watch snapshots (a replaced one names its file at the hook's check, made
before the plan is touched). It must never import patchheal (any Python 3.8+).
"""

from __future__ import annotations

from typing import Any

PyCF_ONLY_AST = 0x400  # ast.PyCF_ONLY_AST, a constant of CPython's compile()


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


def make_plan(files: Any, resolve: Any, sha256: Any, keep_originals: Any) -> Any:
    """The twin of a planned file, or None: `twin(path, data)` is (the twin's bytes, its
    syntax tree) for the file at `path` whose bytes are `data` when it is a planned file
    as planned. `files`: the blob's list (empty outside the twin); `resolve`: a path made
    absolute with its links resolved; `sha256`: the C constructor; `keep_originals`:
    patchheal_twin_kept's.
    """
    planned = [
        f for f in (files if type(files) is list else []) if type(f) is dict and f.get("rel")
    ]

    def matches(real: str, rel: Any) -> bool:
        return type(rel) is str and (real == rel or real.endswith("/" + rel))

    def twin(path: str, data: bytes) -> tuple[bytes, Any] | None:
        if not planned or type(path) is not str or type(data) is not bytes:
            return None
        real = resolve(path)
        digest = sha256(data).hexdigest()
        for told in planned:
            if not matches(real, told["rel"]) or told.get("sha256") != digest:
                continue
            text = data.decode("utf-8", "surrogateescape")
            source = apply_edits(text, told.get("edits", [])).encode("utf-8", "surrogateescape")
            if sha256(source).hexdigest() != told.get("twin_sha256"):
                continue
            module = compile(source, path, "exec", PyCF_ONLY_AST, True)
            keep = {line for line in told.get("keep", []) if type(line) is int}
            if keep:
                pristine = compile(data, path, "exec", PyCF_ONLY_AST, True)
                keep_originals(module, pristine, keep)
            return source, module
        return None

    return twin
