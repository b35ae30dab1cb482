"""The reports people read, rendered by a real headless Chromium at 1280 px and 390 px.

For each of five report kinds (fixed, not fixed, not patchable, hand-off, cancelled)
and the index: no horizontal overflow, no two pieces of text drawn over each other,
no badge wrapped onto two lines ("fixe/d" at 390 px, issue 27), no external asset.
The page itself carries no script; the test measures a copy of it
with a small script injected, and Chromium writes the result into the DOM it dumps.
Screenshots are kept under $PATCHHEAL_ARTIFACTS/screenshots (default
var/ci-artifacts/screenshots/ in the checkout) for a person to look at.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest

from patchheal.models import Outcome
from patchheal.report.history import new_run_id, publish_reports
from patchheal.report.model import JobReport
from tests.test_report import STARTED, attempt, every_outcome_report, infra_report, job, step

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
WIDTHS = (1280, 390)
ARTIFACTS = Path(
    os.environ.get("PATCHHEAL_ARTIFACTS") or Path(__file__).parent.parent / "var" / "ci-artifacts"
)

# Headless Chromium will not make a window narrower than 500 px, so the page is laid
# out in an iframe of exactly the width under test (its media queries see that
# width), and the probe in the wrapper page measures the iframe's document.
# Measures the page as laid out: the document wider than the window, and every pair
# of text boxes (one rectangle per line of a text node) that intersect by more than a
# pixel each way, and text laid out a letter or two per line. Text inside a
# scrolling <pre> is clipped to its box first.
PROBE = """
<script>
addEventListener('load', () => {
  const win = document.getElementById('page').contentWindow;
  const doc = win.document;
  const boxes = [];
  const broken = [];
  const walker = doc.createTreeWalker(doc.body, NodeFilter.SHOW_TEXT);
  let id = 0;
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    if (!node.textContent.trim()) continue;
    const el = node.parentElement;
    const closed = el.closest('details:not([open])');
    if (closed && !el.closest('summary')) continue;  // folded: not drawn
    if (!el.getClientRects().length) continue;
    const clip = el.closest('pre') ? el.closest('pre').getBoundingClientRect() : null;
    const range = doc.createRange();
    range.selectNodeContents(node);
    id += 1;
    const lines = [...range.getClientRects()];
    const text = node.textContent.trim();
    // A word laid out a letter or two per line: a column too narrow to read.
    if (text.length >= 4 && lines.length >= 4 && lines.every(r => r.width < 20)) {
      broken.push(text.slice(0, 40));
    }
    for (const r of lines) {
      let [l, t, rr, b] = [r.left, r.top, r.right, r.bottom];
      if (clip) { l = Math.max(l, clip.left); rr = Math.min(rr, clip.right); }
      const text = node.textContent.trim().slice(0, 40);
      if (rr - l > 1 && b - t > 1) boxes.push({id, l, t, r: rr, b, text});
    }
  }
  const overlaps = [];
  for (let i = 0; i < boxes.length; i++) {
    for (let j = i + 1; j < boxes.length; j++) {
      const a = boxes[i], c = boxes[j];
      if (a.id === c.id) continue;
      const w = Math.min(a.r, c.r) - Math.max(a.l, c.l);
      const h = Math.min(a.b, c.b) - Math.max(a.t, c.t);
      if (w > 1 && h > 1) overlaps.push([a.text, c.text]);
    }
  }
  // A badge (`fixed`, `no_effect`) is one word: laid out on two lines it reads "fixe/d".
  const wrapped = [];
  for (const badge of doc.querySelectorAll('.badge')) {
    if (badge.closest('details:not([open])') || !badge.getClientRects().length) continue;
    const range = doc.createRange();
    range.selectNodeContents(badge);
    const tops = new Set([...range.getClientRects()].map(r => Math.round(r.top)));
    if (tops.size > 1) wrapped.push(badge.textContent.trim());
  }
  const out = document.createElement('pre');
  out.id = 'layout-probe';
  out.textContent = JSON.stringify({
    scrollWidth: doc.documentElement.scrollWidth,
    innerWidth: win.innerWidth,
    boxes: boxes.length,
    overlaps: overlaps.slice(0, 10),
    broken: broken.slice(0, 10),
    wrapped: wrapped.slice(0, 10),
  });
  document.body.appendChild(out);
});
</script>
"""


def reports() -> dict[str, JobReport]:
    handoff = job(
        status="manual_handoff",
        stop_reason="step 1 (unit): every proposer has run out of candidates",
        branch=None,
        final_diff="",
        steps=(
            step(
                status="not_fixed",
                checkpoint_patch=None,
                attempts=(
                    attempt(
                        1,
                        Outcome.APPLY_FAILED,
                        reason="\n".join(
                            f"error: patch failed: src/calc.py:{n}\nerror: "
                            "/tmp/patchheal-0/worktrees/ci-4821/verify/src/calc.py: "
                            "patch does not apply"
                            for n in range(4)
                        ),
                    ),
                    attempt(2, Outcome.REJECTED_REPEAT, reason="same normalized diff as 1"),
                ),
            ),
        ),
    )
    cancelled = job(
        status="cancelled",
        retryable=True,
        stop_reason="interrupted (Ctrl-C or SIGTERM); resume with --resume",
        branch=None,
        final_diff="",
        steps=(step(status="not_fixed", checkpoint_patch=None),),
    )
    kinds = {
        "fixed": job(),
        "not-fixed": every_outcome_report(),
        "not-patchable": infra_report(),
        "handoff": handoff,
        "cancelled": cancelled,
    }
    return {
        name: report.model_copy(update={"job_id": f"{name}-1", "started_at": STARTED + i})
        for i, (name, report) in enumerate(kinds.items())
    }


class _Assets(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.external: list[str] = []
        self.scripts = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.scripts += tag == "script"
        for name, value in attrs:
            if name in {"src", "href", "srcset", "data", "poster"} and re.match(
                r"^\s*(https?:|//|ftp:)", value or "", re.IGNORECASE
            ):
                self.external.append(f"<{tag} {name}={value}>")


def _chromium(*args: str) -> str:
    assert CHROMIUM is not None
    done = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def _wrapper(page: Path, width: int, probe: str = "") -> Path:
    wrapper = page.with_name(f"at-{width}-{page.name}")
    wrapper.write_text(
        '<!DOCTYPE html><html><body style="margin:0">'
        f'<iframe id="page" src="{page.name}" style="border:0;width:{width}px;height:2400px">'
        f"</iframe>{probe}</body></html>"
    )
    return wrapper


def _layout(page: Path, width: int) -> dict[str, object]:
    probe = _wrapper(page, width, PROBE)
    dom = _chromium(
        "--allow-file-access-from-files",
        "--run-all-compositor-stages-before-draw",
        "--virtual-time-budget=3000",
        f"--window-size={max(width, 500)},2400",
        "--dump-dom",
        probe.as_uri(),
    )
    found = re.search(r'<pre id="layout-probe">(.*?)</pre>', dom, re.DOTALL)
    assert found, f"the probe did not run in {page}"
    result: dict[str, object] = json.loads(found.group(1).replace("&quot;", '"'))
    return result


@pytest.fixture
def chromium() -> None:
    if CHROMIUM is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is not installed, and CI is set: the browser check must run")
        pytest.skip("chromium is not installed (apt-get install chromium)")


@pytest.mark.slow
@pytest.mark.usefixtures("chromium")
def test_reports_and_index_lay_out_at_desktop_and_phone_width(tmp_path: Path) -> None:
    root = tmp_path / "reports"
    pages: dict[str, Path] = {}
    for name, report in reports().items():
        run = new_run_id(report.started_at)
        paths = publish_reports(report.model_copy(update={"run_id": run}), root, run)
        pages[name] = paths["html"]
    pages["index"] = root / "index.html"
    shots = ARTIFACTS / "screenshots"
    shots.mkdir(parents=True, exist_ok=True)
    problems: list[str] = []
    for name, page in pages.items():
        assets = _Assets()
        assets.feed(page.read_text())
        if assets.external or assets.scripts:
            problems.append(f"{name}: external {assets.external}, {assets.scripts} script(s)")
        for width in WIDTHS:
            result = _layout(page, width)
            if int(str(result["scrollWidth"])) > int(str(result["innerWidth"])):
                problems.append(f"{name} at {width}px: overflows horizontally {result}")
            if result["broken"]:
                problems.append(f"{name} at {width}px: words broken per letter {result['broken']}")
            if result["wrapped"]:
                problems.append(f"{name} at {width}px: badges wrap {result['wrapped']}")
            if result["overlaps"]:
                problems.append(f"{name} at {width}px: text overlaps {result['overlaps']}")
            assert int(str(result["boxes"])) > 10, f"{name}: the probe saw no text"
            _chromium(
                f"--window-size={width},2400",
                f"--screenshot={shots / f'{name}-{width}.png'}",
                _wrapper(page, width).as_uri(),
            )
    assert problems == [], "\n".join(problems)
