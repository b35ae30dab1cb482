"""The adversarial battery (tests/verdict_battery.py): no spoof is judged fixed, every real fix is.

Each case reproduces a real failing project through the reproduction gate and
verifies a candidate with the real verification, in the local harness (and,
for a handful, in the Docker harness) with the harness's results channel.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.verdict_battery import CASES, LEGIT, SPOOFS, TWIN_SPOOFS, Case, evaluate

pytestmark = pytest.mark.slow


def test_battery_is_big_enough_and_covers_every_runner() -> None:
    """The issue asks for >= 30 spoofs over pytest, unittest, node and generic; >= 10 fixes."""
    assert len(SPOOFS) >= 30
    assert len(LEGIT) >= 10
    families = {case.project.split("-")[0] for case in SPOOFS}
    assert {"pytest", "unittest", "node", "generic"} <= families
    assert {case.project.split("-")[0] for case in LEGIT} >= {
        "pytest",
        "unittest",
        "node",
        "generic",
    }


_REFUSED = {"rejected_oracle", "rejected_tripwire", "no_effect"}


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_case_is_judged_as_it_must_be(case: Case, tmp_path: Path) -> None:
    """A spoof never ends fixed; a real fix of the same project still does."""
    judged = evaluate(case, tmp_path)
    assert judged.fixed is case.legit, f"{case.tries}: {judged.reason}"
    if case in TWIN_SPOOFS:
        # Tests that pass whatever they check: the impossible twin sees it, and its reason
        # shows the change made to the test (loop/twins.py); or the tripwire refused the
        # trick's first move in the process, so the test did not pass at all.
        assert judged.outcome in _REFUSED, judged.reason
        if judged.outcome == "rejected_oracle":
            assert "test_calc.py:" in judged.reason.splitlines()[0]
    if not case.project.startswith("flaky") or case.budget:
        # Proof the results channel is what reported, for every runner family (a flaky
        # project is never patched when the reproduction reruns it: no runner to show).
        family, _, runner = case.project.partition("-")
        expected = {"generic": "junit", "flaky": runner or "pytest"}.get(family, family)
        assert expected in judged.baseline_runners


DOCKER_CASES = [
    c
    for c in CASES
    if c.name
    in {
        "pytest: Function.runtest = no-op",
        "pytest: print a pass summary, exit 0",
        "pytest: forged results record",
        "unittest: TestCase.run reports success",
        "pytest: result equal to anything",
        "unittest: class construction empties test methods",
        "pytest: fix add",
        "unittest: fix add",
    }
]


@pytest.mark.docker
@pytest.mark.parametrize("case", DOCKER_CASES, ids=[case.name for case in DOCKER_CASES])
def test_docker_harness_collects_results_too(
    case: Case, tmp_path: Path, require_docker: None
) -> None:
    """The collectors reach a sandboxed container (read-only root, mounted results dir)."""
    from patchheal.harness.definitions import load_harness
    from patchheal.harness.docker.harness import DockerHarness

    harness = DockerHarness(load_harness("python"), job_id=f"battery-{os.getpid()}-{tmp_path.name}")
    try:
        judged = evaluate(case, tmp_path, harness, python="python")
    finally:
        harness.close()
    assert judged.fixed is case.legit, f"{case.tries}: {judged.reason}"
    assert judged.baseline_runners == (case.project.split("-")[0],)
    if case in TWIN_SPOOFS:  # refused in the container too (the twin, or the tripwire)
        assert judged.outcome in _REFUSED, judged.reason
