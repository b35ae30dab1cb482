"""Loading the optional `celery` extra for `submit` and `worker`, with a clear error."""

from __future__ import annotations

from typing import Any

from patchheal.errors import BadInput


def load_celery_app(broker: str) -> Any:
    """The configured `patchheal.celery` app; exit 2 when the extra is not installed."""
    try:
        from patchheal.celery.app import app, configure
    except ImportError as exc:
        raise BadInput(
            f"the celery extra is not installed ({exc.name or exc}): "
            "pip install 'patchheal[celery]'"
        ) from None
    return configure(app, broker)
