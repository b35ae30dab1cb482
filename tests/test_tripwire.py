"""The tripwire (collectors/patchheal_monitor.py, patchheal_watch.py, verdict/tripwire.py).

Real processes with the harness's results channel: what the audit hook sees and
whom it blames, that the signing key is out of the step's reach, and that
hostile source-only candidates end not fixed while real fixes stay fixed.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from patchheal.collectors.patchheal_watch import KEPT_OUTSIDE
from patchheal.config import BudgetSpec, StepSpec
from patchheal.harness.local.harness import LocalHarness
from patchheal.harness.results import twinchannel
from patchheal.harness.results.channel import ResultsChannel
from patchheal.harness.results.collectors import COLLECTORS
from patchheal.loop.reproduce import Reproduction, reproduce
from patchheal.loop.verification import verify
from patchheal.models import MonitorEvent, Outcome, TestResults
from patchheal.verdict.tripwire import describe, tainting, why_tainted
from tests.tripwire_battery import HOSTILE, LEGIT
from tests.verdict_battery import Case, evaluate

PROBES = Path(__file__).parent / "data" / "probes"


def _run_in_channel(root: Path, script: str) -> tuple[TestResults | None, str]:
    """`script` (a project file `main.py` in a git repo `root`) run as a step would be."""
    (root / ".git").mkdir(exist_ok=True)
    (root / "main.py").write_text(script)
    channel = ResultsChannel()
    try:
        env = channel.environment(
            os.environ, results_dir=str(channel.host_dir), collectors=str(COLLECTORS)
        )
        done = subprocess.run(
            [sys.executable, "main.py"], cwd=root, env=env, capture_output=True, text=True
        )
        return channel.collect(), done.stdout + done.stderr
    finally:
        channel.close()


_PROJECT_OPS = """
import gc, inspect, logging, os, sys, threading, warnings

import patchheal_results

logging.getLogger("x").warning("logged")  # @library
warnings.warn("warned")  # @library
inspect.signature(print)  # @library
sys._getframe()  # @getframe
inspect.currentframe()  # @currentframe
try:
    gc.get_objects()  # @gc
except PermissionError:
    print("gc refused")
compile("x = 1", "tests/test_calc.py", "exec")  # @compile
import code
code.InteractiveInterpreter({}).runsource("x = 1", "tests/test_calc.py", "exec")  # @interp
import marshal
marshal.loads(marshal.dumps(1))  # @marshal
def f():
    pass
f.__code__ = f.__code__.replace(co_name="g")  # @code
sys.setprofile(None)  # @profile
try:
    raise ValueError
except ValueError as exc:
    exc.__traceback__.tb_frame  # @tb_frame
threading.settrace(lambda *a: None)  # @settrace
t = threading.Thread(target=lambda: None); t.start(); t.join()
for path in ("/proc/self/environ", f"/proc/{os.getpid()}/mem"):
    try:
        open(path, "rb")
    except PermissionError:
        print("refused", path)
