"""The test runner's objects as they were, and which of them changed (run from the monitor's copy).

`patchheal_monitor.install` executes this module's code in the same private
namespace as `patchheal_watch.py`; the monitor's hook calls the checker that
`make_runner_watch` returns. It snapshots EVERY function and class of the
runner's modules (`pytest`, `_pytest.*`, `pluggy.*`, `unittest.*` but
`unittest.mock`, the collectors themselves), and each class's own attributes
that carry behaviour (functions, properties, class and static methods,
nested classes, any descriptor: plain data such as `maxDiff = None` is left
out, projects set it), the first time it sees the module, holding the objects
themselves so that no identity is ever reused. Like the hook, it touches the
step's objects only through exact-type checks and C functions: `isinstance`
or a hash of a step-made object would run the step's code inside the hook. A later check names every
entry that is no longer the object it was, and every behaviour added to a
runner class (`TestReport.passed = property(...)` shadowing the base's).

When: once a test, when its body is done and before its outcome is made
(patchheal_pytest.py's call wrappers, patchheal_unittest.py's
`TestCase._callTestMethod` and `_Outcome.testPartExecutor`), the moment a
phase raises, at test-module compile time and when a record is signed
(docs/verdict.md, "Outcomes the step cannot rewrite").

Cost: CPython gives every dict a version tag that any change to it replaces
(PEP 509's `ma_version_tag`; the probe passes on CPython 3.9 to 3.13), which no code
can set back without `ctypes`, an audited operation. Where a probe at install shows this
Python keeps one, a check reads the tag of each namespace watched (a module's
dict, a class's own dict) into one bytes object, in C, and compares it with the
last check's: some 170 instructions a namespace, where comparing every value
cost 270 a value (a namespace holds 13 on average). So every namespace is
checked at every check. Only the namespaces whose tag moved are then compared
entry by entry. Without the tags (a Python where the probe fails), a check
compares, in C and by identity, every value of the group's namespaces with what
they held at the last check; the modules a test's outcome goes through are
checked at every test, pytest's, pluggy's and the pytest collector's for every
test, unittest's (with the unittest collector and the classes of pytest's
unittest plugin) only for a test that is not a plain pytest function, since
only such a test's outcome goes through them, and the rest one sixteenth at a
time in rotation.
"""

from __future__ import annotations

from _operator import getitem, is_, methodcaller
from itertools import chain
from typing import Any

# Where a dict keeps its version tag: after the object header and `ma_used`.
_TAG_SIZE = 8

# `ast` with them: pytest's assertion rewriter runs on it, and so does the twin's plan in the
# monitor's hook (patchheal_twin_plan.py), which a replaced node class would see.
RUNNER_ROOTS = frozenset({"pytest", "_pytest", "pluggy", "unittest", "ast"})
# The names the runner's code looks up at run time that are not its own (`isinstance`,
# `len`, `reversed`): a body that swaps one for a function that answers wrong once and puts
# the real one back (pluggy's call loop losing the body's error) is seen at the check the
# moment the body raised, as a swapped runner function is. Only the module's own entries:
# its classes are C types, which no code can change.
BUILTINS = "builtins"
# A mocking library, not a runner: tests patch through it, and it patches nothing of the run.
NOT_RUNNER = ("unittest.mock",)
# The modules a recorded outcome goes through: checked at every test. (pytest's node and
# collection classes, the terminal, the assertion rewriter, ... are the rest: one slice
# of them at every test in rotation, all of them at each test module's compile and at
# the end.)
CORE = frozenset(
    {
        "_pytest.runner",
        "_pytest.reports",
        "_pytest.outcomes",
        "_pytest.skipping",
        "_pytest.unittest",
        "pluggy._callers",
        "pluggy._execution",  # the call loop since pluggy 1.6 (`_callers` re-exports it)
        "pluggy._hooks",
        "pluggy._result",
        "unittest",  # `unittest.SkipTest`, which pytest reads for every test's report
        BUILTINS,
    }
)
# On the outcome path of a unittest test only (under unittest, or a TestCase under pytest):
# checked at a test's report unless the test is a plain pytest function. A class defined in
# one of these modules, or in pytest's unittest plugin, is checked with them, wherever its
# name is bound (`unittest.TestCase` is `unittest.case.TestCase`).
UNITTEST_PATH = frozenset({"unittest.case", "unittest.result", "unittest.suite"})
_UNITTEST_CLASSES = UNITTEST_PATH | {"_pytest.unittest"}
# The collectors go with the runner whose outcomes they record: unittest's with unittest's
# modules; these, which run at start-up (the monitor's installer), at an import (the twin's
# loader: each of its imports is checked in full first) or only in another runner's
# process (Airflow's), with the rest. Any other collector (pytest's plugin and what it
# calls at every test: the results channel, the guard, the tracer) at every test.
UNITTEST_COLLECTORS = frozenset({"patchheal_unittest", "patchheal_unittest_names"})
OFF_PATH_COLLECTORS = frozenset(
    {"patchheal_monitor", "patchheal_twin", "patchheal_twin_kept", "patchheal_twin_plan"}
    | {"patchheal_airflow", "patchheal_watch", "patchheal_runnerwatch"}
)
# The item type of a plain pytest test function (its outcome goes through no unittest code).
_PLAIN_ITEM = ("_pytest.python", "Function")
SLICES = 16
# Exact types whose value is data, not behaviour (a runner class's `maxDiff`, `__slots__`).
_DATA = frozenset(
    {str, bytes, int, float, bool, complex, type(None), tuple, frozenset, list, dict, set}
)
_MISSING = object()
# `values()` of a module's dict or of a class's mapping proxy: C methods of exact types.
_VALUES = methodcaller("values")
_JOIN = b"".join


