"""A collector's own failure must never become the step's: the guard every hook runs under.

The collectors run inside the step's process, beside the project's tests. A
bug of theirs (an attribute an older pytest does not have, an internal that
moved) must not make a test error, nor print a traceback that reads as the
project's failure. Each hook body runs through `Guard.run`: the first internal
error is caught, the collector stops observing for the rest of the process,
and its record carries `collector_error` instead of outcomes, which the
verdict reads as "no trusted results" (a harness problem, never a verdict on
the project or the patch).
"""

from __future__ import annotations

import os
import traceback
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")
_HERE = os.path.dirname(os.path.abspath(__file__))  # noqa: PTH100, PTH120
MAX_REASON = 300


def reason(exc: BaseException) -> str:
    """`AttributeError: ... (patchheal_pytest.py:88)`: the error and the collector line it hit."""
    where = ""
    for frame in reversed(traceback.extract_tb(exc.__traceback__)):
        if os.path.dirname(os.path.abspath(frame.filename)) == _HERE:  # noqa: PTH100, PTH120
            where = f" ({os.path.basename(frame.filename)}:{frame.lineno})"  # noqa: PTH119
            break
    text = f"{type(exc).__name__}: {exc}".replace("\n", " ")
    return text[: MAX_REASON - len(where)] + where


class Guard:
    """One collector's health for this process: healthy until the first internal error."""

    def __init__(self) -> None:
        self.error = ""

    def fail(self, exc: BaseException) -> None:
        if not self.error:
            self.error = reason(exc)

    def run(self, body: Callable[..., T], *args: Any) -> T | None:
        """`body(*args)`, or None once the collector failed (now or earlier); never raises
        an Exception (an interrupt or an exit still goes through)."""
        if self.error:
            return None
        try:
            return body(*args)
        except Exception as exc:
            self.fail(exc)
            return None
