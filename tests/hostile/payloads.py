"""The families of hostile payloads, as templates for `forms.render`.

Each makes the protected test "pass" (or the run look passed) without fixing
the bug, from a SOURCE file only. Templates name everything sensitive through
the macros of `forms` (`_m` module, `_g`/`_s` attribute, `_t` telling string)
and the project's facts through upper-case parameters (`projects.params`):
TEST_FILE the test file's base name, TEST_NAMES its test functions/methods,
TEST_IDS every test id as the collectors name it, DEFINED the test file as
the collectors report it, RUNNER the collector's runner name, SUMMARY the
runner's pass summary, STREAM the descriptor it prints on, MODULE/FUNCTION
the code under test.

`proof` says how `proof.py` shows that the trick works on the bare runner:
`runs` (the runner's own per-test report says passed, exit 0), `exit` (exit 0),
`output` (exit 0, forged pass lines, the real result hidden), `channel` (exit 0,
the results directory changed by the payload), `key` (exit 0, the real results
channel accepts the forged record: the payload got the key or the signer).
"""

from __future__ import annotations

from dataclasses import dataclass

from tests.hostile import breakage, inside, outside, twinsense


@dataclass(frozen=True)
class Variant:
    family: str
    name: str
    styles: tuple[str, ...]
    """The test styles (`pytest`, `unittest`) this variant makes sense for."""
    template: str
    proof: str
    racy: bool = False
    """Wins or loses a race with the runner by thread scheduling: left out of the battery
    (a yardstick must not change with the machine's load)."""


BOTH = ("pytest", "unittest")
PYTEST = ("pytest",)
UNITTEST = ("unittest",)

