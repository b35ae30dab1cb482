"""Scale-out on Celery (the `celery` extra): a queue of heal jobs, workers that heal them.

`patchheal.celery.app` is the Celery app (`celery -A patchheal.celery worker`
works; `patchheal worker` wraps it with patchheal's settings). The app is
loaded on first access, so `patchheal.celery.settings` imports without the
extra, and only `submit` and `worker` ever load Celery itself.
"""

from __future__ import annotations

from typing import Any


def __getattr__(name: str) -> Any:
    if name in ("app", "make_app", "configure"):
        from patchheal.celery import app as app_module

        return getattr(app_module, name)
    raise AttributeError(name)
