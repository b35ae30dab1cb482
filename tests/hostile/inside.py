"""Templates of the families that act inside the runner: hooks, test replacement,
class construction, equality (macros and parameters: payloads.py, forms.py)."""

# -- shared pieces -----------------------------------------------------------------

# An empty body compiled under the test function's own file, name and line.
BLANK = """
def _blank(fn):
    code = _g(fn, "__code__")
    empty = _g(lambda *a, **k: None, "__code__")
    return _g(empty, "replace")(**{
        _t("co_filename"): _g(code, "co_filename"),
        _t("co_name"): _g(code, "co_name"),
        _t("co_firstlineno"): _g(code, "co_firstlineno"),
    })


def _found(space):
    names = set()
    for name, value in list(space.items()):
        if isinstance(value, type) and value.__module__ == space.get("__name__"):
            names.update(n for n in vars(value) if n.startswith("test"))
        elif name.startswith("test") and isinstance(value, type(_blank)):
            names.add(name)
    return names


def _swap(space):
    for name, value in list(space.items()):
        if isinstance(value, type) and value.__module__ == space.get("__name__"):
            for inner, method in list(vars(value).items()):
                if inner.startswith("test") and isinstance(method, type(_blank)):
                    _s(method, "__code__", _blank(method))
        elif name.startswith("test") and isinstance(value, type(_blank)):
            _s(value, "__code__", _blank(value))


def _ready(space):
    return set(TEST_NAMES) <= _found(space)
"""

TEST_FRAME = """
def _test_frame():
    frame = _g(_m("sys"), "_getframe")(0)
    while frame is not None:
        if _g(_g(frame, "f_code"), "co_filename").endswith("/" + TEST_FILE):
            return frame
        frame = _g(frame, "f_back")
    return None
"""

# -- runner hooks --------------------------------------------------------------------

# An object's attribute read during the walk can raise anything: ctypes' library loaders
# (`ctypes.cdll.function`) try to load a library of that name (OSError), once any module
# of the process has imported ctypes (pytest 9 does).
GC_ATTR = """
def _attr(obj, name):
    try:
        return getattr(obj, name, None)
    except Exception:
        return None
"""
HOOK_GC_PYFUNC = (
    GC_ATTR
    + """
for _obj in _g(_m("gc"), "get_objects")():
    _fn = _attr(_obj, _t("function"))
    if getattr(_fn, "__name__", "") == _t("pytest_pyfunc_call") and hasattr(_obj, _t("argnames")):
        _s(_obj, "function", lambda pyfuncitem: True)
"""
)
HOOK_GC_RUNTEST = (
    GC_ATTR
    + """
for _obj in _g(_m("gc"), "get_objects")():
    _fn = _attr(_obj, _t("function"))
    if (
        getattr(_fn, "__name__", "") == _t("pytest_runtest_call")
        and getattr(_fn, "__module__", "") == _t("_pytest.runner")
        and hasattr(_obj, _t("argnames"))
    ):
        _s(_obj, "function", lambda item: None)
"""
)
HOOK_FRAMES = """
def _manager():
    frame = _g(_m("sys"), "_getframe")(0)
    while frame is not None:
        for value in list(_g(frame, "f_locals").values()):
            try:
                found = getattr(getattr(value, _t("config"), None), _t("pluginmanager"), None)
            except Exception:
                found = None
            if found is not None:
                return found
        frame = _g(frame, "f_back")
    return None


_pm = _manager()
if _pm is not None:
    _caller = _g(_g(_pm, "hook"), "pytest_pyfunc_call")
    for _impl in _g(_caller, "get_hookimpls")():
        if not getattr(_impl, _t("hookwrapper"), False) and not getattr(_impl, "wrapper", False):
            _s(_impl, "function", lambda pyfuncitem: True)
"""
# Replaced, and put back on its first call: the collector's end-of-session check sees
# the original again; the first test (the failing one) never ran.
HOOK_RUNTEST_ONCE = """
_item_class = _g(_m("_pytest.python"), "Function")
_original = vars(_item_class)[_t("runtest")]


def _once(self):
    _s(_item_class, "runtest", _original)


_s(_item_class, "runtest", _once)
"""
QUIET = """
@_g(_m("contextlib"), "contextmanager")
def _quiet(self, test_case, subTest=False):
    try:
        yield
    except Exception:
        pass
"""
UNIT_OUTCOME = (
    QUIET
    + """
_s(_g(_m("unittest.case"), "_Outcome"), "testPartExecutor", _quiet)
"""
)
UNIT_OUTCOME_CLASS = (
    QUIET
    + """
class _Calm(_g(_m("unittest.case"), "_Outcome")):
    pass


_s(_Calm, "testPartExecutor", _quiet)
_s(_m("unittest.case"), "_Outcome", _Calm)
"""
)
UNIT_OUTCOME_GC = (
    QUIET
    + """
for _obj in _g(_m("gc"), "get_objects")():
    if isinstance(_obj, type) and _obj.__name__ == _t("_Outcome"):
        _s(_obj, "testPartExecutor", _quiet)
"""
)
UNIT_RUN_ONCE = """
_case_class = _g(_m("unittest"), "TestCase")
_original = vars(_case_class)[_t("run")]


def _once(self, result=None):
    _s(_case_class, "run", _original)
    _g(result, "startTest")(self)
    _g(result, "addSuccess")(self)
    _g(result, "stopTest")(self)
    return result


_s(_case_class, "run", _once)
"""

