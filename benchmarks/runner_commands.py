"""How the benchmarks run a case's tests under unittest (shared by bench_reproduce and
its venv control, which must build the same command)."""

from __future__ import annotations

import shlex
from pathlib import Path


def module_name(target: str) -> str:
    """`tests/test_x.py` -> `tests.test_x`; a unittest id stays as it is."""
    return target[: -len(".py")].replace("/", ".") if target.endswith(".py") else target


def unittest_command(tree: Path, config: list[str], targets: list[str], workdir: str) -> str:
    """`python -m unittest -v MODULES`, a `src/` layout importable (no pytest configuration)."""
    env = f'PYTHONPATH="$PYTHONPATH:{workdir}/src" ' if (tree / "src").is_dir() else ""
    return env + shlex.join(["python", "-m", "unittest", "-v", *map(module_name, targets)])
