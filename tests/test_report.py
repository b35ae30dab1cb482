"""The root-cause report: model, Markdown/HTML/JSON rendering, escaping and scrubbing.

Rendering runs for real (Jinja2 templates from the package, the real scrubber,
files written to tmp_path); the Markdown is parsed with a CommonMark+GFM-table
parser and the HTML with the standard library's parser.
"""

from __future__ import annotations

import json
from html.parser import HTMLParser
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

from patchheal.errors import BadInput
from patchheal.models import AttemptRecord, Classification, Failure, FailureClass, Frame, Outcome
from patchheal.report import (
    SCHEMA,
    JobReport,
    StepReport,
    load_report,
    render_html,
    render_json,
    render_markdown,
    render_reports,
    report_from_json,
)
from patchheal.report.filters import md_code, md_fence, md_text

GH_TOKEN = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
AWS_KEY = "AKIA" + "Q3EGRT5YXJ7KMN2P"
FP = "3f9a1c0e5b7d2f4a6c8e0b1d3f5a7c9e1b3d5f7a9c1e3b5d7f9a1c3e5b7d9f1a"
CI_FP = "9e8d7c6b5a4f3e2d1c0b9a8f7e6d5c4b3a2f1e0d9c8b7a6f5e4d3c2b1a0f9e8d"
DIFF = """\
diff --git a/src/calc.py b/src/calc.py
--- a/src/calc.py
+++ b/src/calc.py
@@ -1,2 +1,2 @@
 def mean(xs):
-    return sum(xs) / len(xs)
+    return sum(xs) / len(xs) if xs else 0.0
"""
STARTED = 1_700_000_000.0


def failure(**overrides: object) -> Failure:
    fields: dict[str, object] = {
        "fingerprint": FP,
        "error_type": "ZeroDivisionError",
        "message": "division by zero",
        "summary": (
            "tests/test_calc.py:4: in test_mean_empty\nE   ZeroDivisionError: division by zero"
        ),
        "frames": (
            Frame(file="tests/test_calc.py", function="test_mean_empty", line=4),
            Frame(file="/usr/lib/python3.11/statistics.py", function="fmean", in_project=False),
            Frame(file="src/calc.py", function="mean", line=2),
        ),
        "failing_tests": ("tests/test_calc.py::test_mean_empty",),
        "source": "pytest",
    }
    fields.update(overrides)
    return Failure.model_validate(fields)


def attempt(number: int, outcome: Outcome, **overrides: object) -> AttemptRecord:
    fields: dict[str, object] = {
        "job_id": "ci-4821",
        "step_index": 1,
        "attempt_number": number,
        "fingerprint": FP,
        "outcome": outcome,
        "reason": f"reason for {outcome.value}",
        "diff": DIFF,
        "diff_hash": f"{number:02d}" + "ab" * 31,
        "touched_files": ("src/calc.py",),
        "strategy": "add_guard",
        "proposer": "patchfiles",
        "label": f"0{number}-{outcome.value}.patch",
        "log_excerpt": f"collected 3 items\nFAILED tests/test_calc.py::test_mean_empty ({number})",
        "started_at": STARTED + number * 10,
        "duration_seconds": 1.5 * number,
        "attempt_class": "code_bug",
    }
    fields.update(overrides)
    return AttemptRecord.model_validate(fields)


def step(**overrides: object) -> StepReport:
    fields: dict[str, object] = {
        "index": 1,
        "name": "unit",
        "command": "pytest -q tests/test_calc.py",
        "status": "fixed",
        "failure": failure(),
        "classification": Classification(
            failure_class=FailureClass.CODE_BUG,
            retryable=True,
            evidence=("E   ZeroDivisionError: division by zero",),
        ),
        "attempts": (attempt(1, Outcome.FIXED, reason="failing step passed; regression clean"),),
        "checkpoint_patch": "var/runs/ci-4821/steps/step-0001.patch",
    }
    fields.update(overrides)
    return StepReport.model_validate(fields)


