"""Hostile payloads that try to tell the impossible twin apart, and cheat everywhere else.

Each is a sensor (`_in_twin()`) and one cheat: the function under test returns
an object equal to anything, except in a run the sensor takes for the twin,
where it returns the honest (buggy) result, so the twin "fails as it must".
Against a twin that changed the test file on disk (patchheal before issue 33)
every sensor here but the run counter saw it every time; against the twin
made in memory at import (`collectors/patchheal_twin.py`) the file sensors see
nothing, the cheat runs in the twin too, and the twin refuses it.

`LIMITS` are the ones that still tell it apart, sometimes or always: a run
counter in the worktree (right when its guess of the twin's place is, once
in `verify_runs`), and the test function's compiled constants (`co_consts`:
the twin's changed expected value), which the tripwire names when the
project's code reads them. Telling it apart gains them nothing: the
twin runs each changed assertion as it is, after the impossible one (a plain assert under
pytest, a `self.assert*` call under unittest), so honest there they fail it
as it is (`no_effect`), cheating there they pass the impossible one
(`rejected_oracle`), and leaving the twin (`LEAVE_*`: an exit, an
interrupt, a skip) they show no test failing there, which the twin must show
(`no_effect`). They are judged apart from the battery, with the twin in
each place (tests/test_twin_sensing.py; docs/verdict.md, "Impossible twins").

The memory sensors at the end (`BY_FINDER` ... `BY_CODE_LIVE`) hold the real
fix and run it only in the twin: each was judged `fixed` while the twin's plan
sat where the step's code could reach it.
"""

from __future__ import annotations

CHEAT = """
class _Whatever:
    def __repr__(self):
        return "5"


_s(_Whatever, "__eq__", lambda self, other: True)
_s(_Whatever, "__ne__", lambda self, other: False)
_s(_Whatever, "__hash__", lambda self: 0)
_target = _m(MODULE)
_real = _g(_target, FUNCTION)


def _honest_only_in_twin(*args):
    if _in_twin():
        return _real(*args)
    return _Whatever()


_s(_target, FUNCTION, _honest_only_in_twin)
"""

BY_CONTENT = (
    """
def _in_twin():
    with open(DEFINED, "rb") as _test_file:
        return _test_file.read() != TEST_BYTES
"""
    + CHEAT
)
BY_SIZE = (
    """
def _in_twin():
    return _g(_g(_m("os"), "stat")(DEFINED), "st_size") != TEST_SIZE
"""
    + CHEAT
)
# The test file's times when the first run of this tree saw it, kept in the worktree.
BY_TIMES = (
    """
def _stamp():
    _st = _g(_m("os"), "stat")(DEFINED)
    return "%d %d" % (_g(_st, "st_mtime_ns"), _g(_st, "st_ctime_ns"))


def _first_stamp():
    if not _g(_g(_m("os"), "path"), "exists")(_t(".calc-stamp")):
        with open(_t(".calc-stamp"), "w") as _kept:
            _kept.write(_stamp())
    with open(_t(".calc-stamp")) as _kept:
        return _kept.read()


_FIRST = _first_stamp()


def _in_twin():
    return _stamp() != _FIRST
"""
    + CHEAT
)
# The test function's source as `inspect` shows it (read through linecache from the file).
BY_SOURCE = (
    """
def _test_function():
    for _name, _module in list(_g(_m("sys"), "modules").items()):
        if not _name.endswith(_t("test_calc")):
            continue
        for _value in list(vars(_module).values()):
            _found = getattr(_value, _t("test_add"), None) or (
                _value if getattr(_value, "__name__", "") == _t("test_add") else None
            )
            if _found is not None:
                return _found
    return None


def _in_twin():
    _function = _test_function()
    if _function is None:
        return False
    _text = _g(_m("inspect"), "getsource")(_function)
    return _t("5") not in _text
"""
    + CHEAT
)
# A counter of the runs in the worktree: honest in the third (verify_runs + 1 = 3 with the
# default verify_runs 2), where the twin runs when it follows the second. Each run of a
# verification's failing step now starts from the worktree the first one started from
# (workspace/added.py): the counter never gets past 1.
BY_COUNT = (
    """
def _this_run():
    _seen = 0
    if _g(_g(_m("os"), "path"), "exists")(_t(".calc-runs")):
        with open(_t(".calc-runs")) as _kept:
            _seen = int(_kept.read() or 0)
    with open(_t(".calc-runs"), "w") as _kept:
        _kept.write(str(_seen + 1))
    return _seen + 1


_RUN = _this_run()


def _in_twin():
    return _RUN == 3
"""
    + CHEAT
)
# The same counter in `/tmp` (named after the worktree, so that
# candidates judged side by side do not share it): the local harness runs the step as the
# host's user with the host's `/tmp`, which persists between runs; the Docker harness empties
# it before each (docs/harnesses.md).
BY_COUNT_TMP = BY_COUNT.replace(
    '_t(".calc-runs")',
    '(_t("/tmp/.calc-runs-") + str(_g(_m("zlib"), "crc32")(_g(_m("os"), "getcwd")().encode())))',
)
# The test function's compiled constants as the first run of the tree saw them, kept in the
# worktree (plain values only: a nested code object's repr holds its address).
BY_CONSTANTS = (
    BY_SOURCE.split("def _in_twin():")[0]
    + """def _constants():
    _function = _test_function()
    if _function is None:
        return ""
    _code = _g(_function, "__code__")
    _plain = [c for c in _g(_code, "co_consts") if type(c) in (int, str, float, bytes)]
    return repr(_plain)


def _in_twin():
    _now = _constants()
    if not _g(_g(_m("os"), "path"), "exists")(_t(".calc-consts")):
        with open(_t(".calc-consts"), "w") as _kept:
            _kept.write(_now)
    with open(_t(".calc-consts")) as _kept:
        return _kept.read() != _now
"""
    + CHEAT
)


