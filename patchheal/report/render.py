"""Render a JobReport to report.md, report.html and report.json.

Every byte goes through the secret scrubber twice: each string of the model
before rendering (so HTML or JSON escaping cannot hide a secret's shape from
the scrubber), and the rendered text after. Files are written atomically,
so a reader never sees half a report.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from patchheal.atomic import atomic_write
from patchheal.errors import BadInput
from patchheal.models import FailureClass, Outcome
from patchheal.report import wording
from patchheal.report.filters import FILTERS
from patchheal.report.firstscreen import as_json, first_screen, one_line_error
from patchheal.report.model import JobReport, StepReport, report_to_json

if TYPE_CHECKING:
    from jinja2 import Environment

Scrub = Callable[[str], str]

MARKDOWN_TEMPLATE = "report.md.j2"
HTML_TEMPLATE = "report.html.j2"


def default_scrub() -> Scrub:
    from patchheal.scrub.active import current

    # Resolved once per rendering: a report has thousands of small strings, and
    # `scrub()` looks the process environment up again on every call. Inside a
    # job it is the job's scrubber (with the values of its `env = [...]`).
    return current().scrub


@lru_cache(maxsize=1)
def environment() -> Environment:
    """The templates' Jinja environment (built once): filters, autoescape for HTML."""
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.PackageLoader("patchheal", "report/templates"),
        # Only the HTML template is escaped; Markdown escaping is explicit (filters).
        autoescape=lambda name: name is not None and name.endswith(".html.j2"),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters.update(FILTERS)
    env.filters["error_line"] = lambda message: one_line_error("", str(message))
    return env


def _scrub_value(value: Any, scrub: Scrub) -> Any:
    if isinstance(value, str):
        return scrub(value)
    if isinstance(value, dict):
        return {_scrub_value(k, scrub): _scrub_value(v, scrub) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_scrub_value(item, scrub) for item in value]
    return value


def scrub_report(report: JobReport, scrub: Scrub | None = None) -> JobReport:
    """A copy of the report with every string (keys too) passed through the scrubber."""
    scrub = scrub or default_scrub()
    data = _scrub_value(report.model_dump(mode="json"), scrub)
    return JobReport.model_validate(data)


def _not_patched_because(step: StepReport) -> str:
    if step.classification is None:
        return step.stop_reason or "the failure could not be classified"
    return wording.NOT_PATCHED_BECAUSE[step.classification.failure_class]


def _context(report: JobReport) -> dict[str, Any]:
    runbook = wording.runbook(report)
    attempts = [a for step in report.steps for a in step.attempts]
    present = {a.outcome for a in attempts}
    counts = Counter(a.outcome for a in attempts)
    totals = report.totals or {o.value: counts[o] for o in Outcome if counts[o]}
    return {
        "report": report,
        "status_meaning": wording.headline(report),
        "attempt_meaning": wording.attempt_meaning,
        "check_locally": wording.check_locally(report),
        "reproduce": wording.reproduce_in_harness(report),
        "step_status": wording.STEP_STATUS_MEANING,
        "outcome_meaning": {o.value: m for o, m in wording.OUTCOME_MEANING.items()},
        "legend": [(o.value, wording.OUTCOME_MEANING[o]) for o in Outcome if o in present],
        "not_patched": [
            (s, _not_patched_because(s)) for s in report.steps if s.status == "not_patchable"
        ],
        "runbook": runbook,
        "first": first_screen(report, runbook),
        "requeue": wording.requeue(report),
        "attempt_count": len(attempts),
        "elapsed": max(report.finished_at - report.started_at, 0.0),
        "totals": totals,
        "flaky": FailureClass.FLAKY.value,
        "checkpoints": [s for s in report.steps if s.checkpoint_patch],
    }


def _render_clean(template: str, clean: JobReport, scrub: Scrub) -> str:
    return scrub(environment().get_template(template).render(_context(clean)))


def _json_clean(clean: JobReport, scrub: Scrub) -> str:
    text = report_to_json(clean, as_json(first_screen(clean, wording.runbook(clean))))
    final = scrub(text)
    try:
        json.loads(final)
    except json.JSONDecodeError:
        # Every string was scrubbed already; a mask that breaks the JSON syntax
        # (e.g. over `"model_tokens": 123456`) would cost the file its
        # parseability for nothing, so keep the text built from the clean model.
        return text
    return final


def render_markdown(report: JobReport, *, scrub: Scrub | None = None) -> str:
    """The GitHub-flavoured Markdown report, scrubbed."""
    scrub = scrub or default_scrub()
    return _render_clean(MARKDOWN_TEMPLATE, scrub_report(report, scrub), scrub)


def render_html(report: JobReport, *, scrub: Scrub | None = None) -> str:
    """The self-contained HTML report (inline CSS, no scripts), autoescaped and scrubbed."""
    scrub = scrub or default_scrub()
    return _render_clean(HTML_TEMPLATE, scrub_report(report, scrub), scrub)


def render_json(report: JobReport, *, scrub: Scrub | None = None) -> str:
    """The report.json text: the scrubbed model plus `"schema": "patchheal.report/1"`."""
    scrub = scrub or default_scrub()
    return _json_clean(scrub_report(report, scrub), scrub)


def render_reports(
    report: JobReport, out_dir: Path, *, scrub: Scrub | None = None
) -> dict[str, Path]:
    """Write out_dir/report.md, report.html and report.json atomically; return their paths.

    `scrub` defaults to `patchheal.scrub.scrubber.scrub`; pass a job's `Scrubber` method
    to also mask that job's secret environment values.
    """
    scrub = scrub or default_scrub()
    clean = scrub_report(report, scrub)
    texts = {
        "md": _render_clean(MARKDOWN_TEMPLATE, clean, scrub),
        "html": _render_clean(HTML_TEMPLATE, clean, scrub),
        "json": _json_clean(clean, scrub),
    }
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise BadInput(f"cannot create the report directory {out_dir}: {exc}") from None
    paths: dict[str, Path] = {}
    for kind, text in texts.items():
        paths[kind] = out_dir / f"report.{kind}"
        try:
            atomic_write(paths[kind], text)
        except OSError as exc:
            raise BadInput(f"cannot write the report {paths[kind]}: {exc}") from None
    return paths
