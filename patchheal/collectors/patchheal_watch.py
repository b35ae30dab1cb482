"""What the tripwire watches, whom it blames, and what it refuses (run from a private copy).

`patchheal_monitor.install` executes this module's code in a namespace of its
own, with its own copy of the builtins, and calls `make_hook`. Everything the
hook calls is either defined here or a C function bound below at install, so
later changes to `os`, `json`, `hmac` or the builtins do not reach it.

Audit events (CPython 3.11, checked by tests/test_tripwire.py): frames
(`sys._getframe`, `sys._current_frames`, reading `tb_frame`/`gi_frame`/
`cr_frame`/`ag_frame`), the object graph (`gc.get_objects`/`get_referrers`/
`get_referents`), `sys.settrace`/`sys.setprofile` (also as threading starts
them), `compile` (with its file name), `exec`, `code.__new__` (also
`code.replace`), `function.__new__`, setting a function's `__code__`/
`__defaults__`, `ctypes.*`, `os.kill`/`signal.pthread_kill`, new audit hooks,
processes, `open`, and removals, renames, truncation and mode changes.
Not audited by CPython, so not seen here: assigning class or module
attributes (`builtins`, `sys.meta_path`, a pytest internal), `f_back`,
`f_locals`, `f_globals`, a frame's `f_trace`, `signal.signal`, `os.dup2`,
`os._exit`.
"""

from __future__ import annotations

from _operator import methodcaller
from _thread import get_ident
from posix import (
    O_APPEND,
    O_CREAT,
    O_DIRECTORY,
    O_EXCL,
    O_NOFOLLOW,
    O_RDONLY,
    O_RDWR,
    O_TRUNC,
    O_WRONLY,
    dup2,
    environ,
    fstat,
    getcwd,
    getpid,
    lstat,
    readlink,
    stat,
    urandom,
)
from posix import close as os_close
from posix import open as os_open
from posix import read as os_read
from posix import write as os_write
from typing import TYPE_CHECKING, Any

# A refusal carries EACCES, as the system's own would: library code that handles a
# permission error by its errno (pytest 4.6's rewrite cache, for one) degrades as it
# does on a read-only folder instead of crashing.
_EACCES = 13

# A C constructor, bound here once: CPython's own (`_sha256`, `_sha2` from 3.12) where it
# has one, which loads in a tenth of the time `hashlib` takes to load OpenSSL (4 ms of
# every process that would not have imported hashlib itself).
if TYPE_CHECKING:
    from hashlib import sha256
else:
    try:
        from _sha256 import sha256
    except ImportError:
        try:
            from _sha2 import sha256
        except ImportError:
            from hashlib import sha256

try:
    from _json import encode_basestring_ascii
except ImportError:  # a Python built without the accelerator
    from json.encoder import py_encode_basestring_ascii as encode_basestring_ascii

SIGN_EVENT = "patchheal.sign"
ARMED_EVENT = "patchheal.armed"
# Raised by the collectors: an assertion passed (its caller is the test's frame), and a
# test's start or outcome streamed as it happens (patchheal_runner.py).
ASSERT_EVENT = "patchheal.assert_pass"
TEST_EVENT = "patchheal.test"
# Raised by patchheal_twin.py alone: the twin's plan handed over once, at start-up; a
# protected module's twin asked for, by its loaders, in every run alike.
PLAN_EVENT = "patchheal.twin_plan"
TWIN_EVENT = "patchheal.twin"
# Reading a code object: a test's, read by code of the project's, tells its twin apart.
CODE_ATTRS = frozenset({"__code__", "gi_code", "cr_code", "ag_code"})
TEST_IMPORTED = "test module imported by non-test code"
TEST_CODE_READ = "a test's code read by non-test code"
MAX_EVENTS = 200
MAX_QUIET_EXECS = 4096
# Events of one operation by one file that no protected target is hit by (a template engine
# compiling each template under its own name): a few tell what it does; more would only let
# a file fill the log with harmless events so that a later one is not kept.
MAX_PER_SOURCE = 8
# Kept when the log is full: the run is not believed unless its baseline filled it too.
LOG_FULL = "tripwire log full: later events were not kept"
# The function an impossible assertion of the twin defines, and reads the code of, when it
# held (patchheal_twin_kept.py); not an identifier, so no source names it.
IMPOSSIBLE_HELD = "@patchheal_impossible_held"
MAX_LINES_PER_TEST = 64
# A file made or changed outside the worktree and the run's own temporary folder: a mark the
# next run could find (a run counter that guesses which run is the twin). The worktree is
# reset between runs and, in the local harness, each run has a temporary folder of its own;
# the Docker harness also empties `/tmp` before each run.
KEPT_OUTSIDE = "file written outside the worktree and the run's temporary folder"
# Creating or changing a file at a path; `os.remove`, `os.rmdir` and `shutil.rmtree` only
# take away (a run's cleanup of its own marks).
MAKES = frozenset(
    {"os.rename", "os.truncate", "os.chmod", "os.chown", "os.link", "os.symlink", "os.mkdir"}
    | {"os.utime"}
)
CO_OPTIMIZED = 0x1
COLLECTOR_MODULES = (
    "patchheal_results",
    "patchheal_pytest",
    "patchheal_unittest",
    "patchheal_airflow",
    "patchheal_trace",
)
FRAME_ATTRS = frozenset({"tb_frame", "gi_frame", "cr_frame", "ag_frame"})
# Reported when a project file performs them; the verdict decides.
TAMPER = {
    "sys._getframe": "frame access",
    "sys._current_frames": "frame access (all threads)",
    "sys._getframemodulename": "frame access",  # 3.12+
    "sys.monitoring.register_callback": "monitoring hook",  # 3.12+
    "object.__getattr__": "frame access",
    "gc.get_objects": "object graph walk",
    "gc.get_referrers": "object graph walk",
    "gc.get_referents": "object graph walk",
    "sys.settrace": "trace hook",
    "sys.setprofile": "profile hook",
    "sys.addaudithook": "audit hook added",
    "ctypes.dlopen": "ctypes",
    "ctypes.dlsym": "ctypes",
    "ctypes.cdata": "ctypes",
    "ctypes.string_at": "ctypes",
    "ctypes.call_function": "ctypes",
    # A code object from bytes: compiled elsewhere, under any file name, with no `compile`
    # here (the import system reading a cached module is not reported).
    "marshal.loads": "code loaded from bytes",
    "marshal.load": "code loaded from bytes",
    "os.kill": "signal",
    "os.killpg": "signal",
    "signal.pthread_kill": "signal",
}
CODE = {"compile", "exec", "code.__new__", "function.__new__"}
PROCESS = {"subprocess.Popen", "os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.fork"}
# event -> positions of (path, dir_fd) pairs among its arguments
PATHS = {
    "os.remove": ((0, 1),),
    "os.rmdir": ((0, 1),),
    "os.rename": ((0, 2), (1, 3)),
    "os.truncate": ((0, -1),),
    "os.chmod": ((0, 2),),
    "os.chown": ((0, 3),),
    "os.link": ((0, 2), (1, 3)),
    "os.symlink": ((1, 2),),
    "os.mkdir": ((0, 2),),
    "os.utime": ((0, 3),),
    "shutil.rmtree": ((0, 1),),
}
# Operations that can change a guarded directory itself, whose parent may not be guarded
# (the collectors' folder): by following a symbolic link in the last part of their path, or
# by moving it. The others can only reach a guarded directory inside a guarded parent (the
# results directory's parent is one), or fail on a directory anyway (`open` for writing,
# `os.remove`, `os.mkdir` of one that exists): for them the parent's identity is enough.
# That is one `stat` fewer per operation, which a suite of threads contending on files pays
# for with the GIL at every call (filelock's threaded tests, benchmarks/README.md).
CHANGE_ITSELF = frozenset(
    {"os.chmod", "os.chown", "os.utime", "os.truncate", "os.rename", "shutil.rmtree"}
)
WATCHED = frozenset(
    {*TAMPER, *CODE, *PROCESS, *PATHS, "open", "object.__setattr__"}
    | {SIGN_EVENT, ARMED_EVENT, ASSERT_EVENT, TEST_EVENT, PLAN_EVENT, TWIN_EVENT}
    | {"sqlite3.connect"}
)
# The collectors that may raise ASSERT_EVENT and TEST_EVENT.
_REPORTERS = ("/patchheal_pytest.py", "/patchheal_unittest.py")
_REWRITE = "/_pytest/assertion/rewrite.py"
_WRITE_FLAGS = O_WRONLY | O_RDWR | O_CREAT | O_TRUNC | O_APPEND
# A mode with anything but these letters writes ('w', 'a', 'x', '+'): one C call where a
# test of each letter was a generator (an open is the commonest event after code reads).
_READ_MODE = str.maketrans("", "", "rbtU")
_THIN = frozenset(
    {"inspect.py", "functools.py", "threading.py", "contextlib.py", "types.py", "operator.py"}
    # `code.py` compiles and runs the source and file name its caller gives
    # (`InteractiveInterpreter.runsource`): the caller performs it, as with `codeop`.
    | {"copy.py", "copyreg.py", "runpy.py", "codeop.py", "code.py", "abc.py"}
)
_TEST_DIRS = frozenset({"test", "tests", "testing"})
# Frames between a test's own frame and the collector that reports its assertion.
_RUNNER_KINDS = frozenset({"collector", "library", "stdlib", "thin"})
# The twin's loaders, the one file that may hand the hook its plan and ask it for a twin.
_TWIN_LOADER = "/patchheal_twin.py"
_SIGNER = "/patchheal_results.py"
_RANK = {"error": 0, "failed": 1, "passed": 2, "xfailed": 3, "skipped": 4}