def job(**overrides: object) -> JobReport:
    fields: dict[str, object] = {
        "job_id": "ci-4821",
        "repo": "/srv/repos/calc",
        "base": "main",
        "base_commit": "0123456789abcdef0123456789abcdef01234567",
        "harness": "python",
        "harness_reason": "pyproject.toml found",
        "status": "fixed",
        "retryable": False,
        "stop_reason": "all steps fixed",
        "started_at": STARTED,
        "finished_at": STARTED + 125,
        "steps": (step(),),
        "branch": "patchheal/local/ci-4821",
        "final_diff": DIFF,
        "next_actions": (),
        "totals": {"proposer_calls": 1, "fixed": 1, "model_tokens": 0},
        "patchheal_version": "0.1.0",
    }
    fields.update(overrides)
    return JobReport.model_validate(fields)


def every_outcome_report() -> JobReport:
    outcomes = [
        (Outcome.APPLY_FAILED, "patch does not apply: hunk #1 failed at src/calc.py:2"),
        (Outcome.NO_EFFECT, "test_mean_empty still fails with the same fingerprint"),
        (Outcome.REJECTED_REPEAT, "same normalized diff as attempt 2"),
        (Outcome.REJECTED_POLICY, "test tampering: adds @pytest.mark.skip to tests/test_calc.py"),
        (Outcome.REGRESSION, "test_mean_empty passes, but tests/test_calc.py::test_mean broke"),
        (Outcome.TIMEOUT, "idle timeout after 300 s without output"),
        (Outcome.HARNESS_ERROR, "container OOM-killed (exit 137)"),
        (Outcome.REJECTED_ORACLE, "an impossible twin of test_mean_empty passed too"),
        (Outcome.REJECTED_TRIPWIRE, "gc.get_objects from src/calc.py:7"),
        (Outcome.FIXED, "failing step passed; regression clean"),
    ]
    attempts = tuple(
        attempt(i, outcome, reason=reason) for i, (outcome, reason) in enumerate(outcomes, 1)
    )
    # The fixed attempt's regression step broke later: the job ends not fixed.
    return job(
        status="not_fixed",
        retryable=True,
        stop_reason="max_attempts (10) spent without a verified fix",
        steps=(step(status="not_fixed", attempts=attempts, checkpoint_patch=None),),
        branch=None,
        final_diff="",
        totals={"attempts": 10, "proposer_calls": 10},
    )


def infra_report() -> JobReport:
    classification = Classification(
        failure_class=FailureClass.INFRA_ISSUE,
        retryable=False,
        evidence=("Killed", "make: *** [Makefile:12: test] Error 137"),
        next_actions=("Raise the job's memory limit (`[resources] memory`) and rerun.",),
    )
    failed = step(
        status="not_patchable",
        failure=failure(error_type="", message="process killed (exit 137)", failing_tests=()),
        classification=classification,
        attempts=(),
        checkpoint_patch=None,
        stop_reason="infra_issue is deterministic for this loop: no budget spent",
    )
    return job(
        status="not_patchable",
        stop_reason="infra_issue",
        steps=(failed,),
        branch=None,
        final_diff="",
        totals={},
    )


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.srcs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.srcs += [v or "" for k, v in attrs if k in {"src", "href"}]


def md_tables(markdown: str) -> list[list[list[str]]]:
    """Every GFM table as rows of cell texts (inline content as the parser saw it)."""
    tokens = MarkdownIt("commonmark").enable("table").parse(markdown)
    tables: list[list[list[str]]] = []
    row: list[str] = []
    for token in tokens:
        if token.type == "table_open":
            tables.append([])
        elif token.type == "tr_open":
            row = []
        elif token.type == "inline" and tables and token.level >= 4:
            row.append(token.content)
        elif token.type == "tr_close":
            tables[-1].append(row)
    return tables


def test_fixed_report_names_branch_checkpoint_and_diff(tmp_path: Path) -> None:
    paths = render_reports(job(), tmp_path / "reports" / "ci-4821")
    assert set(paths) == {"md", "html", "json"}
    assert all(p.name == f"report.{k}" and p.is_file() for k, p in paths.items())
    md = paths["md"].read_text()
    assert "# patchheal report: ci-4821 — fixed" in md
    assert "`patchheal/local/ci-4821`" in md
    assert "`var/runs/ci-4821/steps/step-0001.patch`" in md
    assert "```diff\n" + DIFF + "```" in md
    assert f"`{FP}`" in md
    assert "`tests/test_calc.py::test_mean_empty`" in md
    assert "`src/calc.py:2` in `mean`" in md
    assert "statistics.py" not in md  # not an in-project frame
    assert "2023-11-14 22:13:20 UTC" in md
    assert "2 min 05 s" in md
    assert "git -C /srv/repos/calc log -p 0123456789ab..patchheal/local/ci-4821" in md
    assert list(tmp_path.glob("reports/ci-4821/.*")) == []  # no temp files left behind


