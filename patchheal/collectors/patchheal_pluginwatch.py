"""What the test run's own extension points run (run from the monitor's copy).

The runner watch (patchheal_runnerwatch.py) sees every change to the runner's classes and
modules. pytest also runs code that is not its own, by design, and none of it changes a
runner object: the hook implementations of every plugin and conftest, and what the running
item holds itself. A new `conftest.py`, or a module of the project's that its conftest or
entry points load as a plugin, can hide a failure there with no operation the tripwire
audits: a `pytest_runtest_makereport` wrapper that rewrites a report, a `pytest_pyfunc_call`
that calls the test and swallows its error, a fixture that sets `item.runtest` or `item.obj`
on the instance (each with its name assembled at run time; measured in the regression step of
tests/verdict_battery.py, where no assertion evidence is asked for).

So the monitor asks this module, at the first test, when the record is signed and at a
test's end when the hooks every test goes through hold anything new, for the hook
implementations on a test's outcome path, and, when each test's body is done, for what the
item holds in place of its class's methods and which function it calls as the test. The
monitor notes those whose code is the project's (or a conftest's, or of no file) with a
digest of that code, as a change on a protected target: one the baseline run of the same
tree also had is the project's behaviour (a conftest that has always wrapped reports); one it
did not have is the candidate's (patchheal/verdict/tripwire.py).

As everywhere in the hook, the step's objects are touched through exact-type checks and C
getters only: a property or `__getattr__` of a step-made object would run the step's code in
the hook. An object that is not what pytest makes is named, not looked into.
"""

from __future__ import annotations

from _functools import partial
from hashlib import sha256
from typing import Any

# The hooks a test's outcome goes through: how it is collected (the item and the function it
# calls are made there), set up, called and torn down, how its report is made, logged and
# shown, how its fixtures are made. Not the rest (options, configuration, the terminal's
# header), which a project's plugin changes for reasons of its own.
OUTCOME_HOOK_PREFIXES = ("pytest_runtest_", "pytest_report_", "pytest_collect", "pytest_pycollect_")
OUTCOME_HOOKS = frozenset(
    {"pytest_pyfunc_call", "pytest_fixture_setup", "pytest_fixture_post_finalizer"}
    | {"pytest_make_collect_report", "pytest_itemcollected", "pytest_deselected"}
    | {"pytest_ignore_collect", "pytest_generate_tests", "pytest_make_parametrize_id"}
)
# Where each pluggy keeps a hook's implementations: one list since pluggy 1.1, two before.
_IMPL_LISTS = ("_hookimpls", "_wrappers", "_nonwrappers")
# The classes of pluggy's objects move between its modules from version to version
# (`HookRelay` is in `pluggy._hooks` in 1.5 and `pluggy._caller` in 1.7): each is known by
# its name, in the module it says it is from, which holds it under that name.
_RELAYS = frozenset({"HookRelay", "_HookRelay"})
_CALLERS = frozenset({"HookCaller", "_HookCaller"})
_IMPLS = frozenset({"HookImpl"})
_MANAGERS = frozenset({"PytestPluginManager"})
_CONFIGS = frozenset({"Config"})
_PLAIN_ITEMS = frozenset({"Function"})
# The hooks every test's outcome goes through again, looked at when each test's body is done:
# a plugin registered during the session (by a fixture, through `request.config`) and gone
# before its end is in them while it rewrites a report.
PER_TEST_HOOKS = (
    "pytest_runtest_protocol",
    "pytest_runtest_setup",
    "pytest_runtest_call",
    "pytest_pyfunc_call",
    "pytest_runtest_teardown",
    "pytest_runtest_makereport",
    "pytest_runtest_logreport",
    "pytest_report_teststatus",
)


def on_outcome_path(hook: str) -> bool:
    return hook.startswith(OUTCOME_HOOK_PREFIXES) or hook in OUTCOME_HOOKS


