"""Localization and history in the retry context: the code under test, the breaking change."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

from patchheal.config import JobSpec
from patchheal.evidence import symbols
from patchheal.evidence.build import build_context, render_context
from patchheal.evidence.history import breaking_change, changed_lines, recent_history
from patchheal.evidence.localize import localize
from patchheal.evidence.tokens import count_tokens
from patchheal.failure.analysis import analyze
from patchheal.harness.local.harness import LocalHarness
from patchheal.models import Classification, Failure, FailureClass, TestTrace, TracedCall

CODE_BUG = Classification(failure_class=FailureClass.CODE_BUG, retryable=True)
PRICING = (
    '"""Prices."""\n\nTAX = 0.2\n\n\n'
    "def net(gross):\n    return gross / (1 + TAX)\n\n\n"
    "def discount(price, pct):\n    return price * pct / 100\n"  # the bug: should subtract
)
TEST = (
    "from shop.pricing import discount\n\n\n"
    "def test_discount():\n    assert discount(200, 10) == 180\n"
)
# A large module: only what the test reaches can be shown within a small budget.
BIG = (
    "".join(
        f"def helper_{i}(x):\n"
        + "".join(f"    x = x + {j}  # padding\n" for j in range(30))
        + "    return x\n\n\n"
        for i in range(60)
    )
    + "def apply_coupon(price, code):\n    return price  # ignores the code\n"
)
BIG_TEST = (
    "import shop.big as big\n\n\n"
    "def test_coupon():\n    assert big.apply_coupon(100, 'HALF') == 50\n"
)


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)


def _job(repo: Path) -> JobSpec:
    return JobSpec.model_validate(
        {
            "job": {"id": "ci-1", "repo": str(repo)},
            "steps": [{"name": "unit", "command": "pytest -q"}],
        }
    )


def _failure(test: str) -> Failure:
    return Failure(
        fingerprint="a" * 64,
        error_type="AssertionError",
        summary=f"FAILED {test} - AssertionError",
        failing_tests=(test,),
        source="pytest",
    )


def test_source_under_test_is_shown_in_full_when_the_traceback_names_only_the_test(
    make_repo: Callable[[dict[str, str]], Path],
) -> None:
    repo = make_repo(
        {
            "shop/__init__.py": "",
            "shop/pricing.py": PRICING,
            "tests/test_pricing.py": TEST,
            "shop/unrelated.py": "def other():\n    return 1\n",
        }
    )
    test = "tests/test_pricing.py::test_discount"
    ctx = build_context(
        job=_job(repo),
        step_index=1,
        failure=_failure(test),
        classification=CODE_BUG,
        worktree=repo,
        prior=[],
        hints=[],
    )
    shown = {e.file: e for e in ctx.excerpts}
    assert shown["shop/pricing.py"].start_line == 1
    assert shown["shop/pricing.py"].text == PRICING.rstrip("\n")  # the whole file: exact SEARCH
    assert "def test_discount" in shown["tests/test_pricing.py"].text
    assert "shop/unrelated.py" not in shown
    assert "def discount(price, pct):" in render_context(ctx, max_tokens=8000)


def test_a_big_module_is_cut_to_what_the_test_reaches(
    make_repo: Callable[[dict[str, str]], Path],
) -> None:
    repo = make_repo({"shop/__init__.py": "", "shop/big.py": BIG, "tests/test_big.py": BIG_TEST})
    files = ["shop/__init__.py", "shop/big.py", "tests/test_big.py"]
    found = localize(
        repo, files, failing_tests=["tests/test_big.py::test_coupon"], budget_tokens=1500
    )
    assert found.ranked_files[0][0] == "shop/big.py"
    lines = BIG.splitlines()
    target = next(i + 1 for i, line in enumerate(lines) if "def apply_coupon" in line)
    assert any(s.file == "shop/big.py" and s.start <= target <= s.end for s in found.spans)
    assert not any(s.whole_file for s in found.spans)  # 60 padded helpers do not fit 1500 tokens


# A 200-line function (click's `Option.__init__` and `Context.__init__` are 130-170) whose
# bug is in its last lines, in a module too big to show whole.
LONG = (
    BIG.rpartition("def apply_coupon")[0]
    + "def apply_coupon(price, code):\n"
    + "".join(f"    price = price + {j} - {j}  # step {j}\n" for j in range(196))
    + "    return price  # ignores the code\n"
)


def test_a_long_function_the_test_reaches_is_shown_to_its_last_line_verbatim(
    make_repo: Callable[[dict[str, str]], Path],
) -> None:
    repo = make_repo({"shop/__init__.py": "", "shop/big.py": LONG, "tests/test_big.py": BIG_TEST})
    files = ["shop/__init__.py", "shop/big.py", "tests/test_big.py"]
    found = localize(
        repo, files, failing_tests=["tests/test_big.py::test_coupon"], budget_tokens=4000
    )
    lines = LONG.splitlines()
    first = next(i + 1 for i, line in enumerate(lines) if "def apply_coupon" in line)
    assert len(lines) - first + 1 == 198
    spans = [s for s in found.spans if s.file == "shop/big.py" and s.start <= first <= s.end]
    assert spans
    assert spans[0].end >= len(lines)  # the bug, 197 lines into the function
    assert not spans[0].whole_file
    ctx = build_context(
        job=_job(repo),
        step_index=1,
        failure=_failure("tests/test_big.py::test_coupon"),
        classification=CODE_BUG,
        worktree=repo,
        prior=[],
        hints=[],
        code_budget_tokens=6000,
    )
    shown = [e for e in ctx.excerpts if e.file == "shop/big.py" and e.start_line <= first]
    excerpt = next(e for e in shown if "def apply_coupon" in e.text)
    text = excerpt.text.splitlines()
    assert text == lines[excerpt.start_line - 1 : excerpt.start_line - 1 + len(text)]
    assert text[-1] == "    return price  # ignores the code"


def test_breaking_change_and_recent_history_come_from_last_green(
    make_repo: Callable[[dict[str, str]], Path],
) -> None:
    repo = make_repo(
        {
            "shop/__init__.py": "",
            "shop/pricing.py": PRICING.replace("price * pct / 100", "price - price * pct / 100"),
            "tests/test_pricing.py": TEST,
        }
    )
    _git(repo, "tag", "green")
    (repo / "shop/pricing.py").write_text(PRICING)
    _git(repo, "commit", "-qam", "Simplify discount")
    change = breaking_change(repo, "green")
    assert "-    return price - price * pct / 100" in change.diff
    assert "+    return price * pct / 100" in change.diff
    assert changed_lines(change.diff)["shop/pricing.py"]
    assert change.changed == changed_lines(change.diff)
    history = recent_history(repo, ["shop/pricing.py"])
    assert history.splitlines()[0].endswith("Simplify discount (shop/pricing.py)")
    assert breaking_change(repo, None).note == "no last_green ref in the job spec"
    assert "not in the repository" in breaking_change(repo, "no-such-ref").note
    assert "not a git ref" in breaking_change(repo, "--output=/tmp/x").note
    test = "tests/test_pricing.py::test_discount"
    ctx = build_context(
        job=_job(repo),
        step_index=1,
        failure=_failure(test),
        classification=CODE_BUG,
        worktree=repo,
        prior=[],
        hints=[],
        breaking_diff=change.diff,
        history=history,
    )
    text = render_context(ctx, max_tokens=8000)
    assert "## The change that broke the job" in text
    assert "## Recent commits touching these files" in text
    assert "Simplify discount" in text


FIX_REPLY = """STRATEGY: restore_addition
RATIONALE: the last change turned the addition into a subtraction