def _rank(outcome: str) -> int:
    return _RANK.get(outcome, 0)


def dumps(value: Any) -> str:
    """JSON with sorted keys, from builtins and `_json`'s C encoder only. Exact types only:
    `isinstance`, `str()` or a hash of a step-made object would run the step's code here."""
    kind = type(value)
    if kind is str:
        return encode_basestring_ascii(value)
    if value is True or value is False or value is None:
        return "true" if value is True else "false" if value is False else "null"
    if kind is int or kind is float:
        return int.__repr__(value) if kind is int else float.__repr__(value)
    if kind is dict:
        items = sorted(((k, v) for k, v in dict.items(value) if type(k) is str), key=_first)
        return "{" + ", ".join(f"{dumps(k)}: {dumps(v)}" for k, v in items) + "}"
    if kind is list or kind is tuple:
        return "[" + ", ".join(dumps(v) for v in value) + "]"
    return "null"


_INNER = bytes(x ^ 0x36 for x in range(256))
_OUTER = bytes(x ^ 0x5C for x in range(256))


def hmac_sha256(key: bytes, message: bytes) -> str:
    """HMAC-SHA256 (RFC 2104) from the bound C hash alone: `hmac` is a module the step can
    patch, and whatever this calls with the key could keep it."""
    if len(key) > 64:
        key = sha256(key).digest()
    key = key.ljust(64, b"\0")
    inner = sha256(key.translate(_INNER) + message).digest()
    return sha256(key.translate(_OUTER) + inner).hexdigest()


def _first(pair: tuple[str, Any]) -> str:
    return pair[0]


def name_of(code: Any) -> str:
    """A code object's file name as an exact str (a str subclass could run code when hashed)."""
    name = code.co_filename
    return name if type(name) is str else "<not a str>"


def is_test_path(rel: str) -> bool:
    """A test file by name: test_*.py, *_test.py, conftest.py, or under a tests directory."""
    parts = rel.split("/")
    name = parts[-1]
    return (
        name.startswith("test_")
        or name.endswith("_test.py")
        or name == "conftest.py"
        or any(p in _TEST_DIRS for p in parts[:-1])
    )


def make_twin_planner(make_plan: Any, keep_originals: Any) -> Any:
    """`files` -> the twin's plan (patchheal_twin_plan.make_plan), given only C functions
    bound here and posix calls: nothing it runs with the plan is the step's to replace."""

    def resolve(path: str) -> str:
        return _resolve(path if path.startswith("/") else f"{getcwd()}/{path}")

    def planner(files: Any) -> Any:
        return make_plan(files, resolve, sha256, keep_originals)

    return planner


