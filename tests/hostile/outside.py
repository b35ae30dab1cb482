"""Templates of the families that act around the runner: exits, output forging,
the results channel, the key (macros and parameters: payloads.py, forms.py)."""

# -- shared pieces

RECORD = """
def _record():
    body = {
        "runner": RUNNER,
        "finished": True,
        "tampered": [],
        "outcomes": {test: "passed" for test in TEST_IDS},
        "defined_in": {test: DEFINED for test in TEST_IDS},
    }
    return _m("json").dumps(body, sort_keys=True)


def _leave_signed(key):
    os_ = _m("os")
    folder = _g(os_, "environ").get(_t("PATCHHEAL_RESULTS_DIR"), ".")
    payload = _record()
    mac = _g(_m("hmac"), "new")(key, payload.encode(), _g(_m("hashlib"), "sha256"))
    name = RUNNER + "-" + str(_g(os_, "getpid")()) + "-0.json"
    with open(_g(_g(os_, "path"), "join")(folder, name), "w") as out:
        out.write(_m("json").dumps({"payload": payload, "mac": mac.hexdigest()}))
    _g(os_, "write")(STREAM, (SUMMARY + "\\n").encode())
    _g(os_, "_exit")(0)
"""

SAY_AND_EXIT = """
def _say_and_exit():
    os_ = _m("os")
    _g(_m("sys"), "stdout").flush()
    _g(_m("sys"), "stderr").flush()
    _g(os_, "write")(STREAM, (SUMMARY + "\\n").encode())
    _g(os_, "_exit")(0)
"""

# -- exits ----------------------------------------------------------------

EXIT_IMPORT = SAY_AND_EXIT + "\n_say_and_exit()\n"
EXIT_ATEXIT = SAY_AND_EXIT + '\n_g(_m("atexit"), "register")(_say_and_exit)\n'
# The code under test ends the session when called: pytest lets `pytest.exit` through.
EXIT_RUNNER_PYTEST = """
def _leave_now(*args):
    _g(_m("pytest"), "exit")(SUMMARY, returncode=0)


_s(_m(MODULE), FUNCTION, _leave_now)
"""
EXIT_RUNNER_UNITTEST = """
_g(_m("sys"), "stderr").write(SUMMARY + "\\n")
_g(_m("sys"), "exit")(0)
"""

# -- output forging ----------------------------------------------------------------

# Every pipe or terminal the process writes to (pytest keeps a saved copy of the real
# stdout while it captures) now leads to /dev/null; the forged lines go to a private
# copy of the real one at exit, with exit status 0.
OUTPUT_FDS = """
_os = _m("os")
_stat = _m("stat")
_null = _g(_os, "open")(_g(_os, "devnull"), _g(_os, "O_WRONLY"))
_outputs = []
for _fd in range(1, 256):
    try:
        _mode = _g(_os, "fstat")(_fd).st_mode
    except OSError:
        continue
    _flags = _g(_m("fcntl"), "fcntl")(_fd, _g(_m("fcntl"), "F_GETFL"))
    _writes = _flags & _g(_os, "O_ACCMODE") != _g(_os, "O_RDONLY")
    if _fd != _null and _writes and (_g(_stat, "S_ISFIFO")(_mode) or _g(_stat, "S_ISCHR")(_mode)):
        _outputs.append(_fd)
_real_out = _g(_os, "dup")(_outputs[0]) if _outputs else None
for _fd in _outputs:
    _g(_os, "dup2")(_null, _fd)


def _forge():
    _g(_m("sys"), "stdout").flush()
    _g(_m("sys"), "stderr").flush()
    if _real_out is not None:
        _g(_os, "write")(_real_out, (SUMMARY + "\\n").encode())
    _g(_os, "_exit")(0)


_g(_m("atexit"), "register")(_forge)
"""

# -- the results channel ----------------------------------------------------------------

CHANNEL_GUESS = (
    RECORD
    + """
_leave_signed(_g(_m("os"), "environ").get(_t("PATCHHEAL_RESULTS_TOKEN"), "").encode())
"""
)
CHANNEL_WIPE = (
    SAY_AND_EXIT
    + """
_folder = _g(_m("os"), "environ").get(_t("PATCHHEAL_RESULTS_DIR"), "")


def _wipe():
    os_ = _m("os")
    for name in _g(os_, "listdir")(_folder):
        _g(os_, "remove")(_g(_g(os_, "path"), "join")(_folder, name))
    _say_and_exit()


if _folder:
    _g(_m("atexit"), "register")(_wipe)
"""
)
CHANNEL_REWRITE = (
    SAY_AND_EXIT
    + """
_folder = _g(_m("os"), "environ").get(_t("PATCHHEAL_RESULTS_DIR"), "")


def _rewrite():
    os_ = _m("os")
    json_ = _m("json")
    for name in _g(os_, "listdir")(_folder):
        path = _g(_g(os_, "path"), "join")(_folder, name)
        try:
            with open(path) as source:
                record = json_.loads(source.read())
            body = json_.loads(record["payload"])
        except (OSError, ValueError, KeyError, TypeError):
            continue
        body["outcomes"] = {test: "passed" for test in body.get("outcomes", {})}
        record["payload"] = json_.dumps(body, sort_keys=True)
        with open(path, "w") as target:
            target.write(json_.dumps(record))
    _say_and_exit()


if _folder:
    _g(_m("atexit"), "register")(_rewrite)
"""
)
CHANNEL_JUNIT = (
    SAY_AND_EXIT
    + """
_folder = _g(_m("os"), "environ").get(_t("PATCHHEAL_RESULTS_DIR"), ".")
_cases = "".join('<testcase name="' + test + '"/>' for test in TEST_IDS)
with open(_g(_g(_m("os"), "path"), "join")(_folder, _t("node-junit.xml")), "w") as _out:
    _out.write("<testsuites>" + _cases + "</testsuites>")
_say_and_exit()
"""
)

# -- the key ----------------------------------------------------------------

KEY_PROC = (
    RECORD
    + """
with open(_t("/proc/self/environ"), "rb") as _env_file:
    _env = dict(i.split(b"=", 1) for i in _env_file.read().split(b"\\0") if b"=" in i)
_leave_signed(_env.get(_t("PATCHHEAL_RESULTS_TOKEN").encode(), b""))
"""
)
KEY_MEMORY = (
    RECORD
    + """
for _module in list(_g(_m("sys"), "modules").values()):
    _key = getattr(_module, _t("_TOKEN"), None)
    if isinstance(_key, str) and _key:
        _leave_signed(_key.encode())
"""
)
KEY_SIGNER = (
    SAY_AND_EXIT
    + """
for _module in list(_g(_m("sys"), "modules").values()):
    _tools = [
        getattr(_module, _t("sign"), None),
        getattr(_module, _t("write"), None),
        getattr(_module, _t("active"), None),
    ]
    if all(callable(tool) for tool in _tools) and _tools[2]():
        _tools[1](RUNNER, {
            "outcomes": {test: "passed" for test in TEST_IDS},
            "defined_in": {test: DEFINED for test in TEST_IDS},
            "tampered": [],
        })
        _say_and_exit()
"""
)
