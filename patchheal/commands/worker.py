"""`patchheal worker`: a Celery worker with patchheal's settings, healing queued jobs."""

from __future__ import annotations

import click

from patchheal.celery.settings import DEFAULT_BROKER, QueueSettings


def _preload_heal_stack() -> None:
    """Import the heal path once, here: every job's fresh pool process is forked from
    this one, so it starts with these modules loaded instead of importing them again."""
    import patchheal.config
    import patchheal.loop.controller
    import patchheal.loop.summary
    import patchheal.report.render  # noqa: F401


@click.command()
@click.option(
    "--broker",
    envvar="PATCHHEAL_BROKER",
    default=DEFAULT_BROKER,
    show_default=True,
    help="Celery broker URL (also the result backend)",
)
@click.option("--concurrency", type=int, default=1, show_default=True, help="jobs at once")
@click.option("--name", default=None, help="worker node name (default: patchheal@HOST)")
@click.option(
    "--queue-attempts",
    type=click.IntRange(min=1),
    default=QueueSettings.max_queue_attempts,
    show_default=True,
    help="counted attempts per job (retryable endings are retried up to this)",
)
@click.option(
    "--backoff",
    type=click.FloatRange(min=0),
    default=QueueSettings.backoff_seconds,
    show_default=True,
    help="seconds before the first retry; doubles per counted attempt",
)
@click.option(
    "--backoff-cap", type=click.FloatRange(min=0), default=QueueSettings.backoff_cap_seconds
)
@click.option(
    "--infra-requeues",
    type=click.IntRange(min=0),
    default=QueueSettings.max_infra_requeues,
    show_default=True,
    help="requeues after exit 3/130, not counted as attempts",
)
@click.option(
    "--visibility-timeout",
    type=click.FloatRange(min=1),
    default=3600.0,
    show_default=True,
    help="seconds before Redis redelivers a job whose whole worker vanished; "
    "longer than your longest job",
)
@click.option("--loglevel", default="INFO", show_default=True)
def worker(
    broker: str,
    concurrency: int,
    name: str | None,
    queue_attempts: int,
    backoff: float,
    backoff_cap: float,
    infra_requeues: int,
    visibility_timeout: float,
    loglevel: str,
) -> None:
    """Heal jobs from the queue until stopped (Ctrl-C or SIGTERM: a warm shutdown).

    One process per job, acknowledged only when it ended: a worker killed
    mid-job gives the job back and another continues it with --resume.
    """
    from patchheal.commands.queue_extra import load_celery_app

    app = load_celery_app(broker)
    from patchheal.celery.app import configure

    settings = QueueSettings(queue_attempts, backoff, backoff_cap, infra_requeues)
    _preload_heal_stack()
    configure(app, broker, settings=settings, visibility_timeout=visibility_timeout)
    # Prefork, one fresh process per job, replaced without Celery's 5 s lag (celery/pool.py).
    app.conf.worker_pool = "patchheal.celery.pool:TaskPool"
    argv = [
        "worker",
        f"--loglevel={loglevel}",
        f"--concurrency={concurrency}",
        "--without-gossip",
        "--without-mingle",
    ]
    if name:
        argv.append(f"--hostname={name}")
    app.worker_main(argv)