def make_hook(
    token: bytes,
    results: str,
    root: str,
    collectors: str,
    stdlib: str,
    runner_watch: Any = None,
    planner: Any = None,
    is_runner_module: Any = None,
    plugin_watch: Any = None,
) -> Any:
    """The audit hook, closed over the token (patchheal_monitor's docstring); `runner_watch`
    names the runner objects that changed (patchheal_runnerwatch.make_runner_watch), and
    `is_runner_module` tells a runner module's name (the same module's); `plugin_watch`
    lists what pytest runs that is not its own (patchheal_pluginwatch.make_plugin_watch);
    `planner` makes the twin's plan from the files the twin's collector hands over
    (make_twin_planner), kept here alone."""
    import sys

    # Each thread's frame finder (frame_finder): `next()` on it gives the frame that called
    # it, the hook's own, whose `f_back` raised the event: no `sys._getframe`, an audited call
    # that came back into the hook at every event it looked at (3,500 instructions each).
    raisers: dict[int, Any] = {}
    modules = sys.modules
    function_type = type(make_hook)
    code_type = type(make_hook.__code__)
    class_dict = type.__dict__["__dict__"].__get__
    class_qualname = type.__dict__["__qualname__"].__get__
    values_of = methodcaller("values")
    module_type = type(sys)
    module_dict = vars(module_type)["__dict__"].__get__  # C's member getter
    kinds: dict[str, tuple[str, str]] = {}
    busy: set[int] = set()
    seen: set[tuple[str, str, int, str]] = set()
    per_source: dict[tuple[str, str], int] = {}
    events: list[dict[str, Any]] = []
    log: list[int] = []
    log_name = f"monitor-{getpid()}-{urandom(4).hex()}.log"
    proc_dev = stat("/proc/self").st_dev if _exists("/proc/self") else -1
    tmp = environ.get(b"TMPDIR", b"/tmp").decode(errors="surrogateescape")
    anchors = open_anchors((tmp, root))  # one descriptor per folder, for both lookups
    anchored_stat = make_anchored_stat(anchors)
    # Where a run may keep files of its own (KEPT_OUTSIDE), links resolved.
    own_places = tuple({_resolve(p).rstrip("/") + "/" for p in (root, tmp) if p.startswith("/")})
    in_own_place = make_anchored_inside(anchors)
    fd_target = make_fd_target()
    # A folder the step's user cannot stat gives no identity: it must not stand for every
    # path that does not exist yet (a new temp file), so it is left out.
    guarded = {_ident(p) for p in (results, _parent(results), collectors) if p} - {_NO_IDENT}
    # What the test runner reported, as it happened, and what the tests' own frames showed:
    # kept here, in the closure, never in a module the step can reach (docs/verdict.md).
    current = [""]  # the tests running, innermost last (a test may run a suite inside it)
    running_item: list[Any] = [None]  # pytest's item of the test running, as pytest gave it
    first_item: list[Any] = []  # the first test's item: its plugin manager is the session's
    streamed: dict[str, str] = {}
    evidence: dict[str, set[str]] = {}
    evidence_kinds: set[str] = set()
    held: dict[str, set[str]] = {}  # test -> 'file:line' of impossible assertions that held
    sources: dict[str, set[str]] = {}
    # The twin's plan: a function of (path, bytes), or None; handed over once, at start-up.
    twin_plan: list[Any] = []
    # Whose code reads are watched (twinchannel.py, "reads"): every test file's ("all",
    # also when no blob came), the named files' ("named": `named`), or none ("none").
    reads = ["all"]
    named: list[str] = []
    named_files: dict[str, bool] = {}
    code_getters = _code_getters(function_type)
    # The code objects of collector, import-system, stdlib and library frames the walk for
    # a test's reader went past: pytest reads tests' code some 60,000 times in click's suite,
    # from 30 frames deep, and a set of ids is the cheapest way past them.
    runner_codes: set[int] = set()
    runner_code_objects: list[Any] = []
    # An object's address as `object.__hash__` gives it: unique among live objects, like
    # `id()`, which raises an audit event of its own (one more call of this hook per frame).
    address_of = object.__hash__
    # (code run, globals and instruction of the call that ran it) of each `exec` that told
    # nothing: the same code object run again from the same call site of the same library
    # or stdlib module tells nothing again. pytest evaluates one compiled mark expression
    # per test it collects (33,016 times in click's suite, a quarter of the hook's time
    # there). The call site is the caller's `f_globals` and `f_lasti`, which CPython does
    # not audit, where its `f_code` is an audit event of its own (one more call of this hook
    # per `exec`). Code runs with a library module's globals only if it was written in that
    # module or made with them by `exec`/`compile`/`function.__new__`, each an event seen
    # here when the step's code does it. The code objects and globals are held, so that no
    # address is ever another object's.
    quiet_execs: set[tuple[int, int, int]] = set()
    quiet_exec_targets: set[int] = set()  # the first of each key: most execs need no frame
    quiet_exec_codes: list[Any] = []

    def kind(filename: str) -> tuple[str, str]:
        """(kind, path shown) of a code object's file: project, test, collector, stdlib,
        thin (a stdlib wrapper walked past), library (site-packages), other."""
        known = kinds.get(filename)
        if known is not None:
            return known
        found = ("other", filename)
        if filename.startswith("<frozen importlib") or filename == "<frozen runpy>":
            found = ("thin", filename)
        elif filename.startswith("<frozen "):
            found = ("stdlib", filename)
        elif filename.startswith(collectors + "/"):
            found = ("collector", filename.rpartition("/")[2])
        elif "/site-packages/" in filename or "/dist-packages/" in filename:
            found = ("library", filename)
        elif filename.startswith(stdlib + "/"):
            rel = filename[len(stdlib) + 1 :]
            thin = rel in _THIN or rel.startswith("importlib/")
            found = ("thin" if thin else "stdlib", rel)
        elif filename.startswith(root + "/") or not filename.startswith(("/", "<")):
            # A relative name (compile's) is taken as relative to the project root.
            rel = filename[len(root) + 1 :] if filename.startswith(root + "/") else filename
            found = ("test" if is_test_path(rel) else "project", rel)
        kinds[filename] = found
        return found

    def performer(frame: Any, name: str = "") -> tuple[str, str, int]:
        """The nearest frame past thin wrappers: (kind, file, line); ('none', '', 0) if none.
        `name`: the first frame's file, when the caller has read it (each `f_code` read is an
        audit event of its own, one more call of this hook)."""
        while frame is not None:
            found, shown = kind(name or name_of(frame.f_code))
            if found != "thin":
                return found, shown, frame.f_lineno
            frame, name = frame.f_back, ""
        return "none", "", 0

    def reporter(frame: Any, name: str) -> tuple[str, str, int]:
        """Who raised a test event: the performer past the collectors' frames (`name`: the
        first frame's file)."""
        while frame is not None and kind(name)[0] == "collector":
            frame = frame.f_back
            name = name_of(frame.f_code) if frame is not None else ""
        return performer(frame, name)

    def writer(frame: Any) -> tuple[str, str, int]:
        """The code a file is written for: the first frame past thin wrappers, the stdlib
        and libraries (`pathlib`'s `write_text`, a library's `save(path)` called by it)."""
        while frame is not None:
            found, shown = kind(name_of(frame.f_code))
            if found not in ("thin", "stdlib", "library"):
                if found == "other" and frame.f_back is None:
                    break  # a console script (`bin/pytest --junitxml=...`), `python -c`
                return found, shown, frame.f_lineno
            frame = frame.f_back
        return "none", "", 0

    def kept_outside(path: Any, dir_fd: Any = None) -> str:
        """`path` resolved when it is outside the worktree and the run's temporary folder and
        could keep a mark for the next run, else ''. Links are resolved: a link the run made
        in the worktree (removed before the next run) may lead to a file that stays."""
        if type(path) is bytes:
            path = path.decode(errors="surrogateescape")
        if type(path) is not str or not path:
            return ""  # a descriptor: what it names was opened, and seen, by name before
        if not path.startswith("/"):
            folder = f"/proc/self/fd/{dir_fd}" if type(dir_fd) is int and dir_fd >= 0 else ""
            path = f"{folder or getcwd()}/{path}"
        if in_own_place(path):
            return ""
        real = _resolve(path)
        if (real + "/").startswith(own_places):
            return ""
        # A process's own files and devices keep nothing between runs; `/dev/shm` does.
        if real.startswith(("/proc/", "/dev/")) and not real.startswith("/dev/shm/"):
            return ""
        return real

    def written_outside(path: Any, dir_fd: Any, caller: Any) -> None:
        # The path first: a few `lstat`s, where the writer's walk reads every frame of a
        # deep stack (a library's write goes to the bottom), and most writes are the
        # worktree's or the temporary folder's.
        where = kept_outside(path, dir_fd)
        if where:
            who = writer(caller)
            if who[0] in ("project", "other"):
                note(KEPT_OUTSIDE, who, where)

    def first_non_stdlib(frame: Any) -> str:
        while frame is not None:
            found = kind(name_of(frame.f_code))[0]
            if found not in ("thin", "stdlib"):
                return found
            frame = frame.f_back
        return "none"

    def importer(frame: Any) -> tuple[str, str, int] | None:
        """The code a test module is imported, or a test's code read, for: the first frame
        past the collectors, the import system, the stdlib and libraries (which read and
        import tests for the runner). None when that is a test file's or none: the runner's
        own doing. A project's entry script at the bottom of the stack (`runtests.py`, a
        console script) is named as any file; the verdict weighs only a file the candidate
        changed that did not do the same at reproduction (verdict/tripwire.py)."""
        while frame is not None:
            code = frame.f_code
            if address_of(code) in runner_codes:  # the runner's, seen before: no lookup
                frame = frame.f_back
                continue
            found, shown = kind(name_of(code))
            if found == "test":
                return None
            if found in ("project", "other"):
                if found == "other" and frame.f_back is None:
                    return None  # a console script (`bin/pytest`), `python -c`
                return found, shown, frame.f_lineno
            runner_codes.add(address_of(code))
            runner_code_objects.append(code)  # held: its address is never another code's
            frame = frame.f_back
        return None

    def write_line(event: dict[str, Any]) -> None:
        if not (token and results):
            return
        if not log:
            flags = O_WRONLY | O_CREAT | O_EXCL | O_APPEND
            log.append(os_open(f"{results}/{log_name}", flags, 0o644))
        line = dumps({"file": log_name, "seq": len(events) - 1, "event": event})
        mac = hmac_sha256(token, line.encode())
        os_write(log[0], (dumps({"line": line, "mac": mac}) + "\n").encode())

    def note(op: str, who: tuple[str, str, int], detail: str, target: str = "") -> None:
        key = (op, who[1], who[2], detail)
        if key in seen:
            return
        if not target:
            source = (op, who[1])
            count = per_source.get(source, 0)
            if count >= MAX_PER_SOURCE:
                return
            per_source[source] = count + 1
        seen.add(key)
        if len(events) >= MAX_EVENTS:
            if events[-1].get("op") != LOG_FULL:
                full = {"op": LOG_FULL, "kind": "none", "file": "", "line": 0, "detail": ""}
                full["target"] = "monitor"
                events.append(full)
                try:  # noqa: SIM105 (the hook imports nothing: contextlib's code would run here)
                    write_line(full)
                except OSError:
                    pass
            return
        event = {"op": op, "kind": who[0], "file": who[1], "line": who[2], "detail": detail[:200]}
        if target:
            event["target"] = target
        events.append(event)
        try:
            write_line(event)
        except OSError:
            return

    def collectors_replaced() -> None:
        """Note each function global of a collector module whose code is no longer the
        collectors' (a project's `_record` wrapper forcing "passed" into the outcomes)."""
        for module_name in COLLECTOR_MODULES:
            module = modules.get(module_name)
            if type(module) is not module_type:
                continue
            for key, value in list(dict.items(module.__dict__)):
                if type(key) is not str or type(value) is not function_type:
                    continue
                found, shown = kind(name_of(value.__code__))
                if found not in ("collector", "stdlib", "library"):
                    where = (found, shown, value.__code__.co_firstlineno)
                    what = f"{module_name}.{key}"
                    note("collector internals replaced", where, what, "collectors")

    def blame(value: Any) -> tuple[str, str, int]:
        """Where a replacement's code was written: (kind, file, line)."""
        kind_of = type(value)
        if kind_of is property:
            value = value.fget
        elif kind_of is classmethod or kind_of is staticmethod:
            value = value.__func__
        kind_of = type(value)
        if kind_of is not function_type and not issubclass(kind_of, type):
            value, kind_of = kind_of, type  # an instance: where its class was written
        if issubclass(kind_of, type):  # a class: where its first own function was written
            # (C's getter for its dict and `values()` of the exact mapping proxy: no code of
            # the class runs here)
            own = [v for v in values_of(class_dict(value)) if type(v) is function_type]
            value = own[0] if own else None
        if type(value) is not function_type:
            return "none", "", 0
        code = value.__code__
        return (*kind(name_of(code)), code.co_firstlineno)

    def runner_changed(full: bool, item: Any = None) -> None:
        if runner_watch is None:
            return
        for label, value in runner_watch(full, item):
            who = blame(value)
            # A builtin swapped by the tests or a library (`monkeypatch.setattr(builtins,
            # "input", ...)`, a mock of `open`) is theirs to swap: only code of the project's
            # can answer wrong once and put the builtin back.
            if label.startswith("builtins.") and who[0] not in ("project", "other"):
                continue
            note("runner object changed", who, label, "runner")

    def extensions_checked(item: Any, with_hooks: bool) -> None:
        """Note what pytest runs for `item` that is not its own and is the project's or a
        conftest's code (patchheal_pluginwatch.py): on a protected target, so
        that only what the baseline run did not have taints."""
        if plugin_watch is None or item is None or len(current) > 2:
            return  # (a test that runs pytest inside it: its own tests' items are not this run's)
        extensions, code_digest = plugin_watch
        for label, code, value in extensions(item, with_hooks):
            test_function = label == "the test function"
            if code is None:
                who, name, digest = ("none", "", 0), "", class_qualname(type(value))
            else:
                found, shown = kind(name_of(code))
                if found in _RUNNER_KINDS:
                    continue
                if test_function and found == "test" and not shown.endswith("conftest.py"):
                    continue  # a test module's: the test itself, or one a test class inherits
                who, name, digest = (found, shown, 0), code.co_name, code_digest(code)
            on_item = test_function or label.startswith("item.")
            op = "test item changed" if on_item else "hook on test outcomes"
            note(op, who, f"{label}: {name} {digest}", "runner")

    def source_hash(path: str) -> str:
        """sha256 of a test file's bytes as they are now (C calls only)."""
        try:
            fd = os_open(path, O_RDONLY)
        except OSError:
            return ""
        try:
            digest = sha256()
            while chunk := os_read(fd, 1 << 16):
                digest.update(chunk)
            return digest.hexdigest()
        finally:
            os_close(fd)

    def seen_source(filename: str, shown: str) -> None:
        hashes = sources.setdefault(shown, set())
        if len(hashes) < 4:
            hashes.add(source_hash(filename))

    def test_event(args: tuple[Any, ...], caller: Any, raiser: str) -> None:
        """A collector streams a test's start or outcome the moment the runner reports it
        (`raiser`: the file of the frame that raised the event)."""
        what, test_id, outcome = args
        if type(what) is str and what == "item":
            # pytest's item of the test about to run, and its start: one event, not two.
            running_item[0] = outcome
            what, outcome = "start", ""
        if type(what) is not str or type(test_id) is not str or type(outcome) is not str:
            return
        if what == "start" and running_item[0] is not None and not first_item:
            # Every conftest is loaded by the first test: the hooks, once (and at the end).
            first_item.append(running_item[0])
            extensions_checked(running_item[0], True)
        if what == "evidence":
            evidence_kinds.add(test_id)
            return
        if what in ("called", "report"):  # a test's body done; a setup or teardown failed
            runner_changed(False, running_item[0])
            extensions_checked(running_item[0], False)
        elif what == "ready":
            runner_changed(True)
        if what == "start":
            current.append(test_id)
        elif what == "stop":
            running_item[0] = None  # a test that ran pytest inside it: not the inner item
            if len(current) > 1 and current[-1] == test_id:
                current.pop()  # a test that ran other tests inside it goes on as itself
        elif what == "outcome":
            before = streamed.get(test_id)
            streamed[test_id] = (
                outcome if before is None or _rank(outcome) < _rank(before) else before
            )
        who = reporter(caller, raiser)
        if who[0] in ("project", "other"):
            note("test outcome reported by this file", who, test_id)

    def assert_event(caller: Any) -> None:
        """An assertion passed: evidence only when the frame that ran it is a test file's, and
        the call came straight from it (pytest's rewritten assert, or a TestCase helper)."""
        callee, frame = None, caller
        while frame is not None and kind(name_of(frame.f_code))[0] in _RUNNER_KINDS:
            callee, frame = frame, frame.f_back
        if frame is not None and kind(name_of(frame.f_code))[0] == "project":
            # pytest calls the assertion-pass hook through pluggy: when the project is on
            # that path (pluggy's own checkout) its frames sit between the hook and the
            # rewritten assert. Then only pytest's own call counts, and only from the frame
            # that called it (checked below): project code calling it is not a test's line.
            above = frame
            while above is not None and not (
                name_of(above.f_code).endswith(_REWRITE)
                and above.f_code.co_name == "_call_assertion_pass"
            ):
                above = above.f_back
            if above is not None:
                callee, frame = above, above.f_back
        if frame is None or callee is None:
            return
        found, shown = kind(name_of(frame.f_code))
        inner = name_of(callee.f_code)
        rewritten = inner.endswith(_REWRITE) and callee.f_code.co_name == "_call_assertion_pass"
        if found != "test" or not (rewritten or inner.endswith("/patchheal_unittest.py")):
            return
        lines = evidence.setdefault(current[-1], set())
        if len(lines) < MAX_LINES_PER_TEST:
            lines.add(f"{shown}:{frame.f_lineno}")
        if shown not in sources:
            seen_source(name_of(frame.f_code), shown)
        if rewritten and frame.f_code.co_flags & CO_OPTIMIZED:
            # pytest's explanation of a passing assert calls locals(), whose snapshot stays
            # on the frame and keeps every local alive past its `del` (a test that checks
            # an object is collected fails): drop it, as a plain run never made it. Every
            # value in it is still bound in the frame, so nothing is freed here.
            cached = frame.f_locals
            if type(cached) is dict:
                dict.clear(cached)

    def is_held_marker(obj: Any) -> bool:
        """The function an impossible assertion defines when it held, by name alone (an
        exact function: its `__name__` is the C attribute); held_event checks its code."""
        return type(obj) is function_type and obj.__name__ == IMPOSSIBLE_HELD

    def held_event(marker: Any, caller: Any) -> None:
        """An impossible assertion of the twin held (patchheal_twin_kept.py): kept for the
        running test when the marker's code and the frame that read it are the test file's,
        at the same line."""
        if caller is None or not is_held_marker(marker):
            return
        code = marker.__code__  # its own audit event comes back while this one is busy
        found, shown = kind(name_of(code))
        if found != "test" or name_of(caller.f_code) != name_of(code):
            return
        lines = held.setdefault(current[-1], set())
        if len(lines) < MAX_LINES_PER_TEST:
            lines.add(f"{shown}:{caller.f_lineno}")

    def sign(args: tuple[Any, ...], caller: Any) -> None:
        runner, body, box = args
        if type(runner) is not str or type(body) is not dict or type(box) is not list:
            return
        collectors_replaced()
        runner_changed(True)
        if first_item:  # a plugin registered during the session
            extensions_checked(first_item[0], True)
        fields = {k: v for k, v in dict.items(body) if type(k) is str}
        above = caller
        while above is not None and kind(name_of(above.f_code))[0] == "collector":
            above = above.f_back
        on_stack: set[str] = set()
        frame = above
        while frame is not None:
            found, shown = kind(name_of(frame.f_code))
            if found in ("project", "other"):
                on_stack.add(shown)
            frame = frame.f_back
        entry = performer(above)
        payload = dumps(
            {
                **fields,
                "runner": runner,
                "finished": True,
                "monitor": list(events),
                "signed_by": {"caller": entry[0], "project": sorted(on_stack)[:10]},
                "streamed": dict(streamed),
                "evidence": {t: sorted(lines) for t, lines in dict.items(evidence)},
                "evidence_kinds": sorted(evidence_kinds),
                "held": {t: sorted(lines) for t, lines in dict.items(held)},
                "sources": {f: sorted(h) for f, h in dict.items(sources)},
            }
        )
        box.append((payload, hmac_sha256(token, payload.encode())))

    def code_event(event: str, args: tuple[Any, ...], caller: Any) -> None:
        ran_by = caller.f_code if caller is not None else None
        if event in ("compile", "code.__new__"):
            target = args[1] if len(args) > 1 else ""
        else:
            target = name_of(args[0]) if type(args[0]) is code_type else ""
        target = target if type(target) is str else "<not a str>"
        first = name_of(ran_by) if ran_by is not None else ""
        importing = first.startswith("<frozen imp")
        target_kind, shown = kind(target)
        who = performer(caller, first)
        if (
            event == "exec"
            and ran_by is not None
            and target_kind not in ("test", "collector")
            and kind(first)[0] in ("library", "stdlib")  # the caller itself, none walked past
            and not importing
        ):
            # Nothing below notes it, whatever the line: told nothing now and every time.
            # (Capped: a library that runs fresh code each time, a template engine's, would
            # only fill it.)
            space = caller.f_globals
            if len(quiet_exec_codes) < MAX_QUIET_EXECS and type(space) is dict:
                quiet_execs.add((address_of(args[0]), address_of(space), caller.f_lasti))
                quiet_exec_targets.add(address_of(args[0]))
                quiet_exec_codes.append((args[0], space))
            return
        # The import system loading a collector from its own (read-only) file is no forgery:
        # Airflow's collector is imported lazily, from a frame with no file above it.
        if (
            target_kind == "collector"
            and not importing
            and who[0] not in ("collector", "stdlib", "library")
        ):
            note(f"{event} under a collector's name", who, shown, "collectors")
            raise PermissionError(_EACCES, "patchheal: code under a collector's file name")
        if importing:  # the import system compiling or running a module
            if target_kind == "test":
                by = importer(caller)
                if by is not None:
                    note(TEST_IMPORTED, by, shown)
            return
        if target_kind == "test" and type(target) is str:
            # A test module compiled: the runner must be as it was (its assert rewriter), and
            # the file's bytes are the ones its evidence will be judged against.
            runner_changed(True)
            seen_source(target, shown)
        if target_kind == "test" and who[0] not in ("test", "library", "stdlib"):
            note(f"{event} under a test file's name", who, shown, "test file")
        elif who[0] in ("project", "other"):
            note(event, who, shown)

    def plan_event(args: tuple[Any, ...]) -> None:
        """The twin's collector hands over, once, the planned files (none outside the twin),
        the named test files and which tests' code reads to watch."""
        if twin_plan or len(args) != 3:
            return
        files, wanted, mode = args
        twin_plan.append(planner(files) if planner is not None else None)
        if type(wanted) is list:
            named.extend(w for w in wanted if type(w) is str and w)
        if type(mode) is str and mode in ("all", "named", "none"):
            reads[0] = mode

    def watched_read(filename: str) -> str:
        """The path shown for a code object's file whose reads are watched, else ''."""
        found, shown = kind(filename)
        if found != "test" or reads[0] == "none":
            return ""
        if reads[0] == "all":
            return shown
        hit = named_files.get(filename)
        if hit is None:
            real = _resolve(filename) if filename.startswith("/") else shown
            hit = any(
                path == rel or path.endswith("/" + rel) for rel in named for path in (real, shown)
            )
            named_files[filename] = hit
        return shown if hit else ""

    def twin_event(args: tuple[Any, ...], caller: Any) -> None:
        """A loader asks for a protected module's twin (patchheal_twin.py), in every run: the
        runner is checked first (a replaced `ast` or pytest function would see the twin's
        tree), an import for code of the project's is named, and the twin's tree, in the
        twin only, goes into the box."""
        if len(args) != 3:
            return
        path, data, box = args
        if type(path) is not str or type(data) is not bytes or type(box) is not list:
            return
        runner_changed(True)
        by = importer(caller)
        if by is not None:
            note(TEST_IMPORTED, by, kind(path)[1])
        made = twin_plan[0](path, data) if twin_plan and twin_plan[0] is not None else None
        if made is not None:
            list.append(box, made)

    def code_read_event(obj: Any, caller: Any) -> None:
        """A code object read (`f.__code__`, a generator's `gi_code`): a test's, read for
        code of the project's, is named (a twin's test has other code than the file's)."""
        # Exact types only: an attribute of a step-made object would run its code here.
        read = code_getters.get(type(obj))
        code = read(obj) if read is not None else None
        if type(code) is not code_type:
            return
        shown = watched_read(name_of(code))
        if not shown:
            return
        by = importer(caller)
        if by is not None:
            note(TEST_CODE_READ, by, shown)

    def setattr_event(args: tuple[Any, ...], caller: Any) -> None:
        obj, name = args[0], args[1]
        if type(name) is str and name == "__class__":  # the type first: `==` of a str subclass
            # would run the step's code here
            swapped = runner_object(obj)
            if swapped:
                note("runner object changed", performer(caller), f"{swapped}.__class__", "runner")
            return
        if type(obj) is not function_type or type(name) is not str:
            return
        if name not in ("__code__", "__defaults__", "__kwdefaults__"):
            return
        target_kind, shown = kind(name_of(obj.__code__))
        who = performer(caller)
        qualname = obj.__qualname__
        what = f"{qualname if type(qualname) is str else '?'}.{name} set"
        if target_kind == "test" and who[0] not in ("test", "library"):
            note(what, who, shown, "test file")
            raise PermissionError(_EACCES, "patchheal: a test function's body replaced")
        if who[0] in ("project", "other", "none"):
            note(what, who, shown)

    def runner_object(obj: Any) -> str:
        """What `obj` is, when it is one of the test runner's modules, classes or objects (an
        instance of a runner class: a pytest item, a report), else ''. Assigning its
        `__class__` (audited, unlike any other attribute) gives it another class's
        behaviour, which no snapshot of the runner's namespaces shows: a module whose
        attributes answer otherwise (`unittest.SkipTest`), a class with another metaclass,
        an item with another `ihook`. C getters and exact dicts only."""
        if is_runner_module is None:
            return ""
        kind_of = type(obj)
        if issubclass(kind_of, module_type):  # not isinstance: it reads `__class__`
            space = module_dict(obj)
            name = dict.get(space, "__name__") if type(space) is dict else None
            runner = type(name) is str and is_runner_module(name) and name != "builtins"
            return f"module {name}" if runner else ""
        cls = obj if issubclass(kind_of, type) else kind_of
        owner = class_dict(cls).get("__module__")
        if type(owner) is not str or owner == "builtins" or not is_runner_module(owner):
            return ""
        qualname = class_qualname(cls)
        shown = f"{owner}.{qualname if type(qualname) is str else '?'}"
        return shown if cls is obj else f"a {shown} object"

    def guarded_path(path: Any, dir_fd: Any, itself: bool) -> bool:
        """Whether `path` (relative to `dir_fd`) is in a directory the step must not write
        (the results directory or its parent, the collectors), or, with `itself`, is one."""
        if type(path) is int:
            try:
                path = fd_target(path)
            except OSError:
                return False
            itself = False  # an open file is no directory the operation could change
        if type(path) is bytes:
            path = path.decode(errors="surrogateescape")
        if type(path) is not str:
            return False
        if type(dir_fd) is int and dir_fd >= 0 and not path.startswith("/"):
            path = f"/proc/self/fd/{dir_fd}/{path}"
        return ident_of(_parent(path)) in guarded or (itself and ident_of(path) in guarded)

    def ident_of(path: str) -> tuple[int, int]:
        return _ident(path, anchored_stat)

    def proc_secret(path: Any, no_link: bool = False) -> str:
        """The resolved path when `path` is a process's environ or memory, else ''.
        `no_link`: the operation does not follow a link in the last part of the path."""
        if type(path) is bytes:
            path = path.decode(errors="surrogateescape")
        if type(path) is not str:
            return ""
        if not (path.rpartition("/")[2] in ("environ", "mem") or path.startswith("/proc")):
            if no_link:
                return ""
            try:
                if anchored_stat(path).st_dev != proc_dev:
                    return ""
            except (OSError, ValueError):
                return ""
        real = _resolve(path if path.startswith("/") else f"{getcwd()}/{path}")
        last = real.rpartition("/")[2]
        return real if real.startswith("/proc/") and last in ("environ", "mem") else ""

    def open_event(args: tuple[Any, ...], caller: Any) -> None:
        path, mode, flags = args[0], args[1], args[2]
        # Only a link in the last part of the path can lead a name that is neither under
        # /proc nor `environ`/`mem` to a process's environment or memory, and the lookup in
        # proc_secret is for that link alone. An exclusive create (O_EXCL does not follow a
        # link and opens nothing that exists), an O_NOFOLLOW open (refuses a link there) and
        # an O_DIRECTORY open (those are files) cannot reach one that way: a lock file's
        # create-and-read loop (filelock's) pays for no lookup here.
        no_link = type(flags) is int and bool(
            (flags & O_CREAT and flags & O_EXCL) or flags & (O_NOFOLLOW | O_DIRECTORY)
        )
        secret = proc_secret(path, no_link)
        if secret:
            note("read of a process's environment or memory", performer(caller), secret, "proc")
            raise PermissionError(_EACCES, f"patchheal: reading {secret} is refused")
        writing = (type(mode) is str and mode.translate(_READ_MODE) != "") or (
            type(flags) is int and flags & _WRITE_FLAGS
        )
        if writing and guarded_path(path, None, False) and first_non_stdlib(caller) != "collector":
            note("write into the results or collectors", performer(caller), str(path), "results")
            raise PermissionError(
                _EACCES, "patchheal: the results directory is the collectors' own"
            )
        if writing:
            written_outside(path, None, caller)

    def path_event(event: str, args: tuple[Any, ...], caller: Any) -> None:
        for at, fd_at in PATHS[event]:
            dir_fd = args[fd_at] if 0 <= fd_at < len(args) else None
            if at < len(args) and guarded_path(args[at], dir_fd, event in CHANGE_ITSELF):
                if first_non_stdlib(caller) == "collector":
                    return
                shown = args[at] if type(args[at]) is str else "a path"
                note(f"{event} in the results or collectors", performer(caller), shown, "results")
                raise PermissionError(
                    _EACCES, "patchheal: the results directory is the collectors' own"
                )
        if event in MAKES:
            at, fd_at = PATHS[event][-1]  # the path made or changed (a rename's or link's new one)
            if at < len(args):
                written_outside(args[at], args[fd_at] if 0 <= fd_at < len(args) else None, caller)

    def trace_event(event: str, caller: Any) -> None:
        who = performer(caller)
        if who[0] in ("none", "stdlib"):
            # threading starts a thread's trace/profile hook itself: blame the hook's file.
            threading = modules.get("threading")
            hook_name = "_trace_hook" if event == "sys.settrace" else "_profile_hook"
            space = threading.__dict__ if type(threading) is module_type else {}
            function = dict.get(space, hook_name)
            if type(function) is function_type:
                found, shown = kind(name_of(function.__code__))
                who = (found, shown, function.__code__.co_firstlineno)
        if who[0] in ("project", "other", "test"):
            note(TAMPER[event], who, "")

    def only_from(caller: Any, files: Any, op: str, event: str, who: str) -> str:
        """Refuse (and note, on the collectors) an event of patchheal's own that was not
        raised from one of the collector `files` (a file name's end, or a tuple of them)."""
        raiser = name_of(caller.f_code) if caller is not None else ""
        if not (kind(raiser)[0] == "collector" and raiser.endswith(files)):
            note(op, performer(caller, raiser), event, "collectors")
            raise PermissionError(_EACCES, f"patchheal: only {who}")
        return raiser

    def handle(event: str, args: tuple[Any, ...], caller: Any) -> None:
        if event == "object.__getattr__" and args[1] in CODE_ATTRS:  # the most frequent
            if is_held_marker(args[0]):
                held_event(args[0], caller)
            else:
                code_read_event(args[0], caller)
        elif event in (ASSERT_EVENT, TEST_EVENT):
            raiser = only_from(
                caller, _REPORTERS, "forged test report", event, "the collectors report tests"
            )
            if event == ASSERT_EVENT:
                assert_event(caller)
            elif len(args) == 3:
                test_event(args, caller, raiser)
        elif event in (PLAN_EVENT, TWIN_EVENT):
            only_from(caller, _TWIN_LOADER, "forged twin request", event, "the twin's loaders ask")
            if event == PLAN_EVENT:
                plan_event(args)
            else:
                twin_event(args, caller)
        elif event in (SIGN_EVENT, ARMED_EVENT):
            only_from(caller, _SIGNER, "forged sign request", event, "the collectors sign records")
            if event == ARMED_EVENT:
                args[0].append(bool(token and results))
            elif token:
                sign(args, caller)
        elif event == "open":
            open_event(args, caller)
        elif event in PATHS:
            path_event(event, args, caller)
        elif event in CODE:
            code_event(event, args, caller)
        elif event == "object.__setattr__":
            setattr_event(args, caller)
        elif event in ("sys.settrace", "sys.setprofile"):
            trace_event(event, caller)
        elif event in ("marshal.loads", "marshal.load"):
            first = name_of(caller.f_code) if caller is not None else ""
            who = performer(caller, first)
            if not first.startswith("<frozen imp") and who[0] in ("project", "other", "test"):
                note(TAMPER[event], who, event)
        elif event == "sqlite3.connect":  # a database file made or changed in C, no `open`
            database = args[0] if args else None
            if type(database) is bytes:
                database = database.decode(errors="surrogateescape")
            if type(database) is str and database.startswith("file:"):  # a URI
                database = database[5:].partition("?")[0]
            if type(database) is str and database not in ("", ":memory:"):
                written_outside(database, None, caller)
        else:
            who = performer(caller)
            if event.startswith("gc.") and who[0] in ("project", "other", "none"):
                # The object graph leads to everything, this hook's closure included.
                note(TAMPER[event], who, event, "object graph")
                raise PermissionError(
                    _EACCES, "patchheal: walking the object graph from project code"
                )
            if who[0] in ("project", "other", "test"):
                op = "process started" if event in PROCESS else TAMPER[event]
                detail = args[1] if event == "object.__getattr__" else event
                note(op, who, detail)

    def hook(event: str, args: tuple[Any, ...]) -> None:
        # First, the events this hook raises itself while it works (each frame's `f_code`
        # it reads, `sys._getframe`): a third of all the calls in a test run.
        if busy and get_ident() in busy:
            return
        if event not in WATCHED:
            return
        if event == "exec" and quiet_exec(args[0]):
            return
        if event == "object.__getattr__":
            attr = args[1]
            if type(attr) is not str:
                return
            if attr in CODE_ATTRS:
                # A run no twin is beside watches no code read but the held marker's.
                if reads[0] == "none" and not is_held_marker(args[0]):
                    return
            elif attr not in FRAME_ATTRS:
                return
        ident = get_ident()
        busy.add(ident)
        try:
            if event == "object.__getattr__" and not_a_tests_code(args):
                return  # pytest and libraries reading code that is no test's: most reads
            # What raised the event: the hook's own caller (None from C).
            finder = raisers.get(ident) or new_raiser(ident)
            caller = next(finder).f_back
            handle(event, args, caller)
        except PermissionError:
            raise
        except Exception:
            pass
        finally:
            busy.discard(ident)

    def quiet_exec(code: Any) -> bool:
        """An `exec` of a code object that the same call site of library or stdlib code ran
        before, when it told nothing (code_event): checked first, as the commonest event of
        a pytest run (the mark expression, once per test collected), with no event of its
        own, so before the hook marks itself busy."""
        if type(code) is not code_type or address_of(code) not in quiet_exec_targets:
            return False
        finder = raisers.get(get_ident())
        if finder is None:
            return False
        try:
            caller = next(finder).f_back.f_back  # the finder's caller is this, the hook's
            space, at = caller.f_globals, caller.f_lasti
        except Exception:  # no Python frame raised it: looked at in full
            return False
        return (address_of(code), address_of(space), at) in quiet_execs

    def new_raiser(ident: int) -> Any:
        """This thread's frame finder (frame_finder), made the first time it raises an event."""
        finder = frame_finder()
        next(finder)
        finder.send(finder.gi_frame)  # audited: this hook's own event, returned from at once
        raisers[ident] = finder
        return finder

    def not_a_tests_code(args: tuple[Any, ...]) -> bool:
        """A function's `__code__` read whose code is not a watched test file's (its own
        audit event comes back while this one is busy): nothing to look at."""
        obj = args[0]
        if args[1] != "__code__" or type(obj) is not function_type or is_held_marker(obj):
            return False
        return not watched_read(name_of(obj.__code__))

    return hook