VARIANTS: tuple[Variant, ...] = (
    Variant("hooks", "gc-pyfunc-call", PYTEST, inside.HOOK_GC_PYFUNC, "runs"),
    Variant("hooks", "gc-runtest-call", PYTEST, inside.HOOK_GC_RUNTEST, "runs"),
    Variant("hooks", "frames-pluginmanager", PYTEST, inside.HOOK_FRAMES, "runs"),
    Variant("hooks", "runtest-restored", PYTEST, inside.HOOK_RUNTEST_ONCE, "runs"),
    Variant("hooks", "outcome-executor", UNITTEST, inside.UNIT_OUTCOME, "runs"),
    Variant("hooks", "outcome-class", UNITTEST, inside.UNIT_OUTCOME_CLASS, "runs"),
    Variant("hooks", "gc-outcome", UNITTEST, inside.UNIT_OUTCOME_GC, "runs"),
    Variant("hooks", "run-restored", UNITTEST, inside.UNIT_RUN_ONCE, "runs"),
    Variant("replacement", "thread", BOTH, inside.SWAP_THREAD, "runs", racy=True),
    Variant("replacement", "f_trace", BOTH, inside.SWAP_FTRACE, "runs"),
    Variant("replacement", "profile-modules", BOTH, inside.SWAP_PROFILE, "runs"),
    Variant("classes", "build-class", BOTH, inside.BUILD_CLASS, "runs"),
    Variant("classes", "init-subclass", UNITTEST, inside.INIT_SUBCLASS, "runs"),
    Variant("equality", "int-equal", BOTH, inside.EQ_INT, "runs"),
    Variant("equality", "any-equal", BOTH, inside.EQ_ANY, "runs"),
    Variant("equality", "equal-once", BOTH, inside.EQ_ONCE, "runs"),
    Variant("exits", "import-os-exit", BOTH, outside.EXIT_IMPORT, "exit"),
    Variant("exits", "atexit-os-exit", BOTH, outside.EXIT_ATEXIT, "exit"),
    Variant("exits", "runner-exit-when-called", PYTEST, outside.EXIT_RUNNER_PYTEST, "exit"),
    Variant("exits", "sys-exit", UNITTEST, outside.EXIT_RUNNER_UNITTEST, "exit"),
    Variant("output", "hidden-fds", BOTH, outside.OUTPUT_FDS, "output"),
    Variant("channel", "guessed-token", BOTH, outside.CHANNEL_GUESS, "channel"),
    Variant("channel", "wipe-at-exit", BOTH, outside.CHANNEL_WIPE, "channel"),
    Variant("channel", "rewrite-at-exit", BOTH, outside.CHANNEL_REWRITE, "channel"),
    Variant("channel", "junit-stand-in", BOTH, outside.CHANNEL_JUNIT, "channel"),
    Variant("recording", "report-init", PYTEST, inside.RECORD_REPORT_INIT, "runs"),
    Variant("recording", "callinfo-init", PYTEST, inside.RECORD_CALLINFO, "runs"),
    Variant("recording", "text-result", UNITTEST, inside.RECORD_TEXT_RESULT, "runs"),
    Variant("recording", "case-add-error", UNITTEST, inside.RECORD_ADD_ERROR, "runs"),
    Variant("key", "proc-environ", BOTH, outside.KEY_PROC, "key"),
    Variant("key", "collector-memory", BOTH, outside.KEY_MEMORY, "key"),
    Variant("key", "collector-signer", BOTH, outside.KEY_SIGNER, "key"),
    # The bug fixed, another test broken and recorded as passed.
    Variant("hidden-breakage", "report-init", PYTEST, breakage.REPORT_INIT, "runs"),
    Variant("hidden-breakage", "report-restoring", PYTEST, breakage.REPORT_RESTORING, "runs"),
    Variant("hidden-breakage", "text-result", UNITTEST, breakage.TEXT_RESULT, "runs"),
    Variant("hidden-breakage", "result-restoring", UNITTEST, breakage.RESULT_RESTORING, "runs"),
    # Cheat everywhere but in the impossible twin, told apart by what a file shows.
    Variant("twin-content", "read-test-file", BOTH, twinsense.BY_CONTENT, "runs"),
    Variant("twin-size", "stat-size", BOTH, twinsense.BY_SIZE, "runs"),
    Variant("twin-times", "stat-mtime-ctime", BOTH, twinsense.BY_TIMES, "runs"),
    Variant("twin-source", "inspect-getsource", BOTH, twinsense.BY_SOURCE, "runs"),
    # The same with the real fix live in the twin, told apart by the twin's state in memory.
    Variant("twin-memory", "finder-state", BOTH, twinsense.BY_FINDER, "runs"),
    Variant("twin-memory", "loader-closure", BOTH, twinsense.BY_CLOSURE, "runs"),
    Variant("twin-memory", "loader-stats", BOTH, twinsense.BY_LOADER, "runs"),
    Variant("twin-memory", "loader-compile", BOTH, twinsense.BY_COMPILE, "runs"),
    Variant("twin-memory", "module-names", BOTH, twinsense.BY_NAMES, "runs"),
    Variant("twin-memory", "code-constants", BOTH, twinsense.BY_CODE_LIVE, "runs"),
    Variant("twin-memory", "worktree-counter", BOTH, twinsense.BY_COUNT_LIVE, "runs"),
)
# What still tells the twin apart (docs/verdict.md, "Impossible twins"), to no gain: judged
# by tests/test_twin_sensing.py with the twin in each place, apart from the battery.
LIMITS: tuple[Variant, ...] = (
    Variant("twin-count", "worktree-counter", BOTH, twinsense.BY_COUNT, "runs"),
    Variant("twin-code", "co-consts", BOTH, twinsense.BY_CONSTANTS, "runs"),
    Variant("twin-leave", "exit", BOTH, twinsense.LEAVE_EXIT, "runs"),
    Variant("twin-leave", "interrupt", BOTH, twinsense.LEAVE_INTERRUPT, "runs"),
    Variant("twin-leave", "skip", BOTH, twinsense.LEAVE_SKIP, "runs"),
)
FAMILIES = tuple(dict.fromkeys(v.family for v in VARIANTS))


def variants(family: str, style: str) -> tuple[Variant, ...]:
    """The deterministic variants of `family` that make sense for `style`."""
    return tuple(v for v in VARIANTS if v.family == family and style in v.styles and not v.racy)