calc.py
<<<<<<< SEARCH
    return a - b
=======
    return a + b
>>>>>>> REPLACE
"""


def test_the_model_sees_the_breaking_change_history_and_approach_end_to_end(
    tmp_path: Path,
) -> None:
    """A real loop with the llm proposer against a loopback chat server: `last_green` is a tag
    of the user's repository (a name the private repository does not have)."""
    from chat_server import ChatServer, Reply

    from tests.healjobs import BUGGY, FIX, heal_in_process, make_calc_repo, write_spec

    repo = make_calc_repo(tmp_path)
    (repo / "calc.py").write_text(FIX)
    _git(repo, "commit", "-qam", "Add works")
    _git(repo, "tag", "green")
    (repo / "calc.py").write_text(BUGGY)
    _git(repo, "commit", "-qam", "Refactor add")
    with ChatServer([Reply(content=FIX_REPLY)]) as server:
        spec = write_spec(
            tmp_path / "job.toml",
            repo,
            proposer=f'[proposer]\nkind = "llm"\nbase_url = "{server.url}"\nmodel = "m"\n',
        )
        spec.write_text(
            spec.read_text().replace('base = "main"', 'base = "main"\nlast_green = "green"')
        )
        result = heal_in_process(tmp_path, spec)
    assert result.exit_code == 0
    sent = server.requests[0].user_message
    assert "## The change that broke the job" in sent
    assert "-    return a + b" in sent
    assert "+    return a - b" in sent
    assert "## Recent commits touching these files" in sent
    assert "Refactor add (calc.py)" in sent
    assert "Approach for this attempt: `simplify_approach`" in sent
    assert "def mul(a, b):" in sent  # calc.py, the source under test, in full
    (attempt,) = [a for s in result.report.steps for a in s.attempts]
    assert attempt.approach == "simplify_approach"