def frame_finder() -> Any:
    """A generator that is sent its own frame once, then at each `next()` yields the frame
    that resumed it: a running generator's frame leads back to its caller (`f_back`, which
    CPython does not audit). One per thread: a generator runs in one thread at a time."""
    me = yield None
    while True:
        yield me.f_back


def _code_getters(function_type: type) -> dict[type, Any]:
    """The C getter of the code object of a function, generator, coroutine and asynchronous
    generator, by their exact types (none of them can be subclassed)."""

    def generator() -> Any:
        yield

    async def coroutine() -> None:
        return None

    async def async_generator() -> Any:
        yield

    made = [generator(), coroutine(), async_generator()]
    getters: dict[type, Any] = {function_type: function_type.__dict__["__code__"].__get__}
    try:
        # No zip(): its strict= is Python 3.10's, and this runs on the step's Python.
        for at, attr in enumerate(("gi_code", "cr_code", "ag_code")):
            getters[type(made[at])] = type(made[at]).__dict__[attr].__get__
    finally:
        made[1].close()
    return getters


def make_anchored_stat(opened: list[tuple[str, int, tuple[int, int]]]) -> Any:
    """`stat`, walking a path under one of the `opened` anchors (`open_anchors`) from a
    descriptor of that folder.

    On an engine whose container root is FUSE (fuse-overlayfs, as on this project's
    machines), every absolute path a non-root user looks up starts with a round trip to
    the FUSE daemon for `/`: 10 to 20 µs per `stat`, against 1 to 3 µs from a folder on
    tmpfs or a bind mount (docs/harnesses.md). The step pays that for its own calls; the
    hook should not pay it again for each of them. The result is the same `stat`: the
    walk starts at the same folder (each descriptor's identity is checked before use; a
    step that closes or replaces it gets the plain `stat`), and `..` or an absolute link
    still leads where it would have.
    """

    def anchored_stat(path: str) -> Any:
        if type(path) is str:
            for prefix, fd, ident in opened:
                exact = path == prefix[:-1]
                if exact or path.startswith(prefix):
                    found = _still(fd, ident)
                    if found is None:
                        break
                    if exact:
                        return found
                    return stat(path[len(prefix) :].lstrip("/") or ".", dir_fd=fd)
        return stat(path)

    return anchored_stat