def test_not_fixed_report_lists_every_outcome_with_its_reason() -> None:
    report = every_outcome_report()
    md = render_markdown(report)
    timeline = next(t for t in md_tables(md) if t[0][0] == "#")
    assert len(timeline) == len(Outcome) + 1
    assert all(len(row) == 10 for row in timeline)
    by_number = {int(row[0]): row for row in timeline[1:]}
    for a in report.steps[0].attempts:
        row = by_number[a.attempt_number]
        assert row[6] == f"**{a.outcome.value}**"
        assert a.reason in row[9].replace("\\", "")
        assert row[5] == f"`{a.diff_hash[:12]}`"
        assert row[2] == "`add_guard`"
    assert "No verified patch." in md
    assert "Branch: none" in md
    assert "yes: an outer scheduler may requeue it with backoff" in md
    assert "`patchheal worktree open ATTEMPT`" in md
    assert "`patchheal heal JOB.toml --resume`" in md
    html = render_html(report)
    for outcome in Outcome:
        assert f'class="badge b-{outcome.value}"' in html
    assert "container OOM-killed (exit 137)" in html


def test_why_falls_back_to_the_log_excerpt_when_no_reason_was_recorded() -> None:
    excerpt = "collected 3 items\nE   AssertionError: assert 0.0 == 1.5\n1 failed in 0.02s\nbye"
    report = job(
        steps=(step(attempts=(attempt(1, Outcome.NO_EFFECT, reason="", log_excerpt=excerpt),)),)
    )
    md = render_markdown(report)
    row = next(t for t in md_tables(md) if t[0][0] == "#")[1]
    assert row[9] == "1 failed in 0.02s"


def test_not_patchable_report_says_why_and_gives_the_class_runbook() -> None:
    md = render_markdown(infra_report())
    assert "## Not patched because …" in md
    assert "not patched because the machine, the network or an outside service failed" in md
    evidence = "evidence: `Killed`, `make: *** [Makefile:12: test] Error 137`."
    assert f"Class `infra_issue`; {evidence}" in md
    assert "1. Raise the job's memory limit (`[resources] memory`) and rerun." in md
    assert "No attempt was made on this step." in md
    html = render_html(infra_report())
    assert "<code>[resources] memory</code>" in html


def test_flaky_report_shows_pass_rate_and_env_mismatch_shows_both_fingerprints() -> None:
    flaky = Classification(failure_class=FailureClass.FLAKY, retryable=False, pass_rate=0.6)
    env = Classification(failure_class=FailureClass.ENV_MISMATCH, retryable=False)
    report = job(
        status="not_patchable",
        branch=None,
        final_diff="",
        steps=(
            step(status="not_patchable", classification=flaky, attempts=(), checkpoint_patch=None),
            step(
                index=2,
                name="integration",
                status="not_patchable",
                classification=env,
                ci_fingerprint=CI_FP,
                attempts=(),
                checkpoint_patch=None,
            ),
        ),
    )
    md = render_markdown(report)
    assert "observed pass rate 60%" in md
    assert "sometimes passes on the unchanged base ref" in md
    assert f"Fingerprint in the harness `{FP}`, in the CI log `{CI_FP}`" in md
    assert "observed pass rate <strong>60%</strong>" in render_html(report)