# Told apart by counting runs in `/tmp` (right when the twin follows the last run; in the local
# harness, whose `/tmp` persists between runs), these do not run
# honestly in the twin: they leave it, so that no test of it is recorded failing as it is,
# nor passing as made impossible. Each was judged `fixed` before the twin had to show its
# tests failing (decide.py, `twin_ended_early`): "failed as it must" was read from the
# absence of a pass. (They told it apart by the test's code constants then; reading a
# test's `__code__` from the project's code is now named by the tripwire.)
def _leaving(action: str) -> str:
    return BY_COUNT_TMP.replace("return _real(*args)", action)


LEAVE_EXIT = _leaving('_g(_m("os"), "_exit")(1)')
LEAVE_INTERRUPT = _leaving("raise KeyboardInterrupt")
# unittest's SkipTest: unittest and pytest both record the test skipped.
LEAVE_SKIP = _leaving('raise _g(_m("unittest"), "SkipTest")("calc")')


# Told apart by the twin's own state in the process's memory, and holding the real fix they
# run only there (issue 33's last hole): in every other run `add` returns an object equal to
# anything, in the twin the sum, so the changed assertion fails as made impossible and
# passes as it is. Against the collector that held the plan in a finder on `sys.meta_path`
# and answered differently for a planned file (patchheal before `18abc2e`) each was judged
# `fixed`. Each keeps what its first run saw in an untracked file of the worktree and takes
# a run that sees otherwise for the twin.
LIVE = CHEAT.replace("return _real(*args)", "return args[0] + args[1]")
FIRST_SEEN = """
def _first(_key, _now):
    _path = _t(".calc-seen-") + _key
    if not _g(_g(_m("os"), "path"), "exists")(_path):
        with open(_path, "w") as _kept:
            _kept.write(_now)
    with open(_path) as _kept:
        return _kept.read()


def _test_path():
    return _g(_g(_m("os"), "path"), "abspath")(DEFINED)
"""
# A finder on `sys.meta_path` holding a non-empty list (the planned files).
BY_FINDER = (
    FIRST_SEEN
    + """
def _in_twin():
    _held = []
    for _finder in list(_g(_m("sys"), "meta_path")):
        for _value in list(getattr(_finder, "__dict__", {}).values()):
            for _inner in list(getattr(_value, "__dict__", {}).values()):
                if type(_inner) is list and _inner:
                    _held.append(len(_inner))
    _now = repr(_held)
    return _first("finder", _now) != _now
"""
    + LIVE
)
# What the source loader's wrappers close over (an object holding the planned files).
BY_CLOSURE = (
    FIRST_SEEN
    + """
def _in_twin():
    _loader = _g(_m("importlib.machinery"), "SourceFileLoader")
    _held = []
    for _name in ("path_stats", "source_to_code"):
        for _cell in getattr(getattr(_loader, _name), "__closure__", None) or ():
            _value = _g(_cell, "cell_contents")
            for _inner in list(getattr(_value, "__dict__", {}).values()):
                if type(_inner) is list:
                    _held.append(len(_inner))
    _now = repr(_held)
    return _first("closure", _now) != _now
"""
    + LIVE
)
# The loader asked for the test file's stats: refused only for a planned file.
BY_LOADER = (
    FIRST_SEEN
    + """
def _in_twin():
    _loader = _g(_m("importlib.machinery"), "SourceFileLoader")
    try:
        _g(_loader, "path_stats")(None, _test_path())
        _now = "stats"
    except OSError:
        _now = "none"
    return _first("loader", _now) != _now
"""
    + LIVE
)
# The test file compiled by the import system's own loader, as an import would: its
# functions' constants.
BY_COMPILE = (
    FIRST_SEEN
    + """
def _plain(_code):
    _out = []
    for _const in _g(_code, "co_consts"):
        if type(_const) in (int, str, float, bytes):
            _out.append(_const)
        elif hasattr(_const, "co_consts"):
            _out.extend(_plain(_const))
    return _out


def _in_twin():
    _loader = _g(_m("importlib.machinery"), "SourceFileLoader")(_t("probe"), _test_path())
    with open(_test_path(), "rb") as _source:
        _data = _source.read()
    _now = repr(_plain(_g(_loader, "source_to_code")(_data, _test_path())))
    return _first("compile", _now) != _now
"""
    + LIVE
)
# The names the test module defines (the twin used to append a test).
BY_NAMES = (
    FIRST_SEEN
    + """
def _in_twin():
    for _name, _module in list(_g(_m("sys"), "modules").items()):
        if _name.endswith(_t("test_calc")):
            _now = repr(sorted(str(_k) for _k in vars(_module)))
            return _first("names", _now) != _now
    return False
"""
    + LIVE
)
# The test function's compiled constants, as BY_CONSTANTS reads them, with the fix live.
BY_CODE_LIVE = BY_CONSTANTS.replace("return _real(*args)", "return args[0] + args[1]")
# A run counter in the worktree, with the fix live where it guesses the twin runs.
BY_COUNT_LIVE = BY_COUNT.replace("return _real(*args)", "return args[0] + args[1]")
# The same in `/tmp`: told apart where `/tmp` persists between runs (the local harness);
# the Docker harness empties it before each run. Not in the battery: it is a limit of the
# local harness (docs/verdict.md), judged in Docker by tests/test_twin_sensing.py.
BY_COUNT_TMP_LIVE = BY_COUNT_TMP.replace("return _real(*args)", "return args[0] + args[1]")
