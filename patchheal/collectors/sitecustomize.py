"""Loads patchheal's unittest and Airflow collectors when the harness opened a results channel.

Python imports `sitecustomize` at start-up from the first directory on
sys.path that has one; the harness puts this directory first on PYTHONPATH,
so this module then runs the `sitecustomize` it shadows (a distribution's or
a virtual environment's), keeping the step's start-up what it was.
"""

import contextlib
import importlib.util
import os
import sys

if os.environ.get("PATCHHEAL_RESULTS_DIR"):
    # The tripwire first: an audit hook armed before any other code of the step.
    with contextlib.suppress(Exception):
        import patchheal_monitor

        patchheal_monitor.install()
    with contextlib.suppress(Exception):
        # The impossible twin, in memory: before any project or test module is imported.
        import patchheal_twin

        patchheal_twin.install()
    # A broken collector must never break the step itself.
    with contextlib.suppress(Exception):
        import patchheal_unittest  # noqa: F401
    with contextlib.suppress(Exception):
        # Wraps Airflow's task-instance run if this process ever imports it.
        import patchheal_airflow

        patchheal_airflow.install()

_HERE = os.path.dirname(os.path.abspath(__file__))  # noqa: PTH100, PTH120
for _entry in sys.path:
    _candidate = os.path.join(_entry or ".", "sitecustomize.py")  # noqa: PTH118
    if os.path.abspath(_entry or ".") == _HERE or not os.path.isfile(_candidate):  # noqa: PTH100, PTH113
        continue
    _spec = importlib.util.spec_from_file_location("_shadowed_sitecustomize", _candidate)
    if _spec is not None and _spec.loader is not None:
        _module = importlib.util.module_from_spec(_spec)
        _spec.loader.exec_module(_module)
    break
