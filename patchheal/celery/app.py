"""The Celery app and the settings that make a killed worker give its job back."""

from __future__ import annotations

from celery import Celery

from patchheal.celery.settings import QueueSettings, broker_from_env


def configure(
    celery_app: Celery,
    broker: str | None = None,
    *,
    settings: QueueSettings | None = None,
    visibility_timeout: float = 3600.0,
) -> Celery:
    """Point the app at `broker` (also the result backend, for `submit --wait`)."""
    url = broker or broker_from_env()
    celery_app.conf.update(
        broker_url=url,
        result_backend=url,
        # A job is acknowledged only once it ended: a worker killed mid-job gives it back.
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        # One job at a time per process, and one fresh process per job: nothing leaks
        # between jobs healed in-process (caches, signal handlers, open stores).
        worker_prefetch_multiplier=1,
        worker_max_tasks_per_child=1,
        # Redis redelivers a message whose worker vanished without a word after this.
        broker_transport_options={"visibility_timeout": visibility_timeout},
        result_backend_transport_options={"visibility_timeout": visibility_timeout},
        task_serializer="json",
        result_serializer="json",
        accept_content=["json"],
        result_extended=True,
        broker_connection_retry_on_startup=True,
        worker_hijack_root_logger=False,
        **(settings or QueueSettings()).to_conf(),
    )
    return celery_app


def make_app(broker: str | None = None) -> Celery:
    return configure(Celery("patchheal", include=["patchheal.celery.task"]), broker)


app = make_app()