# The rule that holds the bug is reached only through a table at module level: nothing
# the test names, imports or calls refers to it, so reading the code cannot find it.
def _padded_functions(header: str, line: str, lines: int, end: str, count: int) -> str:
    """`count` functions (`header` and `line` formatted with their index i and line index j),
    each `lines` padding lines long: code a test runs that is not where the bug is."""
    return "".join(
        header.format(i=i) + "".join(line.format(j=j) for j in range(lines)) + end + "\n\n\n"
        for i in range(count)
    )


RULES = (
    _padded_functions(
        "def _rule_{i}(cart):\n",
        "    cart = [c + {j} for c in cart]  # padding\n",
        25,
        "    return sum(cart)",
        40,
    )
    + "def _sum_lines(cart):\n    return sum(cart[1:])  # the bug: skips the first line\n\n\n"
    + "_RULES = {'total': _sum_lines, **{f'r{i}': globals()[f'_rule_{i}'] for i in range(40)}}\n"
    + "\n\ndef dispatch(kind, cart):\n    return _RULES[kind](cart)\n"
)
API = "from shop import rules\n\n\ndef checkout(cart):\n    return rules.dispatch('total', cart)\n"
API_TEST = (
    "from shop.api import checkout\n\n\ndef test_checkout():\n    assert checkout([1, 2]) == 3\n"
)


def test_what_the_failing_test_executed_brings_code_no_name_leads_to(
    make_repo: Callable[[dict[str, str]], Path],
) -> None:
    repo = make_repo(
        {
            "shop/__init__.py": "",
            "shop/api.py": API,
            "shop/rules.py": RULES,
            "tests/test_api.py": API_TEST,
        }
    )
    test = "tests/test_api.py::test_checkout"
    # The reproduction's run, for real: pytest with patchheal's collector.
    run = LocalHarness().run(
        f"python -m pytest -q {test}", repo, timeout=120, idle_timeout=120, trace=True
    )
    assert run.tests is not None, run.output
    assert set(run.tests.traces) == {test}
    failure = analyze(run.output, repo_root=str(repo), command=f"pytest -q {test}")

    def rendered(traces: dict[str, TestTrace]) -> str:
        ctx = build_context(
            job=_job(repo),
            step_index=1,
            failure=failure,
            classification=CODE_BUG,
            worktree=repo,
            prior=[],
            hints=[],
            code_budget_tokens=2500,  # far less than shop/rules.py as a whole
            traces=traces,
        )
        return render_context(ctx, max_tokens=2500)

    bug = "    return sum(cart[1:])  # the bug: skips the first line"
    assert bug in rendered(run.tests.traces)
    assert "def dispatch(kind, cart):" in rendered(run.tests.traces)
    assert bug not in rendered({})  # what reading alone shows: the trace made the difference
    found = localize(
        repo,
        ["shop/__init__.py", "shop/api.py", "shop/rules.py", "tests/test_api.py"],
        failing_tests=[test],
        executed=run.tests.traces[test].functions,
        budget_tokens=1200,
    )
    ranked = [s for s in found.spans if s.file == "shop/rules.py"]
    assert ranked
    assert not any(s.whole_file for s in ranked)
    assert not any(
        s.start <= RULES.splitlines().index("def _rule_3(cart):") + 1 <= s.end for s in ranked
    )  # a rule the test never ran is not shown