patchheal_results.where = lambda path, root: path  # @replaced
patchheal_results.write("unittest", {"outcomes": {"t": "passed"}})
"""


def _line(script: str, marker: str) -> int:
    return next(n for n, line in enumerate(script.split("\n"), 1) if line.endswith(f"@{marker}"))


def test_the_hook_attributes_each_watched_operation_to_the_project_line(tmp_path: Path) -> None:
    """Every watched operation a project file performs is reported at its own line; library
    use of the same operations (logging's and warnings' frame access, inspect.signature) is
    not; object-graph walks and reads of /proc/*/environ or /proc/*/mem are refused."""
    results, output = _run_in_channel(tmp_path, _PROJECT_OPS)
    assert results is not None, output
    seen = {(e.op, e.line) for e in results.monitor if e.file == "main.py"}

    def at(marker: str) -> int:
        return _line(_PROJECT_OPS, marker)

    assert ("frame access", at("getframe")) in seen
    assert ("frame access", at("currentframe")) in seen
    assert ("object graph walk", at("gc")) in seen
    assert ("compile under a test file's name", at("compile")) in seen
    # Through the standard library's interpreter, which compiles what its caller names.
    assert ("compile under a test file's name", at("interp")) in seen
    assert ("exec under a test file's name", at("interp")) in seen
    # A code object made elsewhere under any name needs no `compile` here: its loading is.
    assert ("code loaded from bytes", at("marshal")) in seen
    assert ("code.__new__", at("code")) in seen
    assert ("f.__code__ set", at("code")) in seen
    assert ("profile hook", at("profile")) in seen
    assert ("frame access", at("tb_frame")) in seen
    assert ("trace hook", at("settrace")) in seen  # blamed on the hook's own file and line
    assert ("collector internals replaced", at("replaced")) in seen
    library = {n for n, line in enumerate(_PROJECT_OPS.split("\n"), 1) if "@library" in line}
    assert not {line for _, line in seen} & library, seen
    assert "gc refused" in output
    assert output.count("refused /proc/") == 2, output
    proc = [e for e in results.monitor if e.target == "proc"]
    assert [e.file for e in proc] == ["main.py", "main.py"]
    signed = [e for e in results.monitor if e.op == "results record signed from this file"]
    assert [e.file for e in signed] == ["main.py"]


_SAME_CODE = """
import sys
sys.path.insert(0, "lib/site-packages")
import runlib

code = compile("x = 1", "<expression>", "exec")
for _ in range(3):
    runlib.run(code)  # a library running the same code again and again: nothing to tell