def make_anchored_inside(opened: list[tuple[str, int, tuple[int, int]]]) -> Any:
    """`inside(path)`: True when the absolute `path` is known, from a descriptor of one of
    the `opened` anchors (`open_anchors`), to stay in it once resolved: it is under the
    folder's name and no part of it below the folder is `..` or a link (up to the first
    part that does not exist yet, a file about to be made). False when only a full
    resolution can tell.

    A file written in the worktree or the temporary folder, most of a run's, is told from
    one kept outside without a lookup from `/` per part (make_anchored_stat's reason)."""

    def inside(path: str) -> bool:
        for prefix, fd, ident in opened:
            if not path.startswith(prefix):
                continue
            parts = [p for p in path[len(prefix) :].split("/") if p and p != "."]
            if ".." in parts or _still(fd, ident) is None:
                return False
            walked = ""
            for part in parts:
                walked = f"{walked}/{part}" if walked else part
                try:
                    mode = lstat(walked, dir_fd=fd).st_mode
                except FileNotFoundError:
                    return True  # nothing from here on exists: no link to lead elsewhere
                except OSError:
                    return False
                if mode & 0o170000 == 0o120000:
                    return False
            return True
        return False

    return inside


def open_anchors(anchors: tuple[str, ...]) -> list[tuple[str, int, tuple[int, int]]]:
    """(folder + '/', descriptor, identity) of each absolute folder of `anchors` that opens."""
    opened: list[tuple[str, int, tuple[int, int]]] = []
    for anchor in anchors:
        anchor = anchor.rstrip("/")
        if not anchor.startswith("/") or any(anchor + "/" == a[0] for a in opened):
            continue
        try:
            fd = _high_fd(os_open(anchor, O_RDONLY | O_DIRECTORY))
            found = fstat(fd)
        except OSError:
            continue
        opened.append((anchor + "/", fd, (found.st_dev, found.st_ino)))
    return opened


