"""Issue 17: a value passed with `env = [...]` is masked on every write path.

The value is a plain word no default rule recognises, under a name that does
not look secret: only the job's own scrubber knows it. The heal runs through
the command line, so stderr is scanned too.
"""

from __future__ import annotations

import os
import random
import string
import subprocess
import sys
from pathlib import Path

import pytest

from tests.healjobs import FIX, diff_for, make_calc_repo, write_spec

LEAKY_TEST = """\
import os

from calc import add


def test_add():
    word = os.environ.get("DEPLOY_WORD")
    print("deploying with", word)
    assert add(2, 3) == 5, f"failed for {word}"
"""


@pytest.mark.slow
def test_a_job_env_value_never_reaches_store_events_logs_reports_or_stderr(
    tmp_path: Path,
) -> None:
    value = "".join(random.SystemRandom().choice(string.ascii_lowercase) for _ in range(24))
    repo = make_calc_repo(tmp_path, files={"tests/test_calc.py": LEAKY_TEST})
    no_effect = diff_for(repo, {"README.md": "nothing to see\n"})
    fix = diff_for(repo, {"calc.py": FIX})
    command = f"{sys.executable} -m pytest -q -s tests/test_calc.py::test_add"
    spec = write_spec(
        tmp_path / "job.toml", repo, diffs=[no_effect, fix], steps=[("unit", command)]
    )
    spec.write_text(
        spec.read_text().replace('harness = "local"', 'harness = "local"\nenv = ["DEPLOY_WORD"]')
    )
    state, reports, db = tmp_path / "var", tmp_path / "reports", tmp_path / "store.sqlite3"
    env = {**os.environ, "DEPLOY_WORD": value}
    run = subprocess.run(
        [sys.executable, "-m", "patchheal", "heal", str(spec), "--db", str(db),
         "--reports", str(reports), "--state-dir", str(state)],
        capture_output=True, text=True, env=env, timeout=600,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    written = [p for root in (state, reports) for p in root.rglob("*") if p.is_file()]
    written += [p for p in tmp_path.glob("store.sqlite3*") if p.is_file()]
    kinds = {p.suffix for p in written}
    assert {".md", ".html", ".json", ".jsonl"} <= kinds, kinds
    # The value really flowed: the step's output (which printed it) was recorded.
    assert any(b"deploying with" in p.read_bytes() for p in written)
    for path in written:
        assert value.encode() not in path.read_bytes(), f"the env value survived in {path}"
    assert value not in run.stderr
    assert value not in run.stdout