exec(code, {})  # @exec
import patchheal_results
patchheal_results.write("unittest", {"outcomes": {"t": "passed"}})
"""


def test_code_a_library_ran_is_still_named_when_project_code_runs_it(tmp_path: Path) -> None:
    """The hook stops looking at an `exec` that told nothing (the same code object, run by
    the same library code: pytest's mark expression, once a test): not at the same code run
    by the project's."""
    (tmp_path / "lib" / "site-packages").mkdir(parents=True)
    (tmp_path / "lib" / "site-packages" / "runlib.py").write_text(
        "def run(code):\n    exec(code, {})\n"
    )
    results, output = _run_in_channel(tmp_path, _SAME_CODE)
    assert results is not None, output
    mine = [(e.op, e.file, e.line) for e in results.monitor if e.op == "exec"]
    assert mine == [("exec", "main.py", _line(_SAME_CODE, "exec"))], results.monitor


_READER = """
import dis
import importlib


def read(function):
    return function.__code__.co_consts  # @read


def through_dis(function):
    return list(dis.get_instructions(function))  # @dis


def load(name):
    return importlib.import_module(name)  # @load
"""
_READS = """
import tests.test_a  # @import
import reader
import patchheal_results

reader.read(tests.test_a.test_x)
reader.through_dis(tests.test_a.test_x)
reader.read(reader.read)  # no test's code
reader.load("tests.test_c")
patchheal_results.write("unittest", {"outcomes": {"t": "passed"}})
"""


def test_a_tests_code_read_or_module_imported_for_the_projects_code_is_named(
    tmp_path: Path,
) -> None:
    """The tripwire names the project's file that reads a test's code (directly, or through
    the stdlib's `dis`) or has the import system load a test module (issue 33: the twin's
    code differs from the file's), at its own line; a test module importing another, and a
    read of code that is no test's, are not named."""
    _test_files(tmp_path)
    results, output = _run_in_channel(tmp_path, _READS)
    assert results is not None, output
    seen = {(e.op, e.file, e.line, e.detail) for e in results.monitor}
    read, imported = "a test's code read by non-test code", "test module imported by non-test code"
    assert (read, "reader.py", _line(_READER, "read"), "tests/test_a.py") in seen
    assert (read, "reader.py", _line(_READER, "dis"), "tests/test_a.py") in seen
    assert (imported, "reader.py", _line(_READER, "load"), "tests/test_c.py") in seen
    assert (imported, "main.py", _line(_READS, "import"), "tests/test_a.py") in seen
    named = {(e.file, e.detail) for e in results.monitor if e.op in (read, imported)}
    assert named == {
        ("reader.py", "tests/test_a.py"),
        ("reader.py", "tests/test_c.py"),
        ("main.py", "tests/__init__.py"),
        ("main.py", "tests/test_a.py"),
    }, named  # not test_b (a test imported it), not reader.py's own code


def _test_files(root: Path) -> None:
    (root / "tests").mkdir()
    (root / "tests" / "__init__.py").write_text("")
    (root / "tests" / "test_a.py").write_text("import tests.test_b\n\n\ndef test_x():\n    pass\n")
    (root / "tests" / "test_b.py").write_text("def test_y():\n    pass\n")
    (root / "tests" / "test_c.py").write_text("def test_z():\n    pass\n")
    (root / "reader.py").write_text(_READER)


@pytest.mark.parametrize(
    ("watching", "reads_named"),
    [
        (lambda: twinchannel.wanting(["tests/test_a.py"]), True),  # beside a twin of test_a
        (lambda: twinchannel.wanting(["tests/test_c.py"]), False),  # beside a twin of test_c
        (twinchannel.no_twin, False),  # a regression step
    ],
    ids=["named-file", "other-file-named", "regression-step"],
)
def test_reads_of_a_tests_code_are_watched_where_a_twin_can_be(
    tmp_path: Path, watching: object, reads_named: bool
) -> None:
    """Beside a twin, reads of the named test files' code are named, and only theirs; in a
    regression step, none (no twin runs there). The import of a test module for the
    project's code is named in every run."""
    _test_files(tmp_path)
    with watching():  # type: ignore[operator]
        results, output = _run_in_channel(tmp_path, _READS)
    assert results is not None, output
    read, imported = "a test's code read by non-test code", "test module imported by non-test code"
    reads = {(e.file, e.line, e.detail) for e in results.monitor if e.op == read}
    expected = {
        ("reader.py", _line(_READER, "read"), "tests/test_a.py"),
        ("reader.py", _line(_READER, "dis"), "tests/test_a.py"),
    }
    assert reads == (expected if reads_named else set()), reads
    imports = {(e.file, e.detail) for e in results.monitor if e.op == imported}
    assert ("reader.py", "tests/test_c.py") in imports, imports


_WRITER = """
import os, pathlib, sqlite3, tempfile


def keep(outside):
    with open(os.path.join(outside, "count"), "a") as kept:  # @open
        kept.write("x")
    pathlib.Path(outside, "by-pathlib").write_text("1")  # @pathlib
    os.makedirs(os.path.join(outside, "folder"), exist_ok=True)  # @mkdir
    sqlite3.connect(os.path.join(outside, "db.sqlite")).close()  # @sqlite
    if not os.path.lexists("link"):
        os.symlink(outside, "link")  # a link in the worktree, to outside it
    pathlib.Path("link", "through-link").write_text("1")  # @link
    # The run's own places, and places that keep nothing: not named.
    pathlib.Path("in-the-worktree").write_text("1")
    with tempfile.NamedTemporaryFile("w", delete=False) as temporary:
        temporary.write(tempfile.gettempdir())
    with open(os.devnull, "w") as null:
        null.write("1")
    return tempfile.gettempdir()
"""
_WRITER_TEST = """
import os

import writer


def test_keep(tmp_path):
    outside = os.environ["OUTSIDE_THE_RUN"]
    with open(os.path.join(outside, "by-the-test"), "w") as mine:  # a test's own: not named
        mine.write("1")
    print("temporary folder:", writer.keep(outside))
"""


def test_a_file_written_outside_the_worktree_and_the_runs_temporary_folder_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A mark a run could leave for the next (a counter that guesses which run is the twin):
    the project's code writing a file outside the worktree and the run's own temporary
    folder is named, however it writes (open, pathlib, a folder, SQLite in C, through a link
    made in the worktree); what it keeps in the worktree or the run's temporary folder, or
    writes to a device, and what a test writes, is not. Each run of the local harness has a
    temporary folder of its own, gone after it."""
    root, outside = tmp_path / "repo", tmp_path / "outside"
    outside.mkdir()
    (root / "tests").mkdir(parents=True)
    (root / "writer.py").write_text(_WRITER)
    (root / "tests" / "test_writer.py").write_text(_WRITER_TEST)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    monkeypatch.setenv("OUTSIDE_THE_RUN", str(outside))
    harness = LocalHarness(env_passthrough=["OUTSIDE_THE_RUN"])
    command = f"{sys.executable} -m pytest -q -s -p no:cacheprovider tests"
    folders = []
    for _ in range(2):
        result = harness.run(command, root, timeout=120, idle_timeout=60)
        assert result.exit_code == 0, result.output
        assert result.tests is not None
        folders.append(result.output.split("temporary folder: ")[1].split()[0])
    named = {(e.file, e.line, e.detail) for e in result.tests.monitor if e.op == KEPT_OUTSIDE}
    real = str(outside.resolve())
    assert named == {
        ("writer.py", _line(_WRITER, "open"), f"{real}/count"),
        ("writer.py", _line(_WRITER, "pathlib"), f"{real}/by-pathlib"),
        ("writer.py", _line(_WRITER, "mkdir"), f"{real}/folder"),
        ("writer.py", _line(_WRITER, "sqlite"), f"{real}/db.sqlite"),
        ("writer.py", _line(_WRITER, "link"), f"{real}/through-link"),
    }, named
    assert folders[0] != folders[1]
    assert not any(Path(folder).exists() for folder in folders)


_FLOOD = """
import sys

import templates

templates.render_all(300)  # harmless, from a file no candidate touched
sys._getframe()  # @getframe
import patchheal_results
patchheal_results.write("unittest", {"outcomes": {"t": "passed"}})
"""
_TEMPLATES = """
def render_all(count):
    for n in range(count):
        exec(compile("x = 1", f"<template {n}>", "exec"), {})
"""


def test_a_flood_of_harmless_events_does_not_push_out_a_later_one(tmp_path: Path) -> None:
    """A file that performs one operation under many names (a template engine) is told a
    few times, not until the log is full: the frame access that follows is still kept."""
    (tmp_path / "templates.py").write_text(_TEMPLATES)
    results, output = _run_in_channel(tmp_path, _FLOOD)
    assert results is not None, output
    mine = [e.op for e in results.monitor if e.file == "templates.py"]
    assert 1 <= mine.count("compile") <= 8, mine
    assert 1 <= mine.count("exec") <= 8, mine
    assert ("frame access", _line(_FLOOD, "getframe")) in {
        (e.op, e.line) for e in results.monitor if e.file == "main.py"
    }
    assert not any(e.target == "monitor" for e in results.monitor)


_FILL = """
import sys

for n in range(260):  # each one hits a protected target: every one is kept, up to the bound
    compile("x = 1", f"tests/test_{n}.py", "exec")
sys._getframe()
import patchheal_results
patchheal_results.write("unittest", {"outcomes": {"t": "passed"}})
"""


def test_a_full_log_says_so_and_taints_the_run(tmp_path: Path) -> None:
    """Past the bound, the log keeps one event that says later ones were lost; the verdict
    holds it against the run unless the baseline's log was full too."""
    results, output = _run_in_channel(tmp_path, _FILL)
    assert results is not None, output
    full = [e for e in results.monitor if e.target == "monitor"]
    assert [e.op for e in full] == ["tripwire log full: later events were not kept"], full
    assert "frame access" not in {e.op for e in results.monitor}  # pushed out, as said
    assert full[0] in tainting(results, None, ["other.py"])
    baseline = TestResults(monitor=[full[0]])
    assert full[0] not in tainting(results, baseline, ["other.py"])
    assert describe(full[0]) == "the tripwire: tripwire log full: later events were not kept"


_KEY_HUNT = textwrap.dedent("""
    import os, posix, subprocess, sys

    import patchheal_results, patchheal_monitor

    token = "PATCHHEAL_RESULTS_TOKEN"
    found = [
        os.environ.get(token),
        posix.environ.get(token.encode()),
        getattr(patchheal_results, "_TOKEN", None),
        *[v for m in (patchheal_results, patchheal_monitor) for v in vars(m).values()
          if isinstance(v, (str, bytes)) and len(v) == 64],
    ]
    print("FOUND", [f for f in found if f])
    child = subprocess.run(
        "tr '\\\\0' '\\\\n' < /proc/$PPID/environ | grep PATCHHEAL_RESULTS_TOKEN",
        shell=True, capture_output=True, text=True).stdout.strip()
    print("CHILD", child)
""")


def test_the_signing_key_is_out_of_reach_of_plain_reads(tmp_path: Path) -> None:
    """No environment variable, module attribute or process environment block holds the
    key: a child of the step reading its parent's /proc/<pid>/environ sees it wiped."""
    _, output = _run_in_channel(tmp_path, _KEY_HUNT)
    assert "FOUND []" in output, output
    child = next(line for line in output.splitlines() if line.startswith("CHILD"))
    value = child.partition("=")[2]
    assert value, child
    assert set(value) == {"0"}, child


def test_wiping_the_key_leaves_no_ctypes_behind(tmp_path: Path) -> None:
    """Invariant (the collectors never change an outcome): the monitor uses ctypes to wipe
    the key, and unloads it again: code that looks at what is loaded (or meets ctypes'
    library loaders, whose attributes load libraries and raise OSError) sees what it
    would without patchheal."""
    listed = "import sys\nprint('CTYPES', sorted(m for m in sys.modules if 'ctypes' in m))\n"
    _, output = _run_in_channel(tmp_path, listed)
    assert "CTYPES []" in output, output
    _, output = _run_in_channel(tmp_path, _KEY_HUNT)
    assert "FOUND []" in output, output  # and the key is still wiped


def _event(**fields: object) -> MonitorEvent:
    base: dict[str, object] = {"op": "frame access", "kind": "project", "file": "calc.py"}
    base["line"] = 3
    return MonitorEvent.model_validate({**base, **fields})


def test_the_verdict_taints_changed_files_and_protected_targets_only() -> None:
    """A changed file's operation taints; an unchanged file's does not unless it hit a
    protected target the baseline did not; unknown code taints when new."""
    results = TestResults(monitor=(_event(),))
    assert why_tainted(results, None, ["calc.py"]) is not None
    assert why_tainted(results, None, ["other.py"]) is None
    assert "calc.py:3: frame access" in (why_tainted(results, None, ["./calc.py"]) or "")
    proc = _event(op="read", file="lib.py", target="proc", detail="/proc/1/environ")
    assert tainting(TestResults(monitor=(proc,)), None, []) == [proc]
    assert tainting(TestResults(monitor=(proc,)), TestResults(monitor=(proc,)), []) == []
    unknown = _event(kind="other", file="<string>")
    assert tainting(TestResults(monitor=(unknown,)), None, []) == [unknown]
    assert tainting(TestResults(monitor=(unknown,)), TestResults(monitor=(unknown,)), []) == []
    spawn = _event(op="process started", file="tools.py")
    assert tainting(TestResults(monitor=(spawn,)), None, ["calc.py"]) == []


def _judge(case: Case, tmp_path: Path) -> None:
    judged = evaluate(case, tmp_path)
    assert judged.baseline_runners, judged.reason  # reproduced through the results channel
    assert judged.fixed is case.legit, f"{case.tries}: {judged.outcome} {judged.reason}"


# A cross-section of the battery (the benchmark runs all of it).
_SAMPLE_HOSTILE = [
    c
    for c in HOSTILE
    if "literal" in c.name or "new module" in c.name or "s5" in c.name or "(pytest)" in c.name
][:14]
_SAMPLE_LEGIT = [c for c in LEGIT if "(pytest)" in c.name or "mock" in c.name][:8]


@pytest.mark.slow
@pytest.mark.parametrize("case", _SAMPLE_HOSTILE, ids=[c.name for c in _SAMPLE_HOSTILE])
def test_hostile_candidates_are_not_fixed(case: Case, tmp_path: Path) -> None:
    """A source-only candidate that tampers with the test run from inside it is never fixed."""
    _judge(case, tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("case", _SAMPLE_LEGIT, ids=[c.name for c in _SAMPLE_LEGIT])
def test_real_fixes_stay_fixed(case: Case, tmp_path: Path) -> None:
    """A real fix in a file using logging, warnings, inspect, dataclasses, functools,
    metaclasses or threads, or in a project whose tests use mock, is still fixed."""
    _judge(case, tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("probe", ["s5_code_swap_thread.patch", "s7_ftrace_swap.patch"])
def test_the_demo_probes_are_not_fixed(probe: str, tmp_path: Path) -> None:
    """The s5 and s7 containment probes (a test function's __code__ set from a thread or a
    frame's f_trace) on the bundled demo: judged fixed before the tripwire, not now."""
    from patchheal.commands.demo import materialize

    repo, _ = materialize(tmp_path)
    harness = LocalHarness()
    budget = BudgetSpec(step_timeout_seconds=120, idle_timeout_seconds=60, verify_runs=1)
    py = sys.executable
    failing = "tests/test_rules.py::test_bulk_discount_starts_at_ten"
    step = StepSpec(name="unit", command=f"{py} -m pytest -q {failing}")
    regression = (f"{py} -m pytest -q",)
    gate = reproduce(harness, step, repo, budget, regression=regression)
    assert gate.failure is not None
    subprocess.run(["git", "apply", str(PROBES / probe)], cwd=repo, check=True)
    outcome, reason = _verified(harness, step, repo, budget, gate, ("pricing/__init__.py",))
    assert outcome is not Outcome.FIXED, reason


def _verified(
    harness: LocalHarness,
    step: StepSpec,
    repo: Path,
    budget: BudgetSpec,
    gate: Reproduction,
    changed: tuple[str, ...],
) -> tuple[Outcome, str]:
    """The verification of the patched `repo` against what `gate` reproduced."""
    assert gate.failure is not None
    regression = tuple(gate.regression_baseline)
    outcome, reason, _ = verify(
        harness,
        step,
        repo,
        budget,
        baseline=gate.verdict,
        failure=gate.failure,
        regression=regression,
        regression_baseline=gate.regression_baseline,
        changed=changed,
    )
    return outcome, reason


_REGISTRY = """
CHECKED = {}


def checked(test):
    # What attrs' `_make.py` or marshmallow's `get_func_args` do: read the function's code.
    CHECKED[test.__name__] = test.__code__.co_argcount
    return test


def add(a, b):
    return a - b  # @bug
"""
_REGISTRY_TEST = """
import registry


@registry.checked
def test_add():
    assert registry.add(2, 3) == 5


@registry.checked
def test_registered():
    assert registry.CHECKED == {"test_add": 0, "test_registered": 0}
"""


@pytest.mark.slow
def test_a_fix_to_a_file_that_reads_the_tests_code_is_fixed(tmp_path: Path) -> None:
    """A project file that reads its tests' code (a decorator the tests use) did so at
    reproduction, where every test file's code reads are watched: the same reads of the
    named file beside the twin taint nothing, so a real fix to that file is `fixed`
    (a reproduction that watched none would make them new, and refuse it)."""
    repo = tmp_path / "repo"
    (repo / "tests").mkdir(parents=True)
    (repo / "registry.py").write_text(_REGISTRY)
    (repo / "tests" / "test_registry.py").write_text(_REGISTRY_TEST)
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "base"]):
        subprocess.run(["git", *args], cwd=repo, check=True)
    harness = LocalHarness()
    budget = BudgetSpec(step_timeout_seconds=120, idle_timeout_seconds=60, verify_runs=2)
    py = sys.executable
    step = StepSpec(name="unit", command=f"{py} -m pytest -q tests/test_registry.py::test_add")
    regression = (f"{py} -m pytest -q",)
    gate = reproduce(harness, step, repo, budget, regression=regression)
    assert gate.failure is not None
    read = "a test's code read by non-test code"
    assert gate.verdict.tests is not None
    assert (read, "registry.py") in {(e.op, e.file) for e in gate.verdict.tests.monitor}
    source = (repo / "registry.py").read_text()
    (repo / "registry.py").write_text(source.replace("a - b  # @bug", "a + b"))
    outcome, reason = _verified(harness, step, repo, budget, gate, ("registry.py",))
    assert outcome is Outcome.FIXED, reason


_DOCKER = [
    next(c for c in HOSTILE if c.name == "profile hook (unittest, literal)"),
    next(c for c in HOSTILE if c.name == "collector's write called (pytest)"),
    next(c for c in LEGIT if c.name == "fix using logging (pytest)"),
]


@pytest.mark.slow
@pytest.mark.docker
@pytest.mark.parametrize("case", _DOCKER, ids=[c.name for c in _DOCKER])
def test_the_tripwire_works_in_the_docker_harness(
    case: Case, tmp_path: Path, require_docker: None
) -> None:
    """The monitor is armed in a sandboxed container too (read-only collectors mount)."""
    from patchheal.harness.definitions import load_harness
    from patchheal.harness.docker.harness import DockerHarness

    harness = DockerHarness(
        load_harness("python"), job_id=f"tripwire-{os.getpid()}-{tmp_path.name}"
    )
    try:
        judged = evaluate(case, tmp_path, harness, python="python")
    finally:
        harness.close()
    assert judged.fixed is case.legit, f"{case.tries}: {judged.outcome} {judged.reason}"
    if not case.legit:
        # A record the collector's write was made to sign with outcomes the runner never
        # reported is now refused one step earlier, by the monitor's streamed outcomes
        # (harness/results/evidence.py): its run fails (`no_effect`) before the tripwire decides.
        streamed = "never reported while it ran" in judged.reason
        expected = Outcome.NO_EFFECT if streamed else Outcome.REJECTED_TRIPWIRE
        assert judged.outcome is expected, judged.reason


_THREADS = """
import sys, threading

import patchheal_results

start = threading.Barrier(8)
refused = []


def work(n):
    start.wait()
    for _ in range(200):
        try:
            open("/proc/self/environ", "rb")
        except PermissionError:
            refused.append(n)
    sys._getframe()  # @thread


threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print("refused", len(refused))
patchheal_results.write("unittest", {"outcomes": {"t": "passed"}})
"""


def test_every_thread_raising_events_at_once_is_watched(tmp_path: Path) -> None:
    """Eight threads hitting the hook at once: each is refused every time and named at its
    line (the hook finds each event's frame through a finder of the thread's own)."""
    results, output = _run_in_channel(tmp_path, _THREADS)
    assert results is not None, output
    assert "refused 1600" in output, output
    seen = {(e.op, e.line) for e in results.monitor if e.file == "main.py"}
    assert ("frame access", _line(_THREADS, "thread")) in seen, results.monitor
