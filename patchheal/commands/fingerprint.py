"""`patchheal fingerprint LOGFILE`: fingerprint and classify a failure log.

Streams the log (`-` reads stdin) and decodes only its failure-relevant
sections, so a log of any size is answered in bounded memory. An unreadable,
empty or binary log exits 2 with a message that says which.
"""

from __future__ import annotations

import json
from pathlib import Path

import click


@click.command()
@click.argument("logfile", type=click.Path(dir_okay=False, allow_dash=True, path_type=Path))
@click.option("--junit", "junit_path", default=None,
              type=click.Path(dir_okay=False, path_type=Path),
              help="a JUnit XML report of the same run (failing test ids, messages)")  # fmt: skip
@click.option("--repo-root", default=None, type=click.Path(file_okay=False),
              help="the repository the log comes from (makes paths repo-relative)")  # fmt: skip
@click.option("--json", "as_json", is_flag=True, help="print JSON on stdout")
def fingerprint(
    logfile: Path, junit_path: Path | None, repo_root: str | None, as_json: bool
) -> None:
    """Print the fingerprint, class and evidence of the failure in LOGFILE (`-`: stdin)."""
    from patchheal.errors import BadInput
    from patchheal.failure.analysis import from_text, read_log
    from patchheal.failure.classify import classify
    from patchheal.failure.runbooks import with_test_id

    excerpt = read_log(None if str(logfile) == "-" else logfile)
    if junit_path is not None and not junit_path.is_file():
        raise BadInput(f"cannot read the JUnit report {junit_path}: no such file")
    failure = from_text(excerpt.text, repo_root=repo_root, junit=junit_path)
    classification = classify(failure, excerpt.text, repo_root=repo_root)
    # The runbook says TEST_ID; this log names the test.
    next_actions = with_test_id(classification.next_actions, failure.failing_tests)
    payload = {
        "fingerprint": failure.fingerprint,
        "classification": classification.failure_class.value,
        "retryable": classification.retryable,
        "error_type": failure.error_type,
        "message": failure.message,
        "summary": failure.summary,
        "source": failure.source,
        "frames": [f.model_dump() for f in failure.project_frames],
        "failing_tests": list(failure.failing_tests),
        "evidence": list(classification.evidence),
        "next_actions": list(next_actions),
        "log_bytes": excerpt.total_bytes,
    }
    if as_json:
        click.echo(json.dumps(payload, indent=2))
        return
    click.echo(f"fingerprint:    {failure.fingerprint}")
    click.echo(f"classification: {payload['classification']} "
               f"({'retryable' if classification.retryable else 'not retryable'})")  # fmt: skip
    click.echo(f"error:          {failure.error_type or '-'}: {failure.message.split(chr(10))[0]}")
    for test in failure.failing_tests[:10]:
        click.echo(f"failing test:   {test}")
    for frame in failure.project_frames[-5:]:
        click.echo(f"frame:          {frame.file}:{frame.line} in {frame.function or '?'}")
    for line in classification.evidence:
        click.echo(f"evidence:       {line}")
    for action in next_actions:
        click.echo(f"next:           {action}")