def _moved(now: bytes, before: bytes) -> set[int]:
    """The places of the tags that differ between `now` and `before` (as long as each other),
    by halving the span that differs: a few C comparisons for the one namespace that moves at
    every test (pytest sets `_pytest.assertion.util`'s globals for each), where a Python loop
    over every place (some 530 in click's suite) took longer than the read itself."""
    places: set[int] = set()
    spans = [(0, len(now) // _TAG_SIZE)]
    while spans:
        low, high = spans.pop()
        if now[low * _TAG_SIZE : high * _TAG_SIZE] == before[low * _TAG_SIZE : high * _TAG_SIZE]:
            continue
        if high - low == 1:
            places.add(low)
            continue
        middle = (low + high) // 2
        spans += ((low, middle), (middle, high))
    return places


def make_version_marks() -> Any:
    """`mark(namespace) -> (view, dict)`: a live view of the version tag of a module's dict
    or of a class's own dict (through its mapping proxy), and that dict, to be held so that
    the address stays its own; None when this Python's dicts keep no tag that every change
    replaces (the probe below), and the caller compares values instead.

    The tag is read through a `ctypes` object made here, at install, before any code of the
    step's runs; the view (a `memoryview` of its 8 bytes) reads the dict's memory as it is at
    each read. Nothing here is reachable from the step: its class can be found through
    `_SimpleCData.__subclasses__()`, but a change to the class does not reach views made."""
    import sys

    loaded = "_ctypes" in sys.modules
    try:
        from _ctypes import _SimpleCData
        from gc import get_referents
    except ImportError:
        return None
    finally:
        if not loaded:  # as the monitor's environment scrub leaves it: no `_ctypes` the
            sys.modules.pop("_ctypes", None)  # step did not import itself

    class _Version(_SimpleCData):  # type: ignore[type-arg]
        _type_ = "Q"

    at = _Version.from_address
    offset = object.__basicsize__ + _TAG_SIZE  # after the header and `ma_used`
    proxy_type = type(type.__dict__)

    def mark(space: Any) -> tuple[Any, dict[str, Any]]:
        real = space if type(space) is dict else None
        if real is None and type(space) is proxy_type:  # a class's mapping proxy: its dict
            found = get_referents(space)
            real = found[0] if len(found) == 1 and type(found[0]) is dict else None
        if real is None:
            raise TypeError("no dict under this namespace")
        return memoryview(at(id(real) + offset)).cast("B"), real

    if not _version_marks_work(mark, type(sys)):
        return None
    return mark


def _version_marks_work(mark: Any, module_type: type) -> bool:
    """Whether `mark` reads a tag that every kind of change to a module's or a class's dict
    replaces, and that stays when nothing changes (PEP 699 deprecated the tag in CPython
    3.12: a later one may stop moving it; another build may keep it elsewhere)."""
    module = module_type("probe")
    module.kept = 1

    class Probe:
        kept = 1

    class_namespace = type.__dict__["__dict__"].__get__
    changes: tuple[tuple[Any, Any], ...] = (
        (module.__dict__, lambda: setattr(module, "kept", 2)),
        (module.__dict__, lambda: setattr(module, "added", 1)),
        (module.__dict__, lambda: delattr(module, "added")),
        (class_namespace(Probe), lambda: setattr(Probe, "kept", 2)),
        (class_namespace(Probe), lambda: setattr(Probe, "added", 1)),
        (class_namespace(Probe), lambda: delattr(Probe, "added")),
    )
    try:
        for space, change in changes:
            view, _ = mark(space)
            before = view.tobytes()
            if view.tobytes() != before:
                return False
            change()
            if view.tobytes() == before:
                return False
    except Exception:
        return False
    return True


def is_runner_module(name: str) -> bool:
    if name == BUILTINS:
        return True
    if name.startswith(NOT_RUNNER):
        return False
    head = name.partition(".")[0]
    return head in RUNNER_ROOTS or head.startswith("patchheal_")


class _Group:
    """Entries checked together: where each lives, under which key, and what it was; and
    the runner classes among them, with the keys each had. `mark`: make_version_marks's,
    or None to compare values."""

    def __init__(self, mark: Any = None) -> None:
        self.spaces: list[Any] = []
        self.keys: list[str] = []
        self.expected: list[Any] = []
        self.original: list[Any] = []  # what each entry held when first seen
        self.labels: list[str] = []
        self.entries_of: list[list[int]] = []  # each namespace's entries, by its place
        self.classes: list[Any] = []  # each class's own dict (a live view)
        self.class_at: dict[int, int] = {}  # a class's place among `classes`, by its namespace's
        self.names: list[str] = []
        self.known: list[set[str]] = []
        self.lengths: list[int] = []
        # Each namespace once, by id: a live `values()` view of it, made once (a module's
        # dict cannot be replaced, nor a class's), and with `mark`, a live view of its tag.
        self.places: dict[int, int] = {}
        self.views: list[Any] = []
        self.mark = mark
        self.tags: list[Any] = []
        self.held: list[Any] = []  # the dicts the tags are read from: their addresses stay
        # The fast path, as at the last comparison (None: compare entry by entry next time):
        # every namespace's tag, or without them every value of every namespace, in order.
        self.tagged: bytes | None = None
        self.sizes: list[int] = []
        self.values: list[Any] | None = None

    def add(self, space: Any, key: str, value: Any, label: str) -> None:
        self.spaces.append(space)
        self.keys.append(key)
        self.expected.append(value)
        self.original.append(value)
        self.labels.append(label)
        self.entries_of[self._add_space(space)].append(len(self.keys) - 1)
        self.values = self.tagged = None

    def _add_space(self, space: Any) -> int:
        place = self.places.get(id(space))
        if place is None:
            place = self.places[id(space)] = len(self.views)
            self.views.append(_VALUES(space))
            self.entries_of.append([])
            if self.mark is not None:
                tag, real = self.mark(space)
                self.tags.append(tag)
                self.held.append(real)
        return place

    def add_class(self, space: Any, name: str) -> None:
        self.class_at[self._add_space(space)] = len(self.classes)  # one of data only: its length
        self.values = self.tagged = None
        self.classes.append(space)
        self.names.append(name)
        self.known.append({k for k in space if type(k) is str})
        self.lengths.append(len(space))

    def read(self) -> bytes:
        """Every namespace's tag as it is now, in one C call."""
        return _JOIN(self.tags)

    def unchanged(self) -> bool:
        """Without tags: whether every namespace holds the very objects it held at the last
        comparison, in the same order (one pass in C over the namespaces' own entry tables,
        identity only, so no object's code runs). With tags, `_changed_tagged` reads them."""
        if self.values is None:
            return False
        try:
            return list(map(len, self.views)) == self.sizes and all(
                map(is_, self.values, chain.from_iterable(self.views))
            )
        except Exception:  # a namespace changed size while it was read
            return False

    def changed(self) -> list[tuple[str, Any]]:
        """(label, object now) of each entry that is not what it was, and of behaviour added
        to a class; remembered, so that one change is named once."""
        if self.mark is not None:
            return self._changed_tagged()
        if self.unchanged():
            return []
        found = self.compared(None)
        try:
            self.values = list(chain.from_iterable(self.views))
            self.sizes = list(map(len, self.views))
        except Exception:
            self.values = None
        return found

    def _changed_tagged(self) -> list[tuple[str, Any]]:
        # The tags are read before the entries: a change made while they are compared moves
        # its tag again after this read, so the next check looks at that namespace again.
        now = self.read()
        before = self.tagged
        if now == before:
            return []
        moved = None if before is None or len(before) != len(now) else _moved(now, before)
        found = self.compared(moved)  # None: namespaces added since, so everything
        self.tagged = now
        return found

    def compared(self, moved: set[int] | None) -> list[tuple[str, Any]]:
        """The changes among the entries of the namespaces `moved` (None: all of them)."""
        found = []
        if moved is None:
            try:
                same = all(map(is_, self.expected, map(getitem, self.spaces, self.keys)))
            except Exception:  # a key deleted: looked at one by one below
                same = False
            entries: Any = range(0 if same else len(self.keys))
            classes: Any = range(len(self.classes))
        else:
            entries = [at for place in sorted(moved) for at in self.entries_of[place]]
            classes = [self.class_at[p] for p in sorted(moved) if p in self.class_at]
        for at in entries:
            now = self.spaces[at].get(self.keys[at], _MISSING)
            if now is not self.expected[at]:
                # Put back as it was first seen: the change was named when it was made.
                if now is not self.original[at]:
                    found.append((self.labels[at], None if now is _MISSING else now))
                self.expected[at] = now
        return found + self.added(classes)

    def added(self, classes: Any) -> list[tuple[str, Any]]:
        """Behaviour added to the classes at places `classes` since they were last looked at."""
        found = []
        for at in classes:
            space = self.classes[at]
            if len(space) == self.lengths[at]:
                continue
            self.lengths[at] = len(space)
            known = self.known[at]
            for key in [k for k in space if type(k) is str and k not in known]:
                known.add(key)
                value = space.get(key)
                if type(value) not in _DATA:
                    found.append((f"{self.names[at]}.{key} (added)", value))
        return found


def make_runner_watch(modules: dict[str, Any], module_type: type) -> Any:
    """A checker `changed(full, item=None) -> [(label, object now)]` over the runner's
    modules; `item` is the running test's pytest item, if the runner said which."""
    class_dict = type.__dict__["__dict__"].__get__
    class_qualname = type.__dict__["__qualname__"].__get__
    function_type = type(make_runner_watch)
    mark = make_version_marks()
    if mark is not None:  # every namespace at every check: one group
        core = unit = _Group(mark)
        rest = [core]
    else:
        core, unit = _Group(), _Group()
        rest = [_Group() for _ in range(SLICES)]
    plain_item: list[Any] = [None]  # _pytest.python.Function, as it was when first seen
    seen_modules: set[str] = set()
    not_runner: set[str] = set()
    seen_classes: set[int] = set()
    held: list[Any] = []  # the classes, so their ids are never reused
    counts = [0, 0]  # len(sys.modules) at the last scan; the rotation

    def group(module_name: str) -> _Group:
        if module_name in UNITTEST_PATH or module_name in UNITTEST_COLLECTORS:
            return unit
        if module_name in CORE or (
            module_name.startswith("patchheal_") and module_name not in OFF_PATH_COLLECTORS
        ):
            return core
        return rest[len(seen_modules) % len(rest)]

    def add_class(cls: Any, key: str, into: _Group) -> None:
        space = class_dict(cls)
        owner = space.get("__module__")
        if id(cls) in seen_classes or type(owner) is not str or not is_runner_module(owner):
            return
        if owner == BUILTINS:  # a C type: nothing of it can change
            return
        seen_classes.add(id(cls))
        held.append(cls)
        if owner in _UNITTEST_CLASSES:
            into = unit
        # The class's own name (C's getter: `__qualname__` is not in the class's dict), not
        # the name it was first seen under (`_Result = unittest.result.TestResult`).
        qualname = class_qualname(cls)
        name = f"{owner}.{qualname if type(qualname) is str else key}"
        for inner, value in list(dict.items(dict(space))):
            if type(inner) is str and type(value) not in _DATA:
                into.add(space, inner, value, f"{name}.{inner}")
        into.add_class(space, name)

    def add_module(name: str, module: Any) -> None:
        space = module.__dict__
        into = group(name)
        if name == BUILTINS:
            for key, value in list(dict.items(space)):
                if type(key) is str and key != "_":  # `_`: the last result, interactively
                    into.add(space, key, value, f"{name}.{key}")
            return
        for key, value in list(dict.items(space)):
            if type(key) is not str:
                continue
            if type(value) is function_type:
                into.add(space, key, value, f"{name}.{key}")
            elif issubclass(type(value), type):  # not isinstance: it reads `__class__`
                into.add(space, key, value, f"{name}.{key}")
                add_class(value, key, into)
                if (name, key) == _PLAIN_ITEM:
                    plain_item[0] = value

    def scan() -> None:
        if len(modules) == counts[0]:
            return
        counts[0] = len(modules)
        for name, module in list(dict.items(modules)):
            if type(name) is not str or name in seen_modules or name in not_runner:
                continue
            if not is_runner_module(name):
                not_runner.add(name)  # by its name alone: never one (a tenth of a check's time)
                continue
            if type(module) is not module_type:
                continue
            seen_modules.add(name)
            add_module(name, module)

    def changed(full: bool, item: Any = None) -> list[tuple[str, Any]]:
        scan()
        counts[1] += 1
        found = core.changed()
        if mark is not None:
            return found  # every namespace, tagged
        # An exact type check: a class of the step's (a subclass) could run unittest code.
        plain = item is not None and plain_item[0] is not None and type(item) is plain_item[0]
        if full or not plain:
            found += unit.changed()
        for at, part in enumerate(rest):
            if full or at == counts[1] % SLICES:
                found += part.changed()
        return found

    return changed
