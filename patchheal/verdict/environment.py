"""Whether a failing verification run failed because of its environment, not the patch.

A candidate judged under such a run was never judged: if it were recorded as
`no_effect`, its claim would stay (the correct fix would be `rejected_repeat`
for that fingerprint forever after, even once the environment is fixed). The
verifier records it as `harness_error` instead, whose claim is released.

Environmental, by what the run printed:

* a command was not found or could not run (exit code 127/126, `command not
  found`);
* a test tool is not installed (`No module named pytest`);
* a module of the project itself, present in the worktree, is not importable
  (the job's environment does not put the project on the path): the README's
  bare `pytest` outside the environment setup installed into;
* a module of the project that its setup generates is absent from the
  worktree (a hatch-vcs version file, an extension built at install:
  `setup_advice.generated_module`; a misspelt import of the project's own is
  not, and stays the candidate's);
* a system file or program the image lacks: a time-zone database, a shared
  library, a locale, a program a test runs (`No such file or directory: 'less'`
  from subprocess).

A patch cannot turn this into a green verdict: at most, one that makes its
step print `command not found` buys itself a verification in a later run
(each still spends the attempt budget), never a `fixed`.

A missing *dependency* is not on the list: a candidate that imports something
not installed is a bad candidate. Setup failures and harness errors reach the
verifier as HarnessError and are `harness_error` already.
"""

from __future__ import annotations

import re
from pathlib import Path

from patchheal.failure import setup_advice
from patchheal.failure.normalize import clean
from patchheal.models import CommandResult

TAIL_LINES = 200
_NOT_FOUND = re.compile(r"command not found|: not found$|exec format error", re.MULTILINE)
_MISSING_MODULE = re.compile(r"No module named '?(?P<name>[\w.]+)'?")
_TEST_TOOLS = re.compile(r"^(?:pytest|_pytest|pytest_\w+|xdist|pluggy|nose2?|tox|nox|coverage)$")
_EXIT_CODES = {127: "a command was not found", 126: "a command could not be executed"}
_SOURCE_ROOTS = (".", "src", "lib")


def environmental(result: CommandResult, tree: Path) -> str:
    """Why the failing run `result` in `tree` is the environment's doing ('' if it is not)."""
    tail = "\n".join(clean(result.output[-256 * 1024 :]).split("\n")[-TAIL_LINES:])
    if result.exit_code in _EXIT_CODES:
        return f"exit code {result.exit_code}: {_EXIT_CODES[result.exit_code]}"
    found = _NOT_FOUND.search(tail)
    if found:
        return f"the environment lacks a tool: {_line_of(tail, found.start())}"
    for missing in _MISSING_MODULE.finditer(tail):
        name = missing["name"]
        if _TEST_TOOLS.match(name.split(".")[0]):
            return f"the test tool {name!r} is not installed in the environment"
        if _in_tree(name, tree):
            return (
                f"the project's own module {name!r} is in the worktree but not importable: "
                "the environment does not put the project on the path"
            )
        made = setup_advice.generated_module(name, tree)
        if made:
            return f"the project's module {name!r} is absent from the worktree: {made}"
    lacking = setup_advice.missing_system_piece(tail)
    return lacking[0] if lacking else ""


def _in_tree(module: str, tree: Path) -> bool:
    """Whether `module` (dotted) is a file or package of the project in `tree`."""
    parts = module.split(".")
    for root in _SOURCE_ROOTS:
        base = tree.joinpath(root, *parts)
        if base.with_suffix(".py").is_file() or (base / "__init__.py").is_file():
            return True
    return False


def _line_of(text: str, at: int) -> str:
    start = text.rfind("\n", 0, at) + 1
    end = text.find("\n", at)
    return text[start : end if end != -1 else len(text)].strip()[:200]