def _traced_shop(
    make_repo: Callable[[dict[str, str]], Path], module: str, source: str, tests: str, test: str
) -> tuple[Path, tuple[TracedCall, ...]]:
    """A repository of `shop/<module>.py` and `tests/test_<module>.py`, and what `test` of it
    executed in a real traced pytest run of the whole test module (its passing tests are
    the contrast)."""
    repo = make_repo(
        {"shop/__init__.py": "", f"shop/{module}.py": source, f"tests/test_{module}.py": tests}
    )
    run = LocalHarness().run(
        "python -m pytest -q tests", repo, timeout=120, idle_timeout=120, trace=True
    )
    assert run.tests is not None, run.output
    return repo, run.tests.traces[f"tests/test_{module}.py::{test}"].functions


def _rank_of(
    repo: Path,
    module: str,
    line: int,
    *,
    failing_test: str,
    executed: tuple[TracedCall, ...],
    passed_tests: int,
) -> int:
    """Where the span holding `line` of `shop/<module>.py` comes among the spans chosen, best
    first. The budget has room for every definition, not for the module whole (at most 60 %
    of it): the order of the definitions is what is measured."""
    source = (repo / "shop" / f"{module}.py").read_text()
    found = localize(
        repo,
        ["shop/__init__.py", f"shop/{module}.py", f"tests/test_{module}.py"],
        failing_tests=[failing_test],
        executed=executed,
        passed_tests=passed_tests,
        budget_tokens=int(count_tokens(source) * 1.3),
    )
    spans = [s for s in found.spans if s.file == f"shop/{module}.py" and not s.whole_file]
    return next(i for i, s in enumerate(spans) if s.start <= line <= s.end)


# Every test runs every stage; the bug is on a branch of the last stage that only the
# failing test takes. No name in the test leads to `finish`.
STAGES = (
    _padded_functions(
        "def stage_{i}(x, mode):\n", "    x = x + {j} - {j}  # padding\n", 20, "    return x", 12
    )
    + "def finish(x, mode):\n"
    + "    if mode == 'fast':\n"
    + "        return x - 1  # the bug: fast mode drops one\n"
    + "    return x\n\n\n"
    + "def run(x, mode='slow'):\n"
    + "".join(f"    x = stage_{i}(x, mode)\n" for i in range(12))
    + "    return finish(x, mode)\n"
)
STAGES_TEST = (
    "from shop.pipeline import run\n\n\n"
    "def test_one():\n    assert run(1) == 1\n\n\n"
    "def test_two():\n    assert run(2) == 2\n\n\n"
    "def test_three():\n    assert run(3) == 3\n\n\n"
    "def test_quick():\n    assert run(4, mode='fast') == 4\n"
)


def test_a_line_only_the_failing_test_ran_singles_out_a_function_every_test_runs(
    make_repo: Callable[[dict[str, str]], Path],
) -> None:
    test = "tests/test_pipeline.py::test_quick"
    repo, calls = _traced_shop(make_repo, "pipeline", STAGES, STAGES_TEST, "test_quick")
    assert all(c.passed_by == 3 for c in calls)  # per function, nothing tells them apart
    bug = STAGES.splitlines().index("        return x - 1  # the bug: fast mode drops one") + 1

    def rank_of_bug(executed: tuple[TracedCall, ...]) -> int:
        return _rank_of(repo, "pipeline", bug, failing_test=test, executed=executed, passed_tests=3)

    # Right after `run`, which the test calls, and before every stage.
    assert rank_of_bug(calls) == 1
    per_function = tuple(
        c.model_copy(update={"line_passed_by": None, "rare_lines": ()}) for c in calls
    )
    # The function-level contrast alone ties it with the twelve stages (ties go by place).
    assert rank_of_bug(per_function) == 13


# A 300-line function every test runs; only the failing test takes the branch at its end.
SETTLE = (
    "def settle(x, mode='slow'):\n"
    + "".join(f"    x = x + {j} - {j}  # padding\n" for j in range(290))
    + "    if mode == 'fast':\n"
    + "        return x - 1  # the bug: fast mode drops one\n"
    + "    return x\n"
)
SETTLE_TEST = (
    "from shop.settle import settle\n\n\n"
    "def test_slow():\n    assert settle(1) == 1\n\n\n"
    "def test_fast():\n    assert settle(1, mode='fast') == 1\n"
)


