"""The generative hostile battery (tests/hostile_battery.py): working tricks, real fixes, a sample.

Every hostile candidate is first proven to fool the bare runner (no patchheal);
>= 80 must. Every real fix must end `fixed`; one hostile candidate per
family × runner (the form rotating) must end not `fixed`. The outcome names
are not asserted: the defences (oracle, tripwire, ...) land in parallel, and
whichever refuses a trick is fine. Local harness, its results channel,
`verify_runs` 2, 30 s step timeouts; a few in the Docker harness.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.hostile.judging import Judge, Judged
from tests.hostile.payloads import FAMILIES
from tests.hostile.proof import Proof, prove_all
from tests.hostile_battery import (
    FORMS,
    HOSTILE,
    LEGIT,
    PROVEN_IN_CI,
    RUNNERS,
    SAMPLE,
    Candidate,
)

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def proofs() -> dict[str, Proof]:
    return {p.candidate.name: p for p in prove_all(PROVEN_IN_CI)}


@pytest.fixture(scope="module")
def judge(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Judge]:
    judge = Judge(tmp_path_factory.mktemp("hostile"))
    yield judge
    judge.close()


def _evaluate_all(judge: Judge, candidates: list[Candidate]) -> list[Judged]:
    with ThreadPoolExecutor(max_workers=2) as pool:
        return list(pool.map(judge.evaluate, candidates))


def test_battery_is_a_product_of_families_runners_and_forms() -> None:
    """The battery is generated, not listed: every family × runner × form is there."""
    combos = {(c.family, c.runner, c.form) for c in HOSTILE}
    assert combos == {(f, r, form) for f in FAMILIES for r in RUNNERS for form in FORMS}
    assert len(LEGIT) >= 20
    assert len({c.project.name.split("-")[0] for c in LEGIT}) >= 5
    assert {c.runner for c in LEGIT} == set(RUNNERS)
    for candidate in HOSTILE:  # source files only: never a test, conftest or config
        changed = candidate.edits
        assert all("test" not in p and not p.endswith((".toml", ".cfg", ".ini")) for p in changed)


def test_at_least_80_hostile_tricks_work_on_the_bare_runner(proofs: dict[str, Proof]) -> None:
    """A trick that does not fool the runner itself proves nothing about the verdict.
    (CI proves the sample and every other candidate; bench_hostile.py proves all.)"""
    broken = [f"{p.candidate.name}: {p.detail}" for p in proofs.values() if not p.works]
    assert len(proofs) - len(broken) >= 80, "\n".join(broken)


def test_every_real_fix_is_fixed(judge: Judge) -> None:
    """Real fixes across five projects and all four runners, some using logging, warnings,
    inspect, dataclasses, functools, a data file, a new module, two files: all `fixed`."""
    judged = _evaluate_all(judge, LEGIT)
    refused = [f"{j.candidate.name}: {j.outcome} — {j.reason}" for j in judged if not j.fixed]
    assert not refused, "\n".join(refused)


def test_sample_of_hostile_tricks_is_not_fixed(judge: Judge, proofs: dict[str, Proof]) -> None:
    """One working trick per family × runner (form rotating): none may end `fixed`."""
    assert len(SAMPLE) == len(FAMILIES) * len(RUNNERS)
    # The key family's proof runs with the real collectors loaded (it must show the forged
    # record accepted), so the tripwire, which keeps the key out of reach, now stops the
    # trick in the proof itself; every other family must still fool the bare runner.
    broken = [c for c in SAMPLE if not proofs[c.name].works]
    assert all(c.family == "key" for c in broken), [proofs[c.name].detail for c in broken]
    judged = _evaluate_all(judge, SAMPLE)
    fooled = [f"{j.candidate.name}: {j.reason}" for j in judged if j.fixed]
    assert not fooled, f"{len(fooled)} of {len(judged)} judged fixed:\n" + "\n".join(fooled)


DOCKER_SAMPLE = [c for c in SAMPLE if c.runner == "python-m-pytest"][:3] + [
    c for c in LEGIT if c.runner in {"python-m-pytest", "unittest"}
][:2]


@pytest.mark.docker
def test_docker_harness_sample(tmp_path: Path, require_docker: None) -> None:
    """The same judgement in the Docker harness: real fixes fixed, tricks not."""
    from patchheal.harness.definitions import load_harness
    from patchheal.harness.docker.harness import DockerHarness

    judge = Judge(
        tmp_path,
        lambda: DockerHarness(
            load_harness("python"), job_id=f"hostile-{os.getpid()}-{tmp_path.name}"
        ),
        python="python",
        pytest="python -m pytest",
    )
    try:
        judged = [judge.evaluate(c) for c in DOCKER_SAMPLE]
    finally:
        judge.close()
    wrong = [f"{j.candidate.name}: {j.reason}" for j in judged if j.fixed is not j.candidate.legit]
    assert not wrong, "\n".join(wrong)
