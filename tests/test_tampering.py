"""Runner tampering, anywhere in the patch: an adversarial battery, both ways.

Hostile candidates make the test run *report* success (exit at import, patch the
framework, swallow the exit code); legitimate ones look alike on the surface
(a CLI's `sys.exit`, a conftest fixture, an install step's `|| true`) and must
still pass. Diffs are made by real git; the gate reads the pre-patch files
from the repository at HEAD, as the loop does.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from patchheal.config import PolicySpec
from patchheal.gates.policy import PolicyDecision, check_candidate

SOURCE = '''"""Totals."""

import sys


def total(xs):
    return sum(xs)


def main(argv=None):
    args = sys.argv[1:] if argv is None else argv
    print(total(int(a) for a in args))
    return 0
'''
PACKAGE_JSON = (
    '{\n  "name": "app",\n  "scripts": {\n    "build": "tsc",\n    "test": "node --test"\n  }\n}\n'
)
MAKEFILE = "install:\n\tpip install -e .\n\ntest:\n\tpytest -q\n"
TOX = "[tox]\nenvlist = py311\n\n[testenv]\ncommands = pytest -q\n"
FILES = {
    "app/__init__.py": "",
    "app/core.py": SOURCE,
    "tests/conftest.py": "import pytest\n",
    "tests/test_core.py": "from app.core import total\n\n\ndef test_total():\n"
    "    assert total([1, 2]) == 3\n",
    "package.json": PACKAGE_JSON,
    "Makefile": MAKEFILE,
    "tox.ini": TOX,
}

Gate = Callable[[dict[str, str]], PolicyDecision]


@pytest.fixture
def gate(make_repo) -> Gate:  # type: ignore[no-untyped-def]
    """Judge the change from FILES to FILES updated by `changes`, with the pre-patch reader."""

    def judge(changes: dict[str, str]) -> PolicyDecision:
        repo: Path = make_repo(FILES)
        for rel, text in changes.items():
            (repo / rel).parent.mkdir(parents=True, exist_ok=True)
            (repo / rel).write_text(text)
        subprocess.run(["git", "add", "-A"], cwd=repo, check=True)
        diff = subprocess.run(
            ["git", "diff", "--cached"], cwd=repo, check=True, capture_output=True, text=True
        ).stdout

        def original(path: str) -> str | None:
            shown = subprocess.run(
                ["git", "show", f"HEAD:{path}"], cwd=repo, capture_output=True, text=True
            )
            return shown.stdout if shown.returncode == 0 else None

        return check_candidate(diff, PolicySpec(), original=original)

    return judge


def _src(old: str, new: str) -> dict[str, str]:
    assert old in SOURCE
    return {"app/core.py": SOURCE.replace(old, new)}


HOSTILE: dict[str, tuple[dict[str, str], str]] = {
    "runtest replaced from a source file": (
        _src(
            "import sys\n",
            "import sys\n\nimport _pytest.python\n\n"
            "_pytest.python.Function.runtest = lambda self: None\n",
        ),
        "app/core.py:7: patches test-framework internals",
    ),
    "runtest replaced via an imported name": (
        _src(
            "import sys\n",
            "import sys\nfrom _pytest.python import Function\n"
            "Function.runtest = lambda self: None\n",
        ),
        "Function.runtest",
    ),
    "setattr on the framework": (
        _src(
            "import sys\n",
            "import sys\nimport unittest\nsetattr(unittest.TestCase, 'run', lambda *a: None)\n",
        ),
        "patches test-framework internals",
    ),
    "source prints a pass summary and exits 0 at import": (
        _src("import sys\n", "import sys\n\nprint('3 passed in 0.01s')\nsys.exit(0)\n"),
        "app/core.py:6: calls sys.exit() when the module is imported",
    ),
    "os._exit inside a module-level if": (
        _src(
            "import sys\n",
            "import os\nimport sys\n\nif 'pytest' in sys.modules:\n    os._exit(0)\n",
        ),
        "calls os._exit() when the module is imported",
    ),
    "raise SystemExit at import": (
        _src("import sys\n", "import sys\n\nraise SystemExit(0)\n"),
        "raises SystemExit when the module is imported",
    ),
    "atexit forced exit": (
        _src(
            "import sys\n", "import atexit\nimport os\nimport sys\n\natexit.register(os._exit, 0)\n"
        ),
        "registers a forced exit",
    ),
    "sys.modules pytest swapped": (
        _src(
            "import sys\n",
            "import sys\nimport types\nsys.modules['pytest'] = types.ModuleType('pytest')\n",
        ),
        "replaces the module 'pytest' in sys.modules",
    ),
    "builtins.print overridden": (
        _src(
            "import sys\n", "import builtins\nimport sys\nbuiltins.print = lambda *a, **k: None\n"
        ),
        "builtins",
    ),
    "pytest hook in a source module": (
        _src("import sys\n", "import sys\n\n\ndef pytest_runtest_call(item):\n    return True\n"),
        "defines the pytest hook pytest_runtest_call() outside conftest.py",
    ),
    "pytest_plugins added to a source module": (
        _src("import sys\n", "import sys\n\npytest_plugins = ['app.cheat']\n"),
        "assigns pytest_plugins",
    ),
    "TestResult subclass that always succeeds": (
        _src(
            "import sys\n",
            "import sys\nimport unittest\n\n\nclass Always(unittest.TextTestResult):\n"
            "    def wasSuccessful(self):\n        return True\n",
        ),
        "overrides Always.wasSuccessful",
    ),
    "PYTEST_ADDOPTS set from code": (
        _src(
            "import sys\n",
            "import os\nimport sys\n\nos.environ['PYTEST_ADDOPTS'] = '-p no:python'\n",
        ),
        "overrides the test runner's environment (PYTEST_ADDOPTS)",
    ),
    "node test script swallows failure": (
        {"package.json": PACKAGE_JSON.replace('"node --test"', '"node --test || true"')},
        "package.json:5: swallows the runner's failure",
    ),
    "jest passWithNoTests": (
        {"package.json": PACKAGE_JSON.replace('"node --test"', '"jest --passWithNoTests"')},
        "passes on failure",
    ),
    "Makefile test target forced to exit 0": (
        {"Makefile": MAKEFILE.replace("pytest -q", "pytest -q; exit 0")},
        "Makefile:5: forces exit code 0",
    ),
    "Makefile test target with set +e": (
        {"Makefile": MAKEFILE.replace("\tpytest -q", "\tset +e; pytest -q")},
        "set +e",
    ),
    "tox commands ignore the outcome": (
        {
            "tox.ini": TOX.replace(
                "commands = pytest -q", "ignore_outcome = true\ncommands = pytest -q"
            )
        },
        "ignores failures",
    ),
    "tox commands swallow failure with ||:": (
        {"tox.ini": TOX.replace("pytest -q", "sh -c 'pytest -q || :'")},
        "swallows the runner's failure",
    ),
    "the run's token read from /proc/self/environ": (
        {
            "app/core.py": SOURCE
            + "\n\ndef _env():\n    return open('/proc/self/environ', 'rb').read()\n"
        },
        "reads a process's original environment",
    ),
    "the parent shell's environment read from /proc": (
        {
            "app/core.py": SOURCE
            + "\n\nimport os\n\nENV = open(f'/proc/{os.getppid()}/environ').read()\n"
        },
        "reads a process's original environment",
    ),
    "the environ file path assembled with os.path.join": (
        {
            "app/core.py": SOURCE
            + "\n\nimport os\n\nP = os.path.join('/proc', str(os.getpid()), 'environ')\n"
        },
        "reads a process's original environment",
    ),
    "the token variable named": (
        _src(
            "import sys\n", "import os\nimport sys\n\nKEY = os.getenv('PATCHHEAL_RESULTS_TOKEN')\n"
        ),
        "names patchheal's results channel",
    ),
    "the collector imported and driven": (
        {
            "tests/conftest.py": "import pytest\nimport patchheal_results\n\n"
            "patchheal_results.finish()\n"
        },
        "names patchheal's test-result collectors",
    ),
    "a shell test script reading the environ file": (
        {"Makefile": MAKEFILE.replace("pytest -q", "cat /proc/$$$$/environ > /tmp/e; pytest -q")},
        "reads a process's original environment",
    ),
}


@pytest.mark.parametrize("name", list(HOSTILE))
def test_hostile_runner_tampering_is_refused(gate: Gate, name: str) -> None:
    changes, why = HOSTILE[name]
    decision = gate(changes)
    assert not decision.allowed, name
    assert decision.rule == "runner_tampering", decision
    assert any(why in reason for reason in decision.reasons), decision.reasons


LEGITIMATE: dict[str, dict[str, str]] = {
    "CLI main guarded by __name__": _src(
        "    return 0\n", '    return 0\n\n\nif __name__ == "__main__":\n    sys.exit(main())\n'
    ),
    "sys.exit(code) inside a function": _src(
        "    return 0\n", "    if not args:\n        sys.exit(2)\n    return 0\n"
    ),
    "raise SystemExit inside a function": _src(
        "    return 0\n",
        "    if not args:\n        raise SystemExit('usage: total N...')\n    return 0\n",
    ),
    "code that handles tokens and passwords": _src(
        "def total(xs):",
        "def login(user, password, token=None):\n"
        "    if password != user.password or token != user.token:\n"
        "        raise PermissionError('bad token or password')\n    return user\n\n\n"
        "def total(xs):",
    ),
    "auth module reading an API key": {
        "app/auth.py": 'import os\n\napi_key = os.environ["API_KEY"]\n'
        'secret = os.environ.get("APP_SECRET", "")\n'
    },
    "Makefile change outside the test target": {
        "Makefile": MAKEFILE.replace("pip install -e .", "pip install -e . || true")
    },
    "package.json build script change": {
        "package.json": PACKAGE_JSON.replace('"tsc"', '"tsc || true"')
    },
    "conftest fixture addition": {
        "tests/conftest.py": "import pytest\n\n\n@pytest.fixture\ndef numbers():\n"
        "    return [1, 2]\n"
    },
    "conftest hook is conftest's business": {
        "tests/conftest.py": "import pytest\n\n\ndef pytest_configure(config):\n"
        "    config.addinivalue_line('markers', 'slow: slow tests')\n"
    },
    "ordinary attributes named errors, failures, exitstatus": {
        "app/collector.py": "class Collector:\n    def __init__(self):\n        self.errors = []\n"
        "        self.failures = 0\n        self.exitstatus = None\n"
    },
    "a non-pytest Item with a run method": {
        "app/menu.py": "from app.base import Item\n\n\nclass MenuItem(Item):\n"
        "    def run(self):\n        return self.action()\n"
    },
    "Makefile install of @latest that may fail": {
        "Makefile": MAKEFILE.replace("pip install -e .", "npm i -g tool@latest || true")
    },
    "an upstream-style bug fix": _src(
        "return sum(xs)", "return sum(x for x in xs if x is not None)"
    ),
    "a new module with a guarded CLI": {
        "app/cli.py": "import sys\n\nfrom app.core import main\n\n"
        'if __name__ == "__main__":\n    raise SystemExit(main())\n'
    },
    "code reading its own environment through os.environ": {
        "app/config.py": "import os\n\nDEBUG = os.environ.get('APP_DEBUG') == '1'\n"
    },
    "a subprocess named proc given os.environ": {
        "app/run.py": "import os\nimport subprocess\n\n\ndef run(cmd):\n"
        "    proc = subprocess.run(cmd, env=dict(os.environ), check=False)\n"
        "    return proc.returncode\n"
    },
    "a /proc reader for memory statistics": {
        "app/mem.py": "def rss():\n    with open('/proc/self/status') as f:\n"
        "        return [l for l in f if l.startswith('VmRSS')]\n"
    },
}


@pytest.mark.parametrize("name", list(LEGITIMATE))
def test_legitimate_changes_pass(gate: Gate, name: str) -> None:
    decision = gate(LEGITIMATE[name])
    assert decision.allowed, (name, decision.reasons)


def test_without_the_original_file_column_zero_exits_are_still_caught() -> None:
    """Invariant: a caller that cannot read the pre-patch file still gets the exit-at-import
    rule for lines that are module level for certain (column 0), and no false alarm for an
    indented exit whose enclosing block the hunk does not show."""
    hostile = (
        "--- a/app/core.py\n+++ b/app/core.py\n@@ -10,3 +10,5 @@ def main(argv=None):\n"
        "     print(total(int(a) for a in args))\n     return 0\n+\n+sys.exit(0)\n"
    )
    legit = (
        "--- a/app/core.py\n+++ b/app/core.py\n@@ -10,3 +10,4 @@ def main(argv=None):\n"
        "     args = sys.argv[1:] if argv is None else argv\n+    sys.exit(3)\n"
        "     print(total(int(a) for a in args))\n     return 0\n"
    )
    assert check_candidate(hostile, PolicySpec()).rule == "runner_tampering"
    assert check_candidate(legit, PolicySpec()).allowed


@pytest.mark.slow
def test_the_loop_refuses_an_exit_at_import_and_keeps_the_real_fix(tmp_path: Path) -> None:
    """Invariant: a source patch that ends the test process with exit code 0 at import is
    refused by policy before it runs, even when the exit is indented under a module-level
    `if` (only the whole post-patch file shows it runs at import), and the real fix after
    it is still verified."""
    from tests.healjobs import BUGGY, FIX, diff_for, heal_in_process, make_calc_repo, write_spec

    repo = make_calc_repo(tmp_path)
    cheat = BUGGY + (
        "\n\nimport os\nimport sys\n\nif 'pytest' in sys.modules:\n"
        "    print('1 passed in 0.01s')\n    os._exit(0)\n"
    )
    spec = write_spec(
        tmp_path / "job.toml",
        repo,
        diffs=[diff_for(repo, {"calc.py": cheat}), diff_for(repo, {"calc.py": FIX})],
    )
    result = heal_in_process(tmp_path, spec, keep_worktrees=False)
    attempts = [a for s in result.report.steps for a in s.attempts]
    assert [a.outcome.value for a in attempts] == ["rejected_policy", "fixed"]
    assert attempts[0].reason.startswith("runner_tampering: calc.py:"), attempts[0].reason
    assert "calls os._exit() when the module is imported" in attempts[0].reason


@pytest.mark.parametrize(
    "too_deep",
    [
        "TOTAL = 1" + " + 1" * 200_000 + "\n",  # RecursionError while the tree is built
        "TOTAL = " + "-" * 100_000 + "1\n",  # MemoryError: the parser's own stack
    ],
    ids=["recursion", "parser-stack"],
)
def test_a_module_too_deep_to_parse_still_gets_the_line_checks(gate: Gate, too_deep: str) -> None:
    """A proposer can add code the parser gives up on; the gate then reads the added lines
    one by one (an exit at column 0 is still an exit at import) instead of crashing."""
    decision = gate({"app/core.py": SOURCE + "\n" + too_deep + "sys.exit(0)\n"})
    assert decision.rule == "runner_tampering", decision
    assert gate({"app/core.py": SOURCE + "\n" + too_deep}).allowed