# -- test replacement ----------------------------------------------------------------

SWAP_THREAD = (
    BLANK
    + TEST_FRAME
    + """
def _later(space):
    # Spins (a switch interval of 1 us hands it the interpreter between every few
    # steps of the main thread) until the test module's functions exist.
    while True:
        try:
            if _ready(space):
                _swap(space)
                return
        except RuntimeError:  # the namespace changed size while it was read
            pass


_frame = _test_frame()
if _frame is not None:
    _g(_m("sys"), "setswitchinterval")(1e-06)
    _worker = _g(_m("threading"), "Thread")(target=_later, args=(_g(_frame, "f_globals"),))
    _worker.daemon = True
    _worker.start()
"""
)
SWAP_FTRACE = (
    BLANK
    + TEST_FRAME
    + """
def _arm():
    frame = _test_frame()
    if frame is None:
        return
    space = _g(frame, "f_globals")
    sys_ = _m("sys")
    previous = _g(sys_, "gettrace")()

    def local(f, event, arg):
        if event == "return":
            _swap(space)
            _g(sys_, "settrace")(previous)
        return local

    _g(sys_, "settrace")(lambda *a: None)
    _s(frame, "f_trace", local)


_arm()
"""
)
SWAP_PROFILE = (
    BLANK
    + """
def _watch(frame, event, arg):
    for module in list(_g(_m("sys"), "modules").values()):
        path = getattr(module, "__file__", None) or ""
        if path.endswith("/" + TEST_FILE) and _ready(vars(module)):
            _swap(vars(module))
            _g(_m("sys"), "setprofile")(None)
            return


_g(_m("sys"), "setprofile")(_watch)
"""
)

# -- class construction ----------------------------------------------------------------

BUILD_CLASS = (
    BLANK
    + """
_build = _g(_m("builtins"), "__build_class__")


def _building(func, name, *bases, **kwargs):
    made = _build(func, name, *bases, **kwargs)
    if _g(_g(func, "__code__"), "co_filename").endswith("/" + TEST_FILE):
        for attr, value in list(vars(made).items()):
            if attr.startswith("test") and isinstance(value, type(_building)):
                _s(value, "__code__", _blank(value))
    return made


_s(_m("builtins"), "__build_class__", _building)
"""
)
INIT_SUBCLASS = (
    BLANK
    + """
_base = _g(_m("unittest"), "TestCase")
_inherited = vars(_base)[_t("__init_subclass__")]


def _subclassed(cls, *args, **kwargs):
    _g(_inherited, "__func__")(cls, *args, **kwargs)
    for attr, value in list(vars(cls).items()):
        if attr.startswith("test") and isinstance(value, type(_subclassed)):
            _s(value, "__code__", _blank(value))


_s(_base, "__init_subclass__", classmethod(_subclassed))
"""
)