def make_plugin_watch(modules: dict[str, Any], module_type: type, function_type: type) -> Any:
    """`(extensions, code_digest)`. `extensions(item, with_hooks) -> [(label, code, value)]`:
    what a plain test item holds on itself in place of its class's methods, and the test
    function it will call; with `with_hooks`, or when the per-test hooks hold anything else
    than when last listed, also the outcome-path hook implementations of the plugin manager
    behind pytest's `item` and the entries of its hook relay that are not pluggy's hook
    callers. `code` is what each runs as (None: no Python code of its own)."""
    module_dict = vars(module_type)["__dict__"].__get__
    class_dict = type.__dict__["__dict__"].__get__
    instance_dict = object.__getattribute__
    get = dict.get
    items = dict.items
    method_type = type(make_plugin_watch.__get__(0))
    member_type = type(vars(function_type)["__closure__"])  # a slot's descriptor
    getset_type = type(vars(function_type)["__dict__"])  # an instance dict's
    shadowable: dict[Any, frozenset[str]] = {}
    address_of = object.__hash__  # an object's address, like `id()`, which is audited
    # The session's relay and the callers of PER_TEST_HOOKS in it, and what they held when
    # last listed: one look at a test's end tells whether anything was registered since.
    per_test: list[Any] = []
    last: list[Any] = [None]

    def runners(root: str, names: frozenset[str], obj: Any) -> bool:
        """Whether `obj`'s class is one of `names` of the runner package `root`, held under its
        name by the module it says it is from (a class the step made elsewhere is not: putting
        it into a runner module is a change the runner watch names)."""
        cls = type(obj)
        space = class_dict(cls)
        module_name = space.get("__module__")
        name = type.__dict__["__name__"].__get__(cls)
        if type(module_name) is not str or name not in names:
            return False
        if module_name.partition(".")[0] != root:
            return False
        module = get(modules, module_name)
        return type(module) is module_type and get(module_dict(module), name) is cls

    def own(obj: Any) -> dict[str, Any] | None:
        space = slot(obj, "__dict__")
        return space if type(space) is dict else None

    def slot(obj: Any, name: str) -> Any:
        """An attribute of an object of one of pytest's or pluggy's own exact classes, read
        past any `__getattr__`; None when it has none (another version's layout)."""
        try:
            return instance_dict(obj, name)
        except AttributeError:
            return None

    def node_attribute(item: Any, name: str) -> Any:
        """`name` of any pytest node (a doctest's, a TestCase's, a project's own item), read
        through pytest's `Node` class itself: its slot (pytest 7 and later) or its instance
        dict, by C getters, past whatever a subclass defines."""
        module = get(modules, "_pytest.nodes")
        node = get(module_dict(module), "Node") if type(module) is module_type else None
        if node is None or not issubclass(type(node), type):
            return None
        space = class_dict(node)
        try:
            member = space.get(name)
            if type(member) is member_type:
                return member.__get__(item)
            getter = space.get("__dict__")
            found = getter.__get__(item) if type(getter) is getset_type else None
            return get(found, name) if type(found) is dict else None
        except (TypeError, AttributeError):  # not a node
            return None

    def plugin_manager(item: Any) -> Any:
        config = node_attribute(item, "config")
        if not runners("_pytest", _CONFIGS, config):
            return None
        manager = get(own(config) or {}, "pluginmanager")
        return manager if runners("_pytest", _MANAGERS, manager) else None

    def plain(item: Any) -> bool:
        return runners("_pytest", _PLAIN_ITEMS, item)

    def hooks(item: Any) -> list[tuple[str, Any]]:
        manager = plugin_manager(item)
        if manager is None:
            return []
        relay = get(own(manager) or {}, "hook")
        if not runners("pluggy", _RELAYS, relay):
            return [("pluginmanager.hook", relay)]
        relay_space = own(relay) or {}
        callers = [(name, get(relay_space, name)) for name in PER_TEST_HOOKS]
        # Which of pluggy's list names each caller has, found once: a name it lacks costs
        # an AttributeError at every look.
        per_test[:] = (relay, [(n, c, lists_of(c)) for n, c in callers])
        last[0] = registered()
        found: list[tuple[str, Any]] = []
        for name, caller in list(items(own(relay) or {})):
            if type(name) is not str or not on_outcome_path(name):
                continue
            if not runners("pluggy", _CALLERS, caller):
                found.append((f"pluginmanager.hook.{name}", caller))
                continue
            for list_name in _IMPL_LISTS:
                listed = slot(caller, list_name)
                if type(listed) is not list:
                    continue
                for impl in listed:
                    if not runners("pluggy", _IMPLS, impl):
                        found.append((f"{name} implementation", impl))
                        continue
                    found.append((name, slot(impl, "function")))
        return found

    def registered() -> tuple[Any, ...] | None:
        """What the per-test hooks hold now (the addresses of their implementations), or None
        when an entry of the relay is no longer the caller first listed."""
        relay, callers = per_test
        space = own(relay) or {}
        now: list[Any] = []
        for name, caller, list_names in callers:
            if get(space, name) is not caller:
                return None
            for list_name in list_names:
                listed = slot(caller, list_name)
                if type(listed) is not list:
                    return None
                now.append(tuple(map(address_of, listed)))
        return tuple(now)

    def lists_of(caller: Any) -> tuple[str, ...]:
        return tuple(n for n in _IMPL_LISTS if type(slot(caller, n)) is list)

    def hooks_changed() -> bool:
        if not per_test:
            return False
        now = registered()
        return now is None or now != last[0]

    def methods_of(cls: Any) -> frozenset[str]:
        known = get(shadowable, cls)
        if known is None:
            names = set()
            for klass in type.__dict__["__mro__"].__get__(cls):
                for key, value in class_dict(klass).items():
                    if type(key) is str and type(value) is function_type:
                        names.add(key)
            known = shadowable[cls] = frozenset(names)
        return known

    def held(item: Any) -> list[tuple[str, Any]]:
        if not plain(item):
            return []  # a project's own item class runs the project's code anyway
        space = own(item)
        if space is None:
            return []
        methods = methods_of(type(item))
        found = [
            (f"item.{key}", value)
            for key, value in list(items(space))
            if type(key) is str and key in methods
        ]
        function: Any = get(space, "_obj")
        if type(function) is method_type:
            function = function.__func__
        if function is not None:
            found.append(("the test function", function))
        return found

    def extensions(item: Any, with_hooks: bool) -> list[tuple[str, Any, Any]]:
        found = held(item)
        if with_hooks or hooks_changed():
            found += hooks(item)
        return [(label, code_of(value, function_type), value) for label, value in found]

    return extensions, code_digest


