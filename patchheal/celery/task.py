"""The task: heal one job, then finish, retry with backoff, or requeue it (see `decide`)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from celery import Task

from patchheal.atomic import atomic_write
from patchheal.celery.app import app
from patchheal.celery.runner import heal_once
from patchheal.celery.settings import QueueSettings, decide
from patchheal.errors import BadInput

log = logging.getLogger("patchheal.celery")


def _first_delivery(state: dict[str, Any], task_id: str, attempt: int, requeues: int) -> bool:
    """False when this very delivery started before (its worker died): heal with --resume."""
    marker = Path(state["state_dir"]) / "queue" / f"{task_id}-{attempt}-{requeues}.started"
    if marker.exists():
        return False
    atomic_write(marker, "")
    return True


# Celery ships no type hints for its decorators.
@app.task(bind=True, name="patchheal.heal_job", max_retries=None)  # type: ignore[untyped-decorator]
def heal_job(
    self: Task[Any, Any],
    spec_toml: str,
    spec_dir: str,
    state: dict[str, Any],
    queue_attempt: int = 1,
    infra_requeues: int = 0,
) -> dict[str, Any]:
    """Heal one job spec (TOML text); return its `--json` summary plus a `queue` section."""
    settings = QueueSettings.from_conf(self.app.conf)
    task_id = str(self.request.id)
    first = _first_delivery(state, task_id, queue_attempt, infra_requeues)
    # Any later delivery continues from the job's checkpoints (`heal --resume`).
    resume = not first or queue_attempt > 1 or infra_requeues > 0
    code, summary = heal_once(
        spec_toml,
        spec_dir,
        state,
        resume=resume,
        queue_attempt=queue_attempt,
        say=lambda message: log.info("[%s] %s", summary_id(spec_toml), message),
    )
    decision = decide(
        code,
        bool(summary.get("retryable")),
        queue_attempt=queue_attempt,
        infra_requeues=infra_requeues,
        settings=settings,
    )
    summary["exit_code"] = code
    summary["queue"] = {
        "attempt": queue_attempt,
        "max_attempts": settings.max_queue_attempts,
        "infra_requeues": infra_requeues,
        "resumed": resume,
        "worker": self.request.hostname,
        "decision": decision.action,
        "why": decision.why,
    }
    log.info("job %s exit %s: %s %s", summary.get("job_id"), code, decision.action, decision.why)
    if decision.action == "fail":
        raise BadInput(f"{summary.get('error') or decision.why}")
    if decision.action in ("retry", "requeue"):
        retry_kwargs = {
            "spec_toml": spec_toml,
            "spec_dir": spec_dir,
            "state": state,
            "queue_attempt": queue_attempt + (decision.action == "retry"),
            "infra_requeues": infra_requeues + (decision.action == "requeue"),
        }
        raise self.retry(args=(), kwargs=retry_kwargs, countdown=decision.countdown)
    return summary


def summary_id(spec_toml: str) -> str:
    """The job id for log lines, without validating the spec again."""
    for line in spec_toml.splitlines():
        if line.strip().startswith("id ="):
            return line.split("=", 1)[1].strip().strip("\"'")
    return "?"
