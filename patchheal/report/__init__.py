"""The root-cause report: a typed model rendered to Markdown, HTML and JSON.

Jinja2 loads only when a report is rendered, so importing this package is cheap.
"""

from patchheal.report.model import (
    SCHEMA,
    JobReport,
    StepReport,
    load_report,
    report_from_json,
    report_to_json,
)
from patchheal.report.render import (
    render_html,
    render_json,
    render_markdown,
    render_reports,
    scrub_report,
)

__all__ = [
    "SCHEMA",
    "JobReport",
    "StepReport",
    "load_report",
    "render_html",
    "render_json",
    "render_markdown",
    "render_reports",
    "report_from_json",
    "report_to_json",
    "scrub_report",
]