def code_of(value: Any, function_type: type) -> Any:
    """The code a hook implementation (or a test function) runs as: a function's own, a bound
    method's function's, a partial's function's, or its class's `__call__`; None when it is
    none of these (C code, or an object whose class has no Python `__call__`)."""
    method_type = type(code_of.__get__(0))
    for _ in range(4):
        kind = type(value)
        if kind is function_type:
            return value.__code__
        if kind is method_type or kind is classmethod or kind is staticmethod:
            value = value.__func__
        elif kind is partial:
            value = value.func
        else:
            call = None
            for klass in type.__dict__["__mro__"].__get__(kind):
                call = type.__dict__["__dict__"].__get__(klass).get("__call__")
                if call is not None:
                    break
            if type(call) is not function_type:
                return None
            value = call
    return None


def code_digest(code: Any) -> str:
    """A digest of what `code` does, the same wherever its lines are (a fixture added above a
    hook moves the hook, not what it does) and in every process (no `hash()` of a string)."""
    digest = sha256()
    code_type = type(code)

    def walk(current: Any) -> None:
        digest.update(current.co_code)
        digest.update("\0".join(current.co_names).encode("utf-8", "surrogatepass"))
        for const in current.co_consts:
            if type(const) is code_type:
                walk(const)
            else:
                digest.update(_const(const).encode("utf-8", "surrogatepass"))
            digest.update(b"\1")

    walk(code)
    return digest.hexdigest()[:12]


def _const(value: Any) -> str:
    kind = type(value)
    if kind is tuple:
        return "(" + ",".join(_const(v) for v in value) + ")"
    if kind is frozenset:  # its order follows string hashes, which differ between processes
        return "{" + ",".join(sorted(_const(v) for v in value)) + "}"
    for plain in _PLAIN_CONSTS:  # by identity: `in` would compare with the class's `__eq__`
        if kind is plain:
            return str(vars(plain)["__repr__"](value))
    return str(type.__dict__["__name__"].__get__(kind))


_PLAIN_CONSTS: tuple[Any, ...] = (str, bytes, int, float, complex, bool, type(None), type(...))
