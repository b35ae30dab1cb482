"""Each parser on real output recorded in the corpus, plus the formats the corpus lacks."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from patchheal.errors import BadInput
from patchheal.failure.normalize import clean, normalize_message, path_kind, relative_path
from patchheal.failure.parsers import generic, junit, sections, traceback
from patchheal.failure.parsers import pytest as pytest_parser
from patchheal.failure.parsers import unittest as unittest_parser

sys.path.insert(0, str(Path(__file__).resolve().parent / "data"))
from corpus_index import runs


def _log(bug: str) -> str:
    return clean(next(r for r in runs() if r.bug == bug).log.read_text())


def test_traceback_chain_direct_cause() -> None:
    parsed = traceback.parse(_log("tb_chained_cause"))
    assert parsed.error_type == "ConfigError"
    assert [c.error_type for c in parsed.chain] == ["KeyError"]
    assert [f.function for f in parsed.frames] == ["<module>", "load"]
    assert parsed.chain[0].frames[-1].function == "load"


def test_traceback_during_handling() -> None:
    parsed = traceback.parse(_log("tb_during_handling"))
    assert parsed.error_type == "AttributeError"
    assert parsed.chain[0].error_type == "ValueError"
    assert "invalid literal" in parsed.chain[0].message


def test_traceback_syntax_error_without_header() -> None:
    parsed = traceback.parse(_log("tb_syntax"))
    assert parsed.error_type == "SyntaxError"
    assert parsed.frames[0].file.endswith("app/broken.py")


def test_traceback_exception_group_and_multiline_message() -> None:
    text = (
        "  + Exception Group Traceback (most recent call last):\n"
        '  |   File "/w/app/run.py", line 3, in <module>\n'
        "  | ExceptionGroup: two failures (2 sub-exceptions)\n"
        "  +-+---------------- 1 ----------------\n"
        "    | Traceback (most recent call last):\n"
        '    |   File "/w/app/jobs.py", line 8, in first\n'
        "    | ValueError: bad input\n"
        "    |   on two lines\n"
    )
    parsed = traceback.parse(text)
    assert parsed.error_type == "ValueError"
    assert parsed.message == "bad input\n  on two lines"
    assert parsed.frames[0].function == "first"


def test_pytest_sections_summary_and_chain() -> None:
    parsed = pytest_parser.parse(_log("pt_multi"))
    assert parsed.failing_tests == [
        "tests/test_inventory.py::test_restock",
        "tests/test_inventory.py::test_remove",
        "tests/test_inventory.py::test_report",
    ]
    assert parsed.error_type == "KeyError"  # the first failing test by id: test_remove
    assert [(f.file, f.function) for f in parsed.frames][-1] == ("app/inventory.py", "remove")


def test_pytest_collection_error() -> None:
    parsed = pytest_parser.parse(_log("pt_collect_error"))
    assert parsed.failing_tests == ["tests/test_api.py"]
    assert parsed.error_type == "NameError"
    assert ("app/api.py", "<module>") in [(f.file, f.function) for f in parsed.frames]


def test_pytest_short_tracebacks_and_summary_only() -> None:
    short = (
        "=================================== FAILURES ===================================\n"
        "___________________________________ test_div ___________________________________\n"
        "tests/test_calc.py:8: in test_div\n    assert div(1, 0) == 1\n"
        "app/calc.py:5: in div\n    return a / b\nE   ZeroDivisionError: division by zero\n"
        "=========================== short test summary info ============================\n"
        "FAILED tests/test_calc.py::test_div - ZeroDivisionError: division by zero\n"
    )
    parsed = pytest_parser.parse(short)
    assert parsed.error_type == "ZeroDivisionError"
    assert [(f.file, f.function) for f in parsed.frames] == [
        ("tests/test_calc.py", "test_div"),
        ("app/calc.py", "div"),
    ]
    only_summary = pytest_parser.parse(
        "FAILED tests/test_x.py::test_y[a-1] - ValueError: nope\n1 failed in 0.1s\n"
    )
    assert only_summary.failing_tests == ["tests/test_x.py::test_y[a-1]"]
    assert (only_summary.error_type, only_summary.message) == ("ValueError", "nope")


def test_unittest_blocks() -> None:
    parsed = unittest_parser.parse(_log("ut_assert"))
    assert parsed.failing_tests == [
        "tests.test_version.TestVersion.test_bad",
        "tests.test_version.TestVersion.test_order",
    ]
    assert parsed.error_type == "AttributeError"


def test_junit_from_pytest_and_from_java() -> None:
    run = next(r for r in runs() if r.bug == "pt_junit")
    assert run.junit is not None
    parsed = junit.parse(run.junit)
    assert parsed.failing_tests == ["tests.test_text.test_slugify"]
    assert parsed.error_type == "AssertionError"
    assert parsed.frames[-1].function == "test_slugify"
    java = (
        '<testsuite><testcase classname="com.shop.CartTest" name="totals">'
        '<failure type="java.lang.NullPointerException" message="price is null">'
        "java.lang.NullPointerException: price is null\n"
        "\tat com.shop.Cart.total(Cart.java:42)\n\tat com.shop.CartTest.totals(CartTest.java:17)\n"
        "\tat org.junit.runners.ParentRunner.run(ParentRunner.java:413)\n"
        '</failure></testcase><testcase classname="com.shop.CartTest" name="ok"/></testsuite>'
    )
    parsed = junit.parse(java)
    assert parsed.failing_tests == ["com.shop.CartTest.totals"]
    assert parsed.error_type == "java.lang.NullPointerException"
    assert [f.function for f in parsed.frames][-2:] == [
        "com.shop.CartTest.totals",
        "com.shop.Cart.total",
    ]
    assert path_kind("org.junit.runners.ParentRunner.run") == "stdlib"


def test_junit_bad_xml_is_bad_input() -> None:
    with pytest.raises(BadInput, match="JUnit"):
        junit.parse("<testsuite><testcase")


def test_compiler_and_linter_lines() -> None:
    gcc = generic.parse(_log("gcc_error"))
    assert gcc.source == "compiler"
    assert gcc.frames[0].file.endswith("src/main.c")
    mypy = generic.parse(_log("mypy_error"))
    assert (mypy.error_type, mypy.frames[0].file) == ("arg-type", "app/geometry.py")
    more = generic.parse(
        "src/app.ts(12,5): error TS2322: Type 'string' is not assignable to type 'number'.\n"
        "error[E0308]: mismatched types\n  --> src/main.rs:4:5\n"
        "app/x.py:1:8: F401 [*] `os` imported but unused\n"
    )
    assert [more.error_type] + [c.error_type for c in more.chain] == ["TS2322", "F401", "E0308"]


def test_generic_error_block_near_the_end() -> None:
    log = "\n".join(
        ["building..."] * 50
        + [
            "npm ERR! code ERESOLVE",
            "npm ERR! ERESOLVE unable to resolve dependency tree",
            "npm ERR! A complete log of this run can be found in: /root/.npm/_logs/x.log",
            "Error: Process completed with exit code 1.",
        ]
    )
    parsed = generic.parse(log)
    assert parsed.error_type == "ERESOLVE"
    assert parsed.message.startswith("npm ERR! code ERESOLVE")
    node = generic.parse(_log("node_type_error"))
    assert node.error_type == "TypeError"
    assert any(f.function == "total" and f.file.endswith("lib/cart.js") for f in node.frames)


def test_normalization_placeholders() -> None:
    text = (
        "at 0x7f3a2b1c4d50 2026-01-02T03:04:05.123Z 12:00:01 took 1.25s pid=4242 "
        "127.0.0.1:54321 seed=99 12.5MB 123e4567-e89b-12d3-a456-426614174000 "
        "/tmp/tmpab_cd123/out.csv {'b', 'a'} {'y': 2, 'x': 1} deadbeefcafe1234 line 42"
    )
    assert normalize_message(text) == (
        "at 0x<addr> <ts> <time> took <dur> pid=<n> <ip>:<port> seed=<n> <size> <uuid> "
        "<tmp>/out.csv {'a', 'b'} {'x': 1, 'y': 2} <hex> line <n>"
    )
    # Nested or non-literal collections are left alone: reordering could change meaning.
    assert normalize_message("{'b': [2], 'a': f(x)}") == "{'b': [2], 'a': f(x)}"


def test_paths_made_repo_relative_and_library_paths_marked() -> None:
    assert relative_path("/ci/work/repo/app/x.py", ["/ci/work/repo"]) == "app/x.py"
    site = "/venv/lib/python3.11/site-packages/requests/api.py"
    assert (path_kind(site), relative_path(site)) == ("library", "<site-packages>/requests/api.py")
    std = "/usr/lib/python3.12/json/decoder.py"
    assert (path_kind(std), relative_path(std)) == ("stdlib", "<stdlib>/json/decoder.py")
    assert path_kind("<frozen importlib._bootstrap>") == "frozen"
    assert path_kind("app/main.py") == "project"


def test_clean_strips_ansi_redraws_and_ci_timestamps() -> None:
    raw = (
        "2026-01-01T00:00:00.1234567Z \x1b[31mFAILED\x1b[0m tests/a.py::t\r\n"
        "progress 10%\rprogress 100%\n##[group]Run pytest\n"
    )
    assert clean(raw) == "FAILED tests/a.py::t\nprogress 100%\nRun pytest\n"


def test_sections_keep_markers_and_tail_of_a_noisy_log() -> None:
    noise = b"INFO nothing to see\n" * 200_000
    data = (
        noise + b'Traceback (most recent call last):\n  File "/w/a.py", line 1, in f\n'
        b"ValueError: mid\n" + noise + b"FATAL: the end\n"
    )
    excerpt = sections.scan_bytes(data)
    assert "ValueError: mid" in excerpt.text
    assert excerpt.text.endswith("FATAL: the end\n")
    assert len(excerpt.text) < sections.TAIL + 200_000
    assert excerpt.total_bytes == len(data)


def test_section_search_without_ahocorasick_finds_the_same_hits(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The stdlib fallback (one bytes.find per marker) agrees with the automaton."""
    import builtins

    data = b"".join(r.log.read_bytes() for r in runs()[:10]) + b"x ERROR: y\nFATAL z\n"
    fast = sections._search(memoryview(data))
    real_import = builtins.__import__

    def no_ahocorasick(name: str, *args, **kwargs):  # type: ignore[no-untyped-def]
        if name == "ahocorasick_rs":
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_ahocorasick)
    slow = sections._make_search()(memoryview(data))
    # Leftmost-first drops a hit that starts inside an earlier, overlapping one; find does not.
    assert set(fast) <= set(slow)
    assert {pos for pos, _ in slow} - {pos for pos, _ in fast} <= {
        pos for pos, n in slow if any(p < pos < p + len(sections._MARKER_LIST[m]) for p, m in fast)
    }
