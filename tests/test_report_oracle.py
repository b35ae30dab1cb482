"""An oracle refusal in the report: one sentence a person understands, and the change shown."""

from __future__ import annotations

from patchheal.models import Outcome
from patchheal.report import render_html, render_markdown
from patchheal.verdict.twin import refusal
from tests.test_report import attempt, job, step

MUTATION = "tests/test_calc.py:5 `assert add(2, 3) == 5` now expects 12"


def test_a_rejected_oracle_attempt_says_why_and_shows_the_mutation() -> None:
    """The "why" line of the attempt is the twin's sentence with the changed assertion;
    the legend explains the outcome; HTML escapes the code and renders the badge."""
    reason = refusal(MUTATION, "tests/test_calc.py::test_add passed by id", MUTATION)
    refused = attempt(1, Outcome.REJECTED_ORACLE, reason=reason)
    report = job(
        status="not_fixed",
        stop_reason="max_attempts (1) spent without a verified fix",
        steps=(step(status="not_fixed", attempts=(refused,), checkpoint_patch=None),),
        branch=None,
        final_diff="",
    )
    html = render_html(report)
    sentence = "the tests also passed when made impossible, so the patch makes tests pass"
    assert f"<strong>Why:</strong> {sentence}" in html
    assert "tests/test_calc.py:5 `assert add(2, 3) == 5` now expects 12" in html
    assert "an impossible version of them" in html  # the legend (report/wording.py)
    assert 'class="badge b-rejected_oracle"' in html
    assert "tests/test_calc.py::test_add passed by id" in html  # folded under the attempt
    markdown = render_markdown(report)
    assert sentence in markdown
    assert "now expects 12" in markdown