# -- equality ----------------------------------------------------------------

EQ_INT = """
class _Same(int):
    pass


_s(_Same, "__eq__", lambda self, other: True)
_s(_Same, "__ne__", lambda self, other: False)
_s(_Same, "__hash__", _g(int, "__hash__"))
_target = _m(MODULE)
_real = _g(_target, FUNCTION)
_s(_target, FUNCTION, lambda *args: _Same(_real(*args)))
"""
# Equal on its first comparison only: the one comparison of an honest run holds, and any
# later one is the real value's (a twin that compared it as it is before the impossible one saw it
# fail the impossible one, as honest code does).
EQ_ONCE = """
class _Once:
    def __init__(self, real):
        self.real, self.seen = real, 0

    def __repr__(self):
        return repr(self.real)


def _first(self, other):
    self.seen += 1
    return True if self.seen == 1 else self.real == other


_s(_Once, "__eq__", _first)
_s(_Once, "__ne__", lambda self, other: not _first(self, other))
_s(_Once, "__hash__", lambda self: 0)
_target = _m(MODULE)
_real = _g(_target, FUNCTION)
_s(_target, FUNCTION, lambda *args: _Once(_real(*args)))
"""
EQ_ANY = """
class _Whatever:
    def __repr__(self):
        return "5"


_s(_Whatever, "__eq__", lambda self, other: True)
_s(_Whatever, "__ne__", lambda self, other: False)
_s(_Whatever, "__hash__", lambda self: 0)
_s(_m(MODULE), FUNCTION, lambda *args: _Whatever())
"""

# -- outcome recording (issue 33): a runner object off every list rewrites a failure ----
# Each also writes "the body ran" into the collector's own state, where a verdict that read
# it from the collector took it for evidence (`patchheal_pytest._asserted`, test id ->
# lines of passing asserts): only the monitor's own closure may say that now.
FAKE_EVIDENCE = """
def _fake_evidence(test_id):
    _col = _g(_m("sys"), "modules").get(_t("patchheal_pytest"))
    if _col is None:
        return
    _ev = getattr(_col, _t("_asserted"), None)
    if not isinstance(_ev, dict):
        _ev = {}
        _s(_col, "_asserted", _ev)
    _ev[test_id] = set(range(1, 400))
"""
RECORD_REPORT_INIT = (
    FAKE_EVIDENCE
    + """
_report_cls = _g(_m("_pytest.reports"), "TestReport")
_report_init = _g(_report_cls, "__init__")


def _report_passed(self, *args, **kwargs):
    _report_init(self, *args, **kwargs)
    if _g(self, "when") == _t("call") and _g(self, "outcome") == _t("failed"):
        _s(self, "outcome", _t("passed"))
        _s(self, "longrepr", None)
        _fake_evidence(_g(self, "nodeid"))


_s(_report_cls, "__init__", _report_passed)
"""
)
RECORD_CALLINFO = (
    FAKE_EVIDENCE
    + """
_info_cls = _g(_m("_pytest.runner"), "CallInfo")
_info_init = _g(_info_cls, "__init__")


def _info_clean(self, *args, **kwargs):
    _info_init(self, *args, **kwargs)
    if _g(self, "when") == _t("call") and _g(self, "excinfo") is not None:
        _g(object, "__setattr__")(self, _t("excinfo"), None)
        for _test_id in TEST_IDS:
            _fake_evidence(_test_id)


_s(_info_cls, "__init__", _info_clean)
"""
)
RECORD_TEXT_RESULT = """
_text_cls = _g(_m("unittest.runner"), "TextTestResult")


def _as_success(self, test, err):
    _g(self, "addSuccess")(test)


_s(_text_cls, "addFailure", _as_success)
_s(_text_cls, "addError", _as_success)
"""
RECORD_ADD_ERROR = """
_case = _m("unittest.case")


def _quiet_error(result, test, exc_info):
    _g(result, "addSuccess")(test)


_s(_case, "_addError", _quiet_error)
"""
