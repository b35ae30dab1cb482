"""The policy gate, each rule both ways, on diffs made by real git."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from pydantic import ValidationError

from patchheal.config import PolicySpec
from patchheal.gates.policy import PolicyDecision, check_candidate, path_matches

TEST_FILE = """import pytest


def test_total():
    assert total([1, 2]) == 3


def test_names():
    result = names()
    assert result == [
        "a",
        "b",
    ]


class TestThing(unittest.TestCase):
    def test_equal(self):
        self.assertEqual(thing(), 3)
"""
SOURCE = "def total(xs):\n    return sum(xs)\n"


@pytest.fixture
def diff_of(make_repo):
    """The diff from `files` to `files` updated by `changes` (None deletes), made by git."""

    def make(changes: dict[str, str | None], files: dict[str, str] | None = None) -> str:
        repo: Path = make_repo(files or {"tests/test_app.py": TEST_FILE, "app/core.py": SOURCE})
        for rel, text in changes.items():
            if text is None:
                (repo / rel).unlink()
            else:
                (repo / rel).parent.mkdir(parents=True, exist_ok=True)
                (repo / rel).write_text(text)
        subprocess.run(["git", "add", "-A"], cwd=repo, check=True)
        return subprocess.run(
            ["git", "diff", "--cached"], cwd=repo, check=True, capture_output=True, text=True
        ).stdout

    return make


def refused(decision: PolicyDecision, rule: str, *words: str) -> None:
    assert not decision.allowed, "expected the gate to refuse"
    assert decision.rule == rule, decision
    text = " ".join(decision.reasons)
    for word in words:
        assert word in text, (word, decision.reasons)


def edit_test(old: str, new: str) -> dict[str, str | None]:
    assert old in TEST_FILE
    return {"tests/test_app.py": TEST_FILE.replace(old, new)}


def test_a_plain_source_fix_is_allowed(diff_of) -> None:
    decision = check_candidate(
        diff_of({"app/core.py": SOURCE.replace("sum", "fsum")}), PolicySpec()
    )
    assert decision == PolicyDecision(allowed=True, rule="", reasons=())


def test_not_a_diff() -> None:
    refused(check_candidate("I fixed it, trust me.", PolicySpec()), "not_a_diff", "not a unified")


@pytest.mark.parametrize(
    ("dst", "word"),
    [("b/../../etc/cron.d/x", "climbs out"), ("/etc/cron.d/x", "absolute"), ("b/.git/x", ".git")],
)
def test_paths_outside_the_worktree_are_refused(dst: str, word: str) -> None:
    diff = f"--- /dev/null\n+++ {dst}\n@@ -0,0 +1 @@\n+x\n"
    refused(check_candidate(diff, PolicySpec()), "outside_worktree", word)


@pytest.mark.parametrize(
    "path", [".github/workflows/ci.yml", "poetry.lock", "sub/requirements-dev.txt", "Jenkinsfile"]
)
def test_protected_paths_are_refused(diff_of, path: str) -> None:
    refused(check_candidate(diff_of({path: "changed\n"}), PolicySpec()), "protected_path", path)


def test_extra_protected_paths_add_to_the_defaults(diff_of) -> None:
    diff = diff_of({"app/secrets/keys.py": "KEY = 1\n"})
    assert check_candidate(diff, PolicySpec()).allowed
    policy = PolicySpec(extra_protected_paths=("app/secrets/**",))
    refused(
        check_candidate(diff, policy), "protected_path", "app/secrets/keys.py", "app/secrets/**"
    )


@pytest.mark.parametrize(
    ("pattern", "path", "matches"),
    [
        (".github/**", ".github/workflows/ci.yml", True),
        (".github/**", "src/.github/x", False),
        ("*.lock", "deep/dir/Cargo.lock", True),
        ("*.lock", "lockfile.txt", False),
        ("**/test_*.py", "test_top.py", True),
        ("**/test_*.py", "a/b/test_x.py", True),
        ("**/test_*.py", "a/b/x_test.txt", False),
        ("tests/**", "tests/unit/test_x.py", True),
        ("tests/**", "src/tests_helper.py", False),
        ("docs/", "docs/a/b.md", True),
        ("/Makefile", "sub/Makefile", False),
        ("req?.txt", "req1.txt", True),
        ("[ab].py", "b.py", True),
    ],
)
def test_glob_patterns(pattern: str, path: str, matches: bool) -> None:
    assert (path_matches(path, [pattern]) == pattern) is matches


def test_a_later_negated_pattern_excepts_a_path_as_in_gitignore() -> None:
    patterns = ["app/secrets/**", "!app/secrets/README.md"]
    assert path_matches("app/secrets/keys.py", patterns) == "app/secrets/**"
    assert path_matches("app/secrets/README.md", patterns) is None


def test_a_negated_extra_pattern_never_unprotects_a_default_one(diff_of) -> None:
    """Invariant: extra_protected_paths only adds; its `!` excepts from its own patterns."""
    policy = PolicySpec(extra_protected_paths=("app/secrets/**", "!.github/**", "!app/x.py"))
    workflow = check_candidate(diff_of({".github/workflows/ci.yml": "on: push\n"}), policy)
    assert workflow.rule == "protected_path", workflow
    secret = check_candidate(diff_of({"app/secrets/keys.py": "KEY = 1\n"}), policy)
    assert secret.rule == "protected_path", secret
    assert check_candidate(diff_of({"app/x.py": "X = 1\n"}), policy).allowed


@pytest.mark.parametrize(
    ("pattern", "says"),
    [
        ("[z-a].py", "not a gitignore pattern"),
        ("src\\", "not a gitignore pattern"),
        ("#secrets", "matches nothing"),
        ("[", "matches nothing"),
    ],
)
def test_a_protected_path_the_gate_cannot_match_with_is_a_spec_error(
    pattern: str, says: str
) -> None:
    with pytest.raises(ValidationError, match=says):
        PolicySpec(extra_protected_paths=(pattern,))


def test_deleting_a_test_file_is_refused_unless_test_changes_are_allowed(diff_of) -> None:
    diff = diff_of({"tests/test_app.py": None})
    refused(check_candidate(diff, PolicySpec()), "test_tampering", "deletes the test file")
    assert check_candidate(diff, PolicySpec(allow_test_changes=True)).allowed


def test_deleting_or_renaming_a_test_function_is_refused(diff_of) -> None:
    removed = diff_of(edit_test("def test_total():\n    assert total([1, 2]) == 3\n\n\n", ""))
    refused(check_candidate(removed, PolicySpec()), "test_tampering", "'test_total'")
    renamed = diff_of(edit_test("def test_total", "def _test_total"))
    refused(
        check_candidate(renamed, PolicySpec()), "test_tampering", "deletes the test 'test_total'"
    )


@pytest.mark.parametrize(
    "marker",
    [
        '@pytest.mark.skip(reason="flaky")',
        "@pytest.mark.skipif(True, reason='x')",
        "@pytest.mark.xfail",
        "@unittest.skip('later')",
        "@skip('later')",
        "@unittest.expectedFailure",
    ],
)
def test_adding_skip_markers_is_refused(diff_of, marker: str) -> None:
    diff = diff_of(edit_test("def test_total", f"{marker}\ndef test_total"))
    refused(check_candidate(diff, PolicySpec()), "test_tampering", "tests/test_app.py", marker)


@pytest.mark.parametrize(
    "body",
    [
        "    pytest.skip('not now')",
        "    pytest.xfail('known')",
        "    self.skipTest('later')",
        "    raise unittest.SkipTest('x')",
    ],
)
def test_adding_skip_calls_is_refused(diff_of, body: str) -> None:
    diff = diff_of(edit_test("def test_total():\n", f"def test_total():\n{body}\n"))
    refused(check_candidate(diff, PolicySpec()), "test_tampering", body.strip())


@pytest.mark.parametrize(
    ("before", "after"),
    [
        ("it('adds', () => {", "it.skip('adds', () => {"),
        ("it('adds', () => {", "xit('adds', () => {"),
        ("describe('math', () => {", "describe.skip('math', () => {"),
        ("test('adds', () => {", "test.skip('adds', () => {"),
        ("it('adds', () => {", "it.only('adds', () => {"),
    ],
)
def test_skipping_javascript_tests_is_refused(diff_of, before: str, after: str) -> None:
    js = f"describe('math', () => {{\n  {before}\n    expect(add(1, 2)).toBe(3);\n  }});\n}});\n"
    if before.startswith("describe"):
        js = f"{before}\n  it('adds', () => {{\n    expect(add(1, 2)).toBe(3);\n  }});\n}});\n"
    files = {"tests/math.test.js": js}
    diff = diff_of({"tests/math.test.js": js.replace(before, after)}, files)
    refused(check_candidate(diff, PolicySpec()), "test_tampering", "tests/math.test.js")


def test_removing_an_assertion_is_refused(diff_of) -> None:
    diff = diff_of(edit_test("    assert total([1, 2]) == 3\n", "    total([1, 2])\n"))
    refused(check_candidate(diff, PolicySpec()), "test_tampering", "removes the assertion")


@pytest.mark.parametrize(
    ("old", "new", "verb"),
    [
        ("assert total([1, 2]) == 3", "assert True", "weakens"),
        ("assert total([1, 2]) == 3", "assert total([1, 2])", "weakens"),
        ("assert total([1, 2]) == 3", "assert total([1, 2]) == 3 or True", "weakens"),
        ("self.assertEqual(thing(), 3)", "self.assertTrue(thing())", "weakens"),
        ("assert total([1, 2]) == 3", "assert total([1, 2]) == 4", "changes"),
        ('        "b",\n', '        "c",\n', "changes"),
    ],
)
def test_weakening_or_changing_an_assertion_is_refused(diff_of, old: str, new: str, verb: str):
    refused(check_candidate(diff_of(edit_test(old, new)), PolicySpec()), "test_tampering", verb)


def test_reformatting_an_assertion_is_allowed(diff_of) -> None:
    diff = diff_of(edit_test("assert total([1, 2]) == 3", "assert total([1,2])==3  "))
    assert check_candidate(diff, PolicySpec()).allowed


def test_adding_a_new_test_is_allowed(diff_of) -> None:
    new_test = "\n\ndef test_empty():\n    assert total([]) == 0\n"
    diff = diff_of({"tests/test_app.py": TEST_FILE + new_test, "app/core.py": SOURCE + "# ok\n"})
    assert check_candidate(diff, PolicySpec()).allowed


def test_steering_test_collection_from_config_is_refused(diff_of) -> None:
    files = {"pyproject.toml": "[tool.pytest.ini_options]\nminversion = '7'\n"}
    diff = diff_of(
        {"pyproject.toml": files["pyproject.toml"] + 'addopts = "--deselect tests/test_app.py"\n'},
        files,
    )
    refused(check_candidate(diff, PolicySpec()), "test_tampering", "pyproject.toml", "--deselect")


@pytest.mark.parametrize(
    ("name", "before", "added"),
    [
        ("pyproject.toml", "[project]\nname = 'app'\n", "[project.entry-points.pytest11]\n"),
        ("setup.cfg", "[metadata]\nname = app\n", "[options.entry_points]\npytest11 =\n"),
        ("setup.py", "from setuptools import setup\nsetup(name='app')\n", "# pytest11\n"),
    ],
    ids=["pyproject.toml", "setup.cfg", "setup.py"],
)
def test_a_pytest_plugin_entry_point_is_refused(diff_of, name, before, added) -> None:
    """Installed, it makes pytest load a module of the project as a plugin at start-up."""
    diff = diff_of({name: before + added + "    hooks = app.core\n"}, {name: before})
    refused(check_candidate(diff, PolicySpec()), "test_tampering", name, "declares a pytest plugin")


def test_conftest_hooks_that_rewrite_results_are_refused(diff_of) -> None:
    hook = "def pytest_collection_modifyitems(items):\n    items.clear()\n"
    diff = diff_of({"tests/conftest.py": hook})
    refused(check_candidate(diff, PolicySpec()), "test_tampering", "tests/conftest.py")


# Each hook on a test's outcome path can turn a failure into a pass from a conftest.
_OUTCOME_HOOKS = (
    "def pytest_pyfunc_call(pyfuncitem):\n    return True\n",
    "def pytest_pycollect_makeitem(collector, name, obj):\n    return None\n",
    "def pytest_collect_file(file_path, parent):\n    return None\n",
    "def pytest_make_collect_report(collector):\n    return None\n",
    "def pytest_itemcollected(item):\n    item.runtest = lambda: None\n",
    "def pytest_fixture_setup(fixturedef, request):\n    return None\n",
    "def pytest_collection(session):\n    return True\n",
    "def pytest_runtestloop(session):\n    return True\n",
    "def pytest_report_to_serializable(config, report):\n    report.outcome = 'passed'\n",
    "def pytest_exception_interact(node, call, report):\n    report.outcome = 'passed'\n",
)


@pytest.mark.parametrize("hook", _OUTCOME_HOOKS, ids=lambda h: h.split("(")[0][4:])
def test_every_outcome_hook_added_to_a_conftest_is_refused(diff_of, hook: str) -> None:
    existing = {"tests/conftest.py": "import pytest\n"}
    diff = diff_of({"tests/conftest.py": "import pytest\n\n\n" + hook}, existing)
    refused(check_candidate(diff, PolicySpec()), "test_tampering", "hooks into how tests run")
    new_file = diff_of({"tests/unit/conftest.py": hook})
    refused(check_candidate(new_file, PolicySpec()), "test_tampering", "tests/unit/conftest.py")
    # A job that allows test changes lifts this rule (the runner-tampering rule still reads
    # the hook's body: an item's `runtest` replaced is refused anyway).
    allowed = check_candidate(diff, PolicySpec(allow_test_changes=True))
    assert allowed.allowed or allowed.rule == "runner_tampering", allowed


# What a real fix adds to a conftest for the tests it adds: none of it touches outcomes.
_CONFTEST_ADDITIONS = (
    "@pytest.fixture\ndef empty_cart():\n    return []\n",
    "def pytest_generate_tests(metafunc):\n"
    "    if 'size' in metafunc.fixturenames:\n        metafunc.parametrize('size', [0, 1])\n",
    "def pytest_configure(config):\n    config.addinivalue_line('markers', 'slow: a slow test')\n",
    "def pytest_report_header(config):\n    return 'app tests'\n",
    "def pytest_addoption(parser):\n    parser.addoption('--db', default='sqlite')\n",
)


@pytest.mark.parametrize("addition", _CONFTEST_ADDITIONS, ids=lambda a: a.split("(")[0][-20:])
def test_a_conftest_addition_for_new_tests_is_allowed(diff_of, addition: str) -> None:
    existing = {"tests/conftest.py": "import pytest\n"}
    diff = diff_of({"tests/conftest.py": "import pytest\n\n\n" + addition}, existing)
    assert check_candidate(diff, PolicySpec()).allowed


def test_skip_words_outside_test_files_are_fine(diff_of) -> None:
    diff = diff_of({"app/core.py": SOURCE + "# never use pytest.mark.skip here\n"})
    assert check_candidate(diff, PolicySpec()).allowed


def test_size_limits_both_ways(diff_of) -> None:
    many = "".join(f"x{i} = {i}\n" for i in range(30))
    diff = diff_of({"app/core.py": SOURCE + many})
    assert check_candidate(diff, PolicySpec(max_changed_lines=30)).allowed
    refused(check_candidate(diff, PolicySpec(max_changed_lines=29)), "size", "30 lines")
    files = diff_of({f"app/m{i}.py": "x = 1\n" for i in range(3)})
    assert check_candidate(files, PolicySpec(max_files=3)).allowed
    refused(check_candidate(files, PolicySpec(max_files=2)), "size", "touches 3 files")


def test_the_first_rule_broken_names_the_decision_and_all_reasons_are_kept(diff_of) -> None:
    diff = diff_of({"poetry.lock": "x\n", "tests/test_app.py": None})
    decision = check_candidate(diff, PolicySpec())
    refused(decision, "protected_path", "poetry.lock", "deletes the test file tests/test_app.py")


def test_demo_style_skip_patch_is_refused() -> None:
    """The bundled demo's skip candidate: a skip marker added above the failing test."""
    diff = (
        "--- a/tests/test_rules.py\n+++ b/tests/test_rules.py\n@@ -7,6 +7,7 @@\n"
        "     assert bulk_discount_percent(9) == 0\n \n \n"
        '+@pytest.mark.skip(reason="flaky boundary")\n def test_bulk_discount_starts_at_ten():\n'
        "     assert bulk_discount_percent(10) == 10\n \n"
    )
    refused(check_candidate(diff, PolicySpec()), "test_tampering", "skip/xfail marker")
