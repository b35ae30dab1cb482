"""`allow_test_changes = false` does what docs/job-spec.md says (issue 34): a candidate
may add tests but not change the ones there. A patch deleting `parametrize` rows, and one
rewriting expected values to the buggy output, were run (and `no_effect` only because
their ids vanished); they are refused before a run now. Hostile and legitimate cases on
diffs made by real git, judged with and without the pre-patch reader, and a real heal."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from patchheal.config import PolicySpec
from patchheal.gates.policy import PolicyDecision, check_candidate
from tests.healjobs import git, patchheal_cli, state_args

SOURCE = textwrap.dedent("""\
    def slugify(text):
        return text.lower().replace(" ", "_")
""")
TESTS = textwrap.dedent("""\
    import unittest

    import pytest

    from app.text import slugify

    EXPECTED = {"A B": "a-b"}


    @pytest.mark.parametrize(
        ("given", "expected"),
        [
            ("Hello World", "hello-world"),
            ("A B C", "a-b-c"),
            ("x", "x"),
            ("Two  Spaces", "two--spaces"),
            ("Tab\\tHere", "tab\\there"),
        ],
    )
    def test_slugify(given, expected):
        assert slugify(given) == expected


    def test_expected_table():
        for given, expected in EXPECTED.items():
            assert slugify(given) == expected


    class TestSlug(unittest.TestCase):
        def test_empty(self):
            self.assertEqual(slugify(""), "")