def test_manual_handoff_report() -> None:
    report = job(
        status="manual_handoff",
        retryable=False,
        stop_reason="step 1 (unit): model token budget of 20000 is spent (20000 used)",
        steps=(
            step(
                status="not_fixed", attempts=(attempt(1, Outcome.NO_EFFECT),), checkpoint_patch=None
            ),
        ),
        branch=None,
        final_diff="",
        next_actions=("Ask the owner of `src/calc.py` to look at attempt 1.",),
    )
    md = render_markdown(report)
    assert "# patchheal report: ci-4821 — manual_handoff" in md
    assert "a person takes over from here" in md
    assert "model token budget of 20000 is spent (20000 used)" in md
    runbook = md.split("## Next actions")[1].split("##")[0].strip()
    # The loop's own runbook is printed as given, not padded with generic advice.
    assert runbook == "1. Ask the owner of `src/calc.py` to look at attempt 1."
    defaults = render_markdown(report.model_copy(update={"next_actions": ()}))
    runbook = defaults.split("## Next actions")[1].split("##")[0]
    assert "1. Look at any attempt of the timeline as a worktree" in runbook
    assert "2. Fix it by hand from the timeline of attempts, or raise the job's" in runbook
    assert "requeue" not in runbook


def test_html_escapes_failure_text_and_is_self_contained() -> None:
    evil = '<script>alert("x")</script><img src=x onerror=alert(1)>'
    report = job(
        steps=(
            step(
                failure=failure(message=evil, summary=evil),
                attempts=(attempt(1, Outcome.FIXED, reason=evil),),
            ),
        ),
    )
    html = render_html(report)
    parser = _Tags()
    parser.feed(html)
    assert "script" not in parser.tags
    assert "img" not in parser.tags
    assert parser.srcs == []  # no external assets
    assert "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;" in html
    assert "<style>" in html
    # In Markdown the text sits in code spans and fences: literal text, never raw HTML.
    rendered = MarkdownIt("commonmark").enable("table").render(render_markdown(report))
    parser = _Tags()
    parser.feed(rendered)
    assert "script" not in parser.tags
    assert "img" not in parser.tags
    assert "&lt;script&gt;" in rendered


def test_markdown_table_cells_escape_pipes_and_markup() -> None:
    nasty = r"a | b \| c ` d <b>e</b> *f* __g__"
    report = job(
        harness_reason=nasty,
        steps=(
            step(
                attempts=(
                    attempt(
                        1,
                        Outcome.FIXED,
                        reason=nasty,
                        label=nasty,
                        touched_files=("x|y.py", "z.py"),
                    ),
                ),
            ),
        ),
        totals={"weird|name": 3},
    )
    md = render_markdown(report)
    tables = md_tables(md)
    facts = tables[0]
    assert all(len(row) == 2 for row in facts)
    harness = next(row for row in facts if row[0] == "Harness")
    assert "<b>" not in harness[1]
    assert "|" in harness[1]
    timeline = next(t for t in tables if t[0][0] == "#")
    assert [len(r) for r in timeline] == [10, 10]
    assert timeline[1][4] == "`x|y.py`<br>`z.py`"
    rendered = MarkdownIt("commonmark").enable("table").render(md)
    assert "<b>e</b>" not in rendered
    assert "<em>f</em>" not in rendered
    totals = next(t for t in tables if t[0][0] == "Counter")
    assert totals[1][1] == "3"


def test_diff_with_backtick_fences_is_fenced_safely() -> None:
    readme_diff = (
        "--- a/README.md\n+++ b/README.md\n@@ -1,3 +1,4 @@\n ```python\n-print(1)\n"
        "+print(2)\n+`````\n ```\n"
    )
    report = job(final_diff=readme_diff)
    md = render_markdown(report)
    assert "``````diff\n" + readme_diff + "``````\n" in md
    tokens = MarkdownIt("commonmark").parse(md)
    fences = [t for t in tokens if t.type == "fence" and t.info == "diff"]
    assert [f.content for f in fences][-1] == readme_diff


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("plain", "`plain`"),
        ("a`b", "``a`b``"),
        ("`edge`", "`` `edge` ``"),
        ("", ""),
    ],
)
def test_md_code_delimiters(text: str, expected: str) -> None:
    assert md_code(text) == expected


def test_md_text_and_fence_helpers() -> None:
    assert md_text("- not a list") == "\\- not a list"
    assert md_text("1. not a list") == "1\\. not a list"
    assert md_text("test_a_b and __init__") == "test_a_b and \\_\\_init\\_\\_"
    assert md_fence("x", "text") == "```text\nx\n```"
    assert md_fence("````", "") == "`````\n````\n`````"


