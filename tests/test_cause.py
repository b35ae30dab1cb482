"""Where a verified diff changes the code, and whether the failing test ran it (issue 34)."""

from __future__ import annotations

from patchheal.evidence.cause import ChangedCode, changed_code, diffstat, old_side_lines
from patchheal.models import TestTrace, TracedCall

SOURCE = """\
def helper(x):
    return x + 1


class Pricing:
    def discount(self, n):
        if n > 10:
            return 10
        return 0


LIMIT = 3
"""

DIFF = """\
diff --git a/pricing.py b/pricing.py
--- a/pricing.py
+++ b/pricing.py
@@ -6,4 +6,4 @@ class Pricing:
     def discount(self, n):
-        if n > 10:
+        if n >= 10:
             return 10
         return 0
@@ -12 +12 @@
--- LIMIT = 3
+LIMIT = 4
"""
# The last hunk removes a line whose text is `-- LIMIT = 3`: it reads `--- LIMIT = 3`,
# like a file header, and only the hunk's line counts tell it is content.

TRACE = {
    "tests/test_pricing.py::test_ten": TestTrace(
        functions=(
            TracedCall(
                file="pricing.py", name="Pricing.discount", line=6, calls=1, order=0, depth=1
            ),
        )
    )
}


def test_the_changed_function_is_named_with_whether_the_failing_test_ran_it() -> None:
    found = changed_code(DIFF, lambda _file: SOURCE, TRACE, ["tests/test_pricing.py::test_ten"])
    assert found == [
        ChangedCode("pricing.py", "Pricing.discount", True),
        ChangedCode("pricing.py", "", None),  # the module-level change of LIMIT
    ]


def test_a_function_the_failing_test_never_ran_says_so_and_no_trace_says_unknown() -> None:
    other = {"tests/test_pricing.py::test_ten": TestTrace(functions=(
        TracedCall(file="pricing.py", name="helper", line=1, calls=1, order=0, depth=1),
    ))}  # fmt: skip
    ran = changed_code(DIFF, lambda _file: SOURCE, other, ["tests/test_pricing.py::test_ten"])
    assert ran[0] == ChangedCode("pricing.py", "Pricing.discount", False)
    untraced = changed_code(DIFF, lambda _file: SOURCE, {}, ["tests/test_pricing.py::test_ten"])
    assert untraced[0] == ChangedCode("pricing.py", "Pricing.discount", None)
    unreadable = changed_code(DIFF, lambda _file: None, TRACE, ["x"])
    assert unreadable[0] == ChangedCode("pricing.py", "", None)


def test_hunk_counts_decide_what_is_content() -> None:
    assert old_side_lines(DIFF) == {"pricing.py": [7, 12]}
    assert diffstat(DIFF) == [("pricing.py", 2, 2)]
    added = "--- /dev/null\n+++ b/new.py\n@@ -0,0 +1,2 @@\n+a = 1\n+b = 2\n"
    assert diffstat(added) == [("new.py", 2, 0)]