def make_fd_target() -> Any:
    """`readlink` of `/proc/self/fd/<n>` from a descriptor of this process's `fd` folder
    (not a lookup from `/`, make_anchored_stat's reason). A forked child, whose descriptor
    still names its parent's folder, and a replaced or closed descriptor get the lookup."""
    try:
        folder = _high_fd(os_open("/proc/self/fd", O_RDONLY | O_DIRECTORY))
        found = fstat(folder)
    except OSError:
        folder, found = -1, None
    owner = getpid()
    ident = (found.st_dev, found.st_ino) if found is not None else _NO_IDENT

    def fd_target(fd: int) -> str:
        if folder >= 0 and getpid() == owner and _still(folder, ident) is not None:
            return readlink(str(fd), dir_fd=folder)
        return readlink(f"/proc/self/fd/{fd}")

    return fd_target


def _still(fd: int, ident: tuple[int, int]) -> Any:
    """`fd`'s stat while it still names the folder of identity `ident`, else None (the
    step closed it, or put another file under its number: `dup2` is not audited)."""
    try:
        found = fstat(fd)
    except OSError:
        return None
    return found if (found.st_dev, found.st_ino) == ident else None


def _high_fd(fd: int) -> int:
    """`fd` moved to the first free number from 200 up, out of the way of numbers a
    project's own code may expect to get (its first files open as 3, 4, ...)."""
    for number in range(200, 260):
        try:
            fstat(number)
        except OSError:
            dup2(fd, number, inheritable=False)
            os_close(fd)
            return number
    return fd


def _exists(path: str) -> bool:
    try:
        stat(path)
    except OSError:
        return False
    return True


def _parent(path: str) -> str:
    path = path.rstrip("/")
    head = path.rpartition("/")[0]
    return head or ("/" if path.startswith("/") else ".")


_NO_IDENT = (-1, -1)


def _ident(path: str, look: Any = stat) -> tuple[int, int]:
    try:
        found = look(path)
    except (OSError, ValueError):
        return _NO_IDENT
    return (found.st_dev, found.st_ino)


def _resolve(path: str) -> str:
    """`path` with every symbolic link resolved, from posix calls only (no os.path)."""
    parts = [p for p in path.split("/") if p and p != "."]
    done: list[str] = []
    hops = 0
    while parts:
        part = parts.pop(0)
        if part == "..":
            if done:
                done.pop()
            continue
        candidate = "/" + "/".join([*done, part])
        try:
            is_link = (lstat(candidate).st_mode & 0o170000) == 0o120000
        except OSError:
            is_link = False
        if is_link and hops < 40:
            hops += 1
            target = readlink(candidate)
            if target.startswith("/"):
                done = []
            parts = [p for p in target.split("/") if p and p != "."] + parts
            continue
        done.append(part)
    return "/" + "/".join(done)