""")
FIXED = SOURCE.replace('replace(" ", "_")', 'replace(" ", "-")')
Reader = Callable[[str], "str | None"]


@pytest.fixture
def repo(make_repo) -> Path:
    return make_repo({"app/__init__.py": "", "app/text.py": SOURCE, "tests/test_text.py": TESTS})


def patch(repo: Path, changes: dict[str, str]) -> tuple[str, Reader]:
    """The staged diff of `changes`, and a reader of the files as HEAD has them."""
    for rel, text in changes.items():
        (repo / rel).write_text(text)
    git(repo, "add", "-A")
    diff = git(repo, "diff", "--cached") + "\n"
    git(repo, "reset", "-q", "--hard", "HEAD")

    def read(path: str) -> str | None:
        shown = subprocess.run(
            ["git", "show", f"HEAD:{path}"], cwd=repo, capture_output=True, text=True
        )
        return shown.stdout if shown.returncode == 0 else None

    return diff, read


def judged(repo: Path, new_tests: str, policy: PolicySpec | None = None) -> list[PolicyDecision]:
    """The decision on the edit of the test file, with the reader (trees) and without
    (lines), as the loop and a bare check would make it."""
    diff, read = patch(repo, {"tests/test_text.py": new_tests, "app/text.py": FIXED})
    policy = policy or PolicySpec()
    return [check_candidate(diff, policy, original=read), check_candidate(diff, policy)]


ROWS_DELETED = "".join(
    line
    for line in TESTS.splitlines(keepends=True)
    if not line.lstrip().startswith(('("Hello', '("A B', '("Two', '("Tab'))
)
EXPECTED_REWRITTEN = (
    TESTS.replace('"hello-world"', '"hello_world"')
    .replace('"a-b-c"', '"a_b_c"')
    .replace('"a-b"}', '"a_b"}')
)

HOSTILE = {
    "four parametrize rows deleted": ROWS_DELETED,
    "expected values rewritten to the buggy output": EXPECTED_REWRITTEN,
    "a module-level expected table changed": TESTS.replace('"a-b"}', '"a_b"}'),
    "an assertion's operand changed in a class": TESTS.replace(
        'slugify(""), ""', 'slugify("a"), "a"'
    ),
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_changing_existing_test_data_is_refused(repo: Path, name: str) -> None:
    assert ROWS_DELETED.count("(") == TESTS.count("(") - 4
    for decision in judged(repo, HOSTILE[name]):
        assert not decision.allowed, name
        assert decision.rule == "test_tampering", decision
        assert "tests/test_text.py" in decision.reasons[0]


def test_the_reason_names_the_test_and_reads_as_a_sentence(repo: Path) -> None:
    with_reader, without = judged(repo, ROWS_DELETED)
    assert with_reader.reasons == (
        "tests/test_text.py: changes or deletes the test `test_slugify` (line 10); with "
        "allow_test_changes = false a candidate may add tests but not change the ones there",
    )
    assert without.reasons[0].startswith(
        "tests/test_text.py: changes or deletes 4 existing line(s) of a test file (e.g. "
    )


def test_a_line_inserted_into_an_existing_test_is_refused_on_the_tree(repo: Path) -> None:
    early = TESTS.replace(
        "def test_expected_table():\n", "def test_expected_table():\n    return\n"
    )
    with_reader, _ = judged(repo, early)
    assert with_reader.rule == "test_tampering"
    assert "`test_expected_table`" in with_reader.reasons[0]


def test_a_second_definition_that_replaces_a_test_is_refused(repo: Path) -> None:
    shadow = TESTS + "\n\ndef test_slugify():\n    pass\n"
    with_reader, _ = judged(repo, shadow)
    assert with_reader.rule == "test_tampering"
    assert "redefines the existing `test_slugify`" in with_reader.reasons[0]


def test_allow_test_changes_lets_every_one_through(repo: Path) -> None:
    policy = PolicySpec(allow_test_changes=True)
    for text in HOSTILE.values():
        assert all(d.allowed for d in judged(repo, text, policy))


# -- legitimate: what stays allowed --

LEGITIMATE = {
    "a new test appended": TESTS + "\n\ndef test_unicode():\n    assert slugify('É') == 'é'\n",
    "a new parametrized test and an import": TESTS.replace(
        "import unittest\n", "import re\nimport unittest\n"
    )
    + '\n\n@pytest.mark.parametrize("s", ["a", "b"])\ndef test_idempotent(s):\n'
    "    assert slugify(slugify(s)) == slugify(s)\n",
    "a new method in the existing TestCase": TESTS
    + "\n    def test_space(self):\n        self.assertEqual(slugify(' '), '-')\n",
}


@pytest.mark.parametrize("name", sorted(LEGITIMATE))
def test_adding_tests_is_allowed(repo: Path, name: str) -> None:
    with_reader, without = judged(repo, LEGITIMATE[name])
    assert with_reader.allowed, with_reader
    assert without.allowed, without


def test_reformatting_a_test_is_allowed_on_the_tree(repo: Path) -> None:
    """Black-style reflow of a call over lines: the same tree (the line rule alone, with
    no reader, would refuse it)."""
    reflowed = TESTS.replace(
        "        assert slugify(given) == expected\n",
        "        assert (\n            slugify(given)\n            == expected\n        )\n",
    )
    assert reflowed != TESTS
    with_reader, _ = judged(repo, reflowed)
    assert with_reader.allowed, with_reader


def test_a_source_only_fix_passes(repo: Path) -> None:
    diff, read = patch(repo, {"app/text.py": FIXED})
    assert check_candidate(diff, PolicySpec(), original=read).allowed
    assert check_candidate(diff, PolicySpec()).allowed


def test_a_real_heal_refuses_the_row_deletion_unrun_and_verifies_the_fix(
    repo: Path, tmp_path: Path
) -> None:
    """The issue's case in a real heal (local harness, patchfiles): the row deletion is
    `rejected_policy` before any run, the real fix after it is `fixed`."""
    folder = tmp_path / "candidates"
    folder.mkdir()
    (folder / "01-drop_rows.patch").write_text(patch(repo, {"tests/test_text.py": ROWS_DELETED})[0])
    (folder / "02-fix_slug.patch").write_text(patch(repo, {"app/text.py": FIXED})[0])
    (repo / "pyproject.toml").write_text('[tool.pytest.ini_options]\npythonpath = ["."]\n')
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "pytest config")
    spec = tmp_path / "job.toml"
    spec.write_text(
        f'[job]\nid = "rows"\nrepo = "{repo}"\nbase = "main"\nharness = "local"\n\n'
        f"[[steps]]\nname = \"unit\"\ncommand = '''{sys.executable} -m pytest -q "
        "-p no:cacheprovider tests/test_text.py'''\n\n"
        f'[proposer]\nkind = "patchfiles"\ndir = "{folder}"\n\n'
        "[budget]\nmax_attempts = 2\nflaky_reruns = 0\nverify_runs = 1\n"
    )
    done = patchheal_cli("heal", str(spec), *state_args(tmp_path), timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    from patchheal.memory.store import AttemptStore

    with AttemptStore(tmp_path / "store.sqlite3") as store:
        first, second = sorted(store.attempts(), key=lambda a: a.attempt_number)
    assert first.outcome.value == "rejected_policy", first.reason
    assert "changes or deletes the test `test_slugify`" in first.reason
    assert second.outcome.value == "fixed", second.reason
