"""An exec that runc failed to start is started again; one that ran and failed is not.

The strings are the engine's own: the first is the one a full test run met
(`test_services`, the results directory's mkdir in the compose harness's keeper);
the others are exec failures where the command did start, or cannot.
"""

from __future__ import annotations

import pytest

from patchheal.harness.engine.dockerapi import exec_not_started

RESET = (
    "OCI runtime exec failed: exec failed: unable to start container process: "
    "read init-p: connection reset by peer: unknown\r\n"
)


def test_runc_reset_before_the_command_started_is_worth_starting_again() -> None:
    assert exec_not_started(126, RESET)
    assert exec_not_started(126, "\n" + RESET.replace("connection reset by peer", "broken pipe"))


@pytest.mark.parametrize(
    ("code", "output"),
    [
        # A command that is not there: starting it again finds it no more.
        (127, 'OCI runtime exec failed: exec failed: unable to start container process: '
              'exec: "nosuch": executable file not found in $PATH: unknown\r\n'),
        # The command ran and printed the words itself: its failure is its own.
        (1, RESET),
        (126, "sh: 1: ./build.sh: Permission denied\n" + RESET),
        (0, RESET),
        (None, RESET),
    ],
)  # fmt: skip
def test_a_command_that_ran_or_cannot_run_is_not_started_again(code: object, output: str) -> None:
    assert not exec_not_started(code, output)