def test_a_function_longer_than_a_span_is_shown_where_only_the_failing_test_went(
    make_repo: Callable[[dict[str, str]], Path],
) -> None:
    test = "tests/test_settle.py::test_fast"
    repo, calls = _traced_shop(make_repo, "settle", SETTLE, SETTLE_TEST, "test_fast")
    bug = SETTLE.splitlines().index("        return x - 1  # the bug: fast mode drops one") + 1
    files = ["shop/__init__.py", "shop/settle.py", "tests/test_settle.py"]

    def spans(executed: tuple[TracedCall, ...]) -> list[tuple[int, int]]:
        found = localize(
            repo, files, failing_tests=[test], executed=executed, passed_tests=1, budget_tokens=3000
        )
        return [(s.start, s.end) for s in found.spans if s.file == "shop/settle.py"]

    assert calls[0].rare_lines == (bug,)  # the `if` above it is run by both tests
    shown = spans(calls)
    assert any(start <= bug <= end for start, end in shown), shown
    assert all(end - start + 1 <= 250 for start, end in shown)  # still one span's length
    # Without the lines, the first 250 lines are shown and the branch is not.
    plain = tuple(c.model_copy(update={"line_passed_by": None, "rare_lines": ()}) for c in calls)
    assert not any(start <= bug <= end for start, end in spans(plain))


# Every test runs every function and every line of `render`; nothing in the trace tells
# `_margin` from the stages. Only the failing test passes `compact=`, and `_margin` is the
# one function that reads `compact`. Every test passes `width=`, which names nothing.
LAYOUT = (
    _padded_functions(
        "def stage_{i}(text, width):\n",
        "    text = text + '' * {j}  # padding\n",
        20,
        "    return text[:width]",
        12,
    )
    + "def _margin(compact):\n"
    + "    return 2 if compact else 2  # the bug: compact should have no margin\n\n\n"
    + "def render(text, width=80, compact=False):\n"
    + "".join(f"    text = stage_{i}(text, width)\n" for i in range(12))
    + "    return ' ' * _margin(compact) + text\n"
)
LAYOUT_TEST = (
    "from shop.layout import render\n\n\n"
    + "".join(
        f"def test_plain_{i}():\n    assert render('{i}', width=80) == '  {i}'\n\n\n"
        for i in range(5)
    )
    + "def test_compact():\n    assert render('x', width=80, compact=True) == 'x'\n"
)


def test_an_option_only_the_failing_test_sets_leads_to_the_code_that_reads_it(
    make_repo: Callable[[dict[str, str]], Path],
) -> None:
    test = "tests/test_layout.py::test_compact"
    repo, calls = _traced_shop(make_repo, "layout", LAYOUT, LAYOUT_TEST, "test_compact")
    assert all(c.line_passed_by == 5 for c in calls)  # every line is run by every test
    usage = symbols.test_usage(repo, test)
    assert usage is not None
    assert usage.keywords == {"compact"}  # `width=` is in all six tests: a habit, not a subject
    bug = LAYOUT.splitlines().index("def _margin(compact):") + 1

    def rank_of_bug(failing_test: str) -> int:
        return _rank_of(
            repo, "layout", bug, failing_test=failing_test, executed=calls, passed_tests=5
        )

    # Right after `render`, which takes the option from the test and hands it on.
    assert rank_of_bug(test) == 1
    # The same trace read for a test that sets no option: `_margin` is one of fourteen.
    assert rank_of_bug("tests/test_layout.py::test_plain_0") > 5


def test_a_test_passing_thousands_of_keywords_is_read_for_a_bounded_few(tmp_path: Path) -> None:
    """The test file is the project's: a hostile one cannot make localization match every
    keyword it passes against every executed definition."""
    (tmp_path / "tests").mkdir()
    arguments = ", ".join(f"option_{i}={i}" for i in range(5000))
    (tmp_path / "tests" / "test_many.py").write_text(
        f"def test_many():\n    assert configure({arguments})\n"
    )
    usage = symbols.test_usage(tmp_path, "tests/test_many.py::test_many")
    assert usage is not None
    assert len(usage.keywords) == symbols.MAX_KEYWORDS
    assert usage.keywords == {f"option_{i}" for i in sorted(range(5000), key=str)[:64]}