def test_json_round_trips_and_is_deterministic(tmp_path: Path) -> None:
    report = every_outcome_report()
    paths = render_reports(report, tmp_path / "a")
    data = json.loads(paths["json"].read_text())
    assert data["schema"] == SCHEMA
    assert data["retryable"] is True
    assert load_report(paths["json"]) == report
    again = render_reports(report, tmp_path / "b")
    for kind in ("md", "html", "json"):
        assert paths[kind].read_bytes() == again[kind].read_bytes()
    reordered = report.model_copy(update={"totals": {"proposer_calls": 10, "attempts": 10}})
    assert render_json(JobReport.model_validate(reordered.model_dump())) == render_json(report)


def test_bad_report_json_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(BadInput, match="not valid JSON"):
        report_from_json("{nope")
    with pytest.raises(BadInput, match="schema is None"):
        report_from_json("{}")
    data = json.loads(render_json(job()))
    data["status"] = "exploded"
    with pytest.raises(BadInput, match="field status"):
        report_from_json(json.dumps(data))
    with pytest.raises(BadInput, match="cannot read report"):
        load_report(tmp_path / "missing.json")


def test_seeded_secrets_appear_in_no_written_file(tmp_path: Path) -> None:
    leaky_diff = DIFF + f'+GITHUB_TOKEN = "{GH_TOKEN}"\n'
    report = job(
        stop_reason=f"push failed with {GH_TOKEN}",
        steps=(
            step(
                failure=failure(
                    summary=f"aws_access_key_id={AWS_KEY}\nE   boom", message=f"key {AWS_KEY}"
                ),
                attempts=(
                    attempt(
                        1, Outcome.NO_EFFECT, reason=f"auth with {GH_TOKEN} failed", diff=leaky_diff
                    ),
                    attempt(2, Outcome.FIXED, log_excerpt=f"Authorization: Bearer {GH_TOKEN}"),
                ),
            ),
        ),
        final_diff=leaky_diff,
        next_actions=(f"Rotate {AWS_KEY}",),
    )
    paths = render_reports(report, tmp_path / "out")
    written = list((tmp_path / "out").iterdir())
    assert sorted(p.name for p in written) == ["report.html", "report.json", "report.md"]
    for path in written:
        text = path.read_text()
        assert GH_TOKEN not in text, path.name
        assert AWS_KEY not in text, path.name
        assert "[REDACTED]" in text, path.name
    assert load_report(paths["json"]).stop_reason == "push failed with [REDACTED]"


def test_a_job_scrubber_masks_job_specific_values(tmp_path: Path) -> None:
    from patchheal.scrub.scrubber import Scrubber

    value = "hunter2-correct-horse"
    report = job(stop_reason=f"login with {value} refused")
    paths = render_reports(report, tmp_path, scrub=Scrubber([value]).scrub)
    assert all(value not in p.read_text() for p in paths.values())


def test_unwritable_report_directory_is_a_clear_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(BadInput, match="cannot create the report directory"):
        render_reports(job(), blocker / "reports")


def test_json_stays_valid_when_the_scrubber_would_mask_a_number(tmp_path: Path) -> None:
    """The scrubber masks `"model_tokens": 123456` as a token assignment; the counts survive."""
    report = job(totals={"model_tokens": 123456, "proposer_calls": 2})
    paths = render_reports(report, tmp_path)
    assert load_report(paths["json"]).totals == {"model_tokens": 123456, "proposer_calls": 2}
    assert "| model_tokens | 123456 |" in paths["md"].read_text()


def test_each_attempt_shows_the_approach_asked_for_and_a_degraded_memory() -> None:
    attempts = (
        attempt(1, Outcome.NO_EFFECT, approach="gather_more_context"),
        attempt(2, Outcome.FIXED, approach="try_alternative", memory_degraded="search timed out"),
    )
    report = job(steps=(step(attempts=attempts),))
    md = render_markdown(report)
    timeline = next(t for t in md_tables(md) if t[0][0] == "#")
    by_number = {int(row[0]): row for row in timeline[1:]}
    assert "approach `gather_more_context`" in by_number[1][2]
    assert "memory degraded" not in by_number[1][2]
    assert "approach `try_alternative`" in by_number[2][2]
    assert "memory degraded: search timed out" in by_number[2][2]
    html = render_html(report)
    assert "<strong>Approach:</strong> <code>try_alternative</code>" in html
    assert "<strong>Memory degraded:</strong> search timed out" in html
