"""The H2-H4 probes in the real Docker harness: a step that plants a FIFO, a symlink and
deeply nested JUnit in its results directory (and a FIFO at its declared `results` glob)
gets that run rejected with reasons, promptly; the session goes on to the next run."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest
from harness_support import engine, python_def, python_image

from patchheal.harness.config import HarnessDef
from patchheal.harness.docker.harness import DockerHarness

__all__ = ["engine", "python_def", "python_image"]

pytestmark = pytest.mark.docker

PLANT = """
import os
d = os.environ["PATCHHEAL_RESULTS_DIR"]
os.mkfifo(os.path.join(d, "zz.json"))
os.symlink("/etc/passwd", os.path.join(d, "pw.json"))
with open(os.path.join(d, "node-junit.xml"), "w") as f:
    f.write("<testsuites>" + "<testsuite name='s'>" * 100000 + "<testcase name='t'/>"
            + "</testsuite>" * 100000 + "</testsuites>")
os.makedirs("reports", exist_ok=True)
os.mkfifo("reports/r.xml")
print("planted")
"""


@pytest.fixture
def harness(python_image: str, python_def: HarnessDef, request: Any) -> Any:
    h = DockerHarness(python_def, job_id=f"rd-{request.node.name[:30]}-{os.getpid()}")
    yield h
    h.close()


def test_hostile_results_reject_the_run_and_never_hang(
    harness: DockerHarness, tmp_path: Path
) -> None:
    tree = tmp_path / "wt"
    tree.mkdir()
    (tree / "plant.py").write_text(PLANT)
    started = time.monotonic()
    # `-I`: an interpreter that ignores PYTHONPATH, so no collector and no tripwire in it
    # (which now refuse such writes from a watched process): the reader must hold alone.
    result = harness.run(
        "python -I plant.py", tree, timeout=120, idle_timeout=120, results="reports/*.xml"
    )
    assert time.monotonic() - started < 60
    assert "planted" in result.output
    assert result.tests is not None
    rejected = " | ".join(result.tests.rejected)
    assert "zz.json (a FIFO)" in rejected
    assert "pw.json (a symlink)" in rejected
    assert "node-junit.xml (nested deeper than" in rejected
    assert "reports/r.xml (a FIFO)" in rejected
    assert result.tests.outcomes == {}
    following = harness.run("echo next", tree, timeout=60, idle_timeout=60)
    assert following.exit_code == 0


FILL = """
import os
d = os.environ["PATCHHEAL_RESULTS_DIR"]
block = b"x" * (1 << 20)
written = 0
try:
    with open(os.path.join(d, "fill.bin"), "wb") as f:
        for _ in range(64):
            f.write(block)
            f.flush()
            written += len(block)
except OSError as exc:
    print("stopped after", written, "bytes:", exc.strerror)
print("wrote", written)
"""

LOOK = """
import os
d = os.environ["PATCHHEAL_RESULTS_DIR"]
print("siblings", sorted(os.listdir(os.path.dirname(d))))
print("mine", sorted(os.listdir(d)))
"""


def test_a_full_results_directory_rejects_the_run_and_stays_in_the_container(
    python_image: str, python_def: HarnessDef, tmp_path: Path, request: Any
) -> None:
    """H3: 64 MiB written into a results directory capped at 16 MiB stops at the cap inside
    the container (ENOSPC, no host path takes it), the run is rejected with the cap as its
    reason, and the next run of the session starts from an empty results volume."""
    capped = python_def.model_copy(
        update={"sandbox": python_def.sandbox.model_copy(update={"results_size": "16m"})}
    )
    harness = DockerHarness(capped, job_id=f"rd-cap-{os.getpid()}")
    tree = tmp_path / "wt"
    tree.mkdir()
    (tree / "fill.py").write_text(FILL)
    (tree / "look.py").write_text(LOOK)
    try:
        started = time.monotonic()
        result = harness.run("python -I fill.py", tree, timeout=120, idle_timeout=120)
        assert time.monotonic() - started < 60
        assert "No space left on device" in result.output, result.output
        written = int(result.output.split("wrote ")[1].split()[0])
        assert 8 << 20 <= written <= 16 << 20
        assert result.tests is not None
        rejected = " | ".join(result.tests.rejected)
        assert f"reached its cap of {16 << 20} bytes" in rejected, rejected
        # Nothing of it reached the host: the run's directory is no host path.
        assert not list(tree.rglob("fill.bin"))
        following = harness.run("python -I look.py", tree, timeout=60, idle_timeout=60)
        assert following.exit_code == 0, following.output
        # The previous run's directory is gone; this one's is empty.
        assert "mine []" in following.output
        siblings = following.output.split("siblings ")[1].splitlines()[0]
        assert siblings.count("results-") == 1, siblings
        assert following.tests is None
    finally:
        harness.close()
