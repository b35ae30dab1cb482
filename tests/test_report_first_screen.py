"""The first screen of a real healed job's report (issue 34): the demo job, healed by its
bundled patch files, read in Markdown, HTML and JSON, and laid out by headless Chromium.

The order a person reads: what failed (the test id and its error on one line), where the
cause was (the function the verified patch changes, and that the failing test ran it at
reproduction, from the trace), what the fix changed (diffstat, diff), why it is believed
(each verdict check that held), the proposer's own explanation; then the commands.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.test_report_browser import ARTIFACTS, _chromium, _layout, _wrapper
from tests.test_report_browser import chromium as chromium  # the fixture: skip without it

pytestmark = [pytest.mark.slow]

TEST_ID = "tests/test_rules.py::test_bulk_discount_starts_at_ten"
ERROR = "AssertionError: assert 0 == 10 (where 0 = bulk_discount_percent(10))"

# Where the first screen's parts are drawn, in the page's own coordinates (no scrolling).
FIRST_SCREEN_PROBE = """
<script>
addEventListener('load', () => {
  const doc = document.getElementById('page').contentWindow.document;
  const bottom = (sel) => {
    const all = [...doc.querySelectorAll(sel)];
    return all.length ? Math.max(...all.map(e => e.getBoundingClientRect().bottom)) : -1;
  };
  const cut = [...doc.querySelectorAll('pre.wrap, section.first pre')]
    .filter(p => p.scrollWidth > p.clientWidth + 1).map(p => p.textContent.slice(0, 60));
  const out = document.createElement('pre');
  out.id = 'first-probe';
  out.textContent = JSON.stringify({
    where: bottom('#where + dd li'),
    diffstat: bottom('ul.diffstat li'),
    why: bottom('#why + dd li'),
    cut: cut,
  });
  document.body.appendChild(out);
});
</script>
"""


@pytest.fixture(scope="module")
def healed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The demo job healed once (local harness: the same collectors and trace as Docker)."""
    root = tmp_path_factory.mktemp("first-screen")
    done = subprocess.run(
        [sys.executable, "-m", "patchheal", "demo", "--harness", "local", "--json",
         "--workdir", str(root / "work"), "--db", str(root / "store.sqlite3"),
         "--reports", str(root / "reports")],
        cwd=root, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads(done.stdout)
    assert summary["status"] == "fixed"
    return {kind: Path(path) for kind, path in summary["reports"].items()}


def _in_order(text: str, parts: list[str]) -> None:
    at = -1
    for part in parts:
        found = text.find(part, at + 1)
        assert found > at, f"{part!r} is not after the part before it"
        at = found


def test_markdown_first_screen_answers_in_order(healed: dict[str, Path]) -> None:
    md = healed["md"].read_text()
    _in_order(
        md,
        [
            "# patchheal report: demo-pricing — fixed",
            "## Root cause",
            "**What failed:**",
            f"- `{TEST_ID}`: `{ERROR}`",
            "**Where the cause was**",
            "`bulk_discount_percent` in `pricing/rules.py`: the failing test executed it at "
            "reproduction (traced)",
            "**What the fix changed:** `pricing/rules.py` +1 −1",
            "-    if quantity > 10:",
            "+    if quantity >= 10:",
            "**Why it is believed**",
            "- the failing step passes: 1 passed",
            # The regression step told with its own counts, not the failing step's.
            "- the regression step did not get worse: 5 passed (at base: 1 failed, 4 passed",
            "- its impossible twin failed as it must",
            "**The proposer's explanation** (patchfiles (06-fix_boundary.patch)): the 10 % tier "
            "starts at 10 items inclusive, as documented",
            "Where the fix is: branch",
            "Check it (in the harness, then on your machine)",
            "| Requeue | no need: the job is fixed |",
            "## Failure summary",
            "<details><summary>Normalized failure</summary>",
        ],
    )
    assert "would stop the same way" not in md


def test_html_first_screen_answers_in_order_and_folds_long_text(healed: dict[str, Path]) -> None:
    html = healed["html"].read_text()
    _in_order(
        html,
        [
            'id="root-cause"',
            'id="what-failed"',
            f"<code>{TEST_ID}</code>",
            'id="where"',
            "<code>bulk_discount_percent</code> in <code>pricing/rules.py</code>",
            'id="fix"',
            'class="tight diffstat"',
            "<details open><summary>The verified diff",
            'id="why"',
            "its impossible twin failed as it must",
            "The proposer's explanation",
            "Check it (in the harness, then on your machine)",
            '<table class="facts">',
            "Failure summary",
        ],
    )
    assert "<details><summary>Normalized failure</summary>" in html
    assert "<details open><summary>Normalized failure" not in html
    # The message is one readable line, in the first screen and in the step's facts.
    assert re.search(r"<th>Message</th><td><code>assert 0 == 10 \(where 0 = ", html)


def test_json_first_screen_comes_first_and_in_order(healed: dict[str, Path]) -> None:
    data: dict[str, Any] = json.loads(healed["json"].read_text())
    assert list(data)[:3] == ["schema", "first_screen", "job_id"]
    first = data["first_screen"]
    assert list(first) == [
        "what_failed",
        "where_the_cause_was",
        "what_the_fix_changed",
        "why_it_is_believed",
        "proposer_explanation",
    ]
    assert first["what_failed"] == [{"test": TEST_ID, "step": "unit", "error": ERROR}]
    assert first["where_the_cause_was"] == [
        "`bulk_discount_percent` in `pricing/rules.py`: the failing test executed it at "
        "reproduction (traced)"
    ]
    assert first["what_the_fix_changed"]["diffstat"] == [
        {"file": "pricing/rules.py", "added": 1, "removed": 1}
    ]
    assert len(first["why_it_is_believed"]) >= 2
    assert all("\n" not in line for line in first["why_it_is_believed"])
    assert first["proposer_explanation"][0]["text"].startswith("the 10 % tier starts at 10")
    step = data["steps"][0]
    assert step["cause_sites"] == [
        {"file": "pricing/rules.py", "function": "bulk_discount_percent", "executed": True}
    ]


def _first_probe(page: Path, width: int, height: int) -> dict[str, Any]:
    wrapper = _wrapper(page, width, FIRST_SCREEN_PROBE)
    # The iframe is as tall as the screen, so "without scrolling" is its own viewport.
    wrapper.write_text(wrapper.read_text().replace("height:2400px", f"height:{height}px"))
    dom = _chromium(
        "--allow-file-access-from-files",
        "--run-all-compositor-stages-before-draw",
        "--virtual-time-budget=3000",
        f"--window-size={max(width, 500)},{height}",
        "--dump-dom",
        wrapper.as_uri(),
    )
    found = re.search(r'<pre id="first-probe">(.*?)</pre>', dom, re.DOTALL)
    assert found, f"the probe did not run in {page}"
    result: dict[str, Any] = json.loads(found.group(1).replace("&quot;", '"'))
    return result


@pytest.mark.usefixtures("chromium")
def test_the_first_screen_fits_1280_and_nothing_is_cut_at_390(healed: dict[str, Path]) -> None:
    """At 1280x900 the root cause, the diffstat and every verdict line are drawn without
    scrolling; at 1280 and 390 px no command block (nor the first screen's diff) is cut or
    scrolled sideways, and the page does not overflow.
    Screenshots go to $PATCHHEAL_ARTIFACTS/screenshots/first-screen-*.png."""
    page = healed["html"]
    desktop = _first_probe(page, 1280, 900)
    assert 0 < desktop["where"] < 900, desktop
    assert 0 < desktop["diffstat"] < 900, desktop
    assert 0 < desktop["why"] < 900, desktop
    shots = ARTIFACTS / "screenshots"
    shots.mkdir(parents=True, exist_ok=True)
    for width in (1280, 390):
        probe = _first_probe(page, width, 900)
        assert probe["cut"] == [], f"command blocks cut at {width}px: {probe['cut']}"
        layout = _layout(page, width)
        assert int(str(layout["scrollWidth"])) <= int(str(layout["innerWidth"])), layout
        _chromium(
            f"--window-size={max(width, 500)},900",
            f"--screenshot={shots / f'first-screen-{width}.png'}",
            _wrapper(page, width).as_uri(),
        )


def test_a_few_dozen_diff_lines_and_four_failing_tests_keep_the_verdict_on_screen(
    chromium: None, tmp_path: Path
) -> None:
    """A user trial (humanize's metric fix: 4 failing parametrized tests, a 29-line diff
    shown open) pushed "Why it is believed" below 900 px at 1280. The open diff is bounded
    on the first screen; the verdict's lines stay visible, and nothing is cut sideways."""
    from patchheal.models import Outcome
    from patchheal.report import render_html
    from tests.test_report import attempt, failure, job, step

    body = "".join(f"+    value_{n} = round(value, {n})\n" for n in range(24))
    diff = (
        "diff --git a/src/num.py b/src/num.py\n--- a/src/num.py\n+++ b/src/num.py\n"
        f"@@ -1,1 +1,25 @@\n def metric(value):\n{body}"
    )
    tests = tuple(f"tests/test_num.py::test_metric[{v}]" for v in (999.9, 999.99, 999999, 7))
    reason = "the failing step passes and the regression steps did not get worse: 63 passed"
    fixed = attempt(2, Outcome.FIXED, diff=diff, reason=reason)
    report = job(
        final_diff=diff,
        steps=(step(failure=failure(failing_tests=tests), attempts=(fixed,)),),
    )
    assert len(diff.splitlines()) == 29
    page = tmp_path / "report.html"
    page.write_text(render_html(report))
    desktop = _first_probe(page, 1280, 900)
    assert 0 < desktop["diffstat"] < 900, desktop
    assert 0 < desktop["why"] < 900, desktop
    for width in (1280, 390):
        assert _first_probe(page, width, 900)["cut"] == [], width
