"""Parse Python source into a syntax tree, past a CPython fault that is not the source's.

On CPython 3.11 (seen on 3.11.7; gh-106905 and its reports), building the tree
keeps its recursion depth in interpreter-wide state. When a garbage collection
inside that build runs code that parses Python too (a finalizer that imports a
module pytest rewrites, a `gc` callback), the inner parse resets the shared
depth and the outer one fails with `SystemError: AST constructor recursion
depth mismatch`: nothing is wrong with the source. It is parsed once more with
the collector paused, so no such code can run in between.
"""

from __future__ import annotations

import ast
import gc


def parse_module(source: str | bytes, filename: str = "<unknown>") -> ast.Module:
    """`ast.parse(source, filename)`, retried once with the collector paused if the
    interpreter reports a spurious depth mismatch. Raises what `ast.parse` raises."""
    try:
        return ast.parse(source, filename=filename)
    except SystemError as error:
        if "recursion depth mismatch" not in str(error):
            raise
    paused = gc.isenabled()
    gc.disable()
    try:
        return ast.parse(source, filename=filename)
    finally:
        if paused:
            gc.enable()
