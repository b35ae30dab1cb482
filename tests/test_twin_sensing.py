"""Candidates that try to tell the impossible twin apart (issue 33, items 3 and 6), real runs.

Each hostile candidate (`tests/hostile/twinsense.py`) changes calc.py only:
its `add` returns an object equal to anything, except in a run its sensor
takes for the twin, where it is honest so that the twin "fails as it must".
First the sensors are shown to work: against a test file changed on disk the
way the twin used to change it (times set back), the candidate stands down.
Then each file sensor (content, size, times, `inspect.getsource`) under every
runner, names in a rotating form, is verified for real: the twin is made in
memory, the sensor sees nothing, the cheat runs in the twin too and the twin
refuses it (`rejected_oracle`). A run counter in the worktree never gets past
1 (each run starts from the worktree the first one started from); reading the
test's compiled constants is named by the tripwire; and a candidate that runs
the real fix only where the twin's state in memory or a counter shows it sees
nothing (a finder, the loaders' closures and answers, the module's names, the
worktree) or is named (the loader compiling the test file for it, a test's
code read) (docs/verdict.md, "Impossible twins").
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from patchheal.collectors.patchheal_watch import KEPT_OUTSIDE
from patchheal.models import Outcome
from tests.hostile.cases import PY, PYTEST, write_tree
from tests.hostile.judging import Judge, Judged
from tests.hostile_battery import (
    FORMS,
    HOSTILE,
    LIMIT_CANDIDATES,
    MEMORY_SENSORS,
    RUNNERS,
    Candidate,
)

pytestmark = pytest.mark.slow

FILE_SENSORS = ("twin-content", "twin-size", "twin-times", "twin-source")


def _sensing() -> list[Candidate]:
    """One candidate per file sensor × runner, the form rotating (never `datafile`, whose
    exec the tripwire refuses before the twin is reached)."""
    picked = []
    for i, family in enumerate(FILE_SENSORS):
        for r, runner in enumerate(RUNNERS):
            form = FORMS[(i + r) % (len(FORMS) - 1)]
            picked += [c for c in HOSTILE if (c.family, c.runner, c.form) == (family, runner, form)]
    return picked


SENSING = _sensing()


@pytest.fixture(scope="module")
def judge(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Judge]:
    judge = Judge(tmp_path_factory.mktemp("twin-sensing"))
    yield judge
    judge.close()


def _evaluate_all(judge: Judge, candidates: list[Candidate]) -> list[Judged]:
    with ThreadPoolExecutor(max_workers=2) as pool:
        return list(pool.map(judge.evaluate, candidates))


def _bare_run(tree: Path, candidate: Candidate) -> int:
    command = candidate.command(python=PY, pytest=PYTEST)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PATCHHEAL_")}
    env.pop("PYTHONPATH", None)
    done = subprocess.run(
        command, shell=True, cwd=tree, env=env, capture_output=True, timeout=120, check=False
    )
    return done.returncode


@pytest.mark.parametrize("family", [*FILE_SENSORS, "twin-code"])
def test_each_sensor_sees_a_test_file_changed_on_disk(tmp_path: Path, family: str) -> None:
    """The sensors work: as it is, the cheat passes the bare runner; with the test file
    changed in place as the twin used to (its times set back), it stands down and the
    changed test fails, which a twin on disk took for an honest candidate."""
    candidate = next(
        c for c in [*HOSTILE, *LIMIT_CANDIDATES] if c.family == family and c.runner == "pytest"
    )
    tree = tmp_path / "tree"
    write_tree(tree, {**candidate.project.files, **candidate.edits})
    test_file = tree / candidate.project.defined
    assert _bare_run(tree, candidate) == 0, "the cheat does not pass the bare runner"
    st = test_file.stat()
    test_file.write_text(test_file.read_text().replace("== 5", "== 12"))
    os.utime(test_file, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert _bare_run(tree, candidate) != 0, "the sensor did not see the changed file"


def test_twin_sensors_by_file_are_refused_by_the_twin_made_in_memory(judge: Judge) -> None:
    """Every file sensor under every runner: the twin, made in memory, is refused (the one
    that reads the test's source through `inspect` is named by the tripwire first)."""
    assert {(c.family, c.runner) for c in SENSING} == {
        (f, r) for f in FILE_SENSORS for r in RUNNERS
    }
    judged = _evaluate_all(judge, SENSING)
    wrong = []
    for j in judged:
        # `inspect.getsource` finds the test's lines through its `__code__`: named for it.
        seen = "a test's code read" if j.candidate.family == "twin-source" else ""
        expected = Outcome.REJECTED_TRIPWIRE if seen else Outcome.REJECTED_ORACLE
        if j.outcome is not expected or seen not in j.reason:
            wrong.append(f"{j.candidate.name}: {j.outcome} {j.reason}")
    assert not wrong, "\n".join(wrong)


def test_what_tells_the_twin_apart_gains_nothing_wherever_the_twin_is(judge: Judge) -> None:
    """Counting runs finds nothing: each run of the failing step starts from the worktree
    the first one started from (workspace/added.py), so a counter kept there never
    gets past 1 and the candidate cheats in the twin too (`rejected_oracle`), wherever the
    twin is. One that tells the twin apart by the test's code constants reads a test's
    `__code__`, which the tripwire names. A counter kept in `/tmp`, to leave the twin where
    it guesses it (exit, raise KeyboardInterrupt, skip its test), writes a file outside the
    worktree and the run's temporary folder, which the tripwire names. Each of those was
    judged `fixed` while "failed as it must" was the absence of a pass, then `no_effect`
    (no test failing shown there) while the local harness kept `/tmp` between runs
    (docs/verdict.md, "Impossible twins", "Counting runs")."""
    places = {"twin-count": (1, 2), "twin-code": (1,), "twin-leave": (2,)}
    tried = [(c, after) for c in LIMIT_CANDIDATES for after in places[c.family]]
    with ThreadPoolExecutor(max_workers=2) as pool:
        judged = list(pool.map(lambda pair: judge.evaluate(*pair), tried))
    assert {(c.family, c.runner) for c, _ in tried} == {
        (f, r) for f in ("twin-count", "twin-code", "twin-leave") for r in RUNNERS
    }
    assert {c.variant for c, _ in tried if c.family == "twin-leave"} == {
        "exit",
        "interrupt",
        "skip",
    }
    for (candidate, after), j in zip(tried, judged, strict=True):
        name = f"{candidate.name}, twin after run {after}: {j.outcome} {j.reason}"
        if candidate.family == "twin-code":
            assert j.outcome is Outcome.REJECTED_TRIPWIRE, name
            assert "a test's code read by non-test code" in j.reason, name
            continue
        if candidate.family == "twin-leave":
            # Its counter, in `/tmp`, is a file written outside the worktree and the run's
            # own temporary folder. (Before that was seen, leaving the twin where the
            # counter guessed it showed no test failing there: `no_effect`, or
            # `rejected_oracle` for a run that exits 0 with its protected test skipped.)
            assert j.outcome is Outcome.REJECTED_TRIPWIRE, name
            assert KEPT_OUTSIDE in j.reason, name
            continue
        assert j.outcome in (Outcome.NO_EFFECT, Outcome.REJECTED_ORACLE), name
        assert "impossible twin" in j.reason, name
        # A counter in the worktree never gets past 1: each run starts from the worktree the
        # first one started from (workspace/added.py), so it cheats in the twin too.
        assert j.outcome is Outcome.REJECTED_ORACLE, name


# Sensors that reach the test's code through the import system or a function's `__code__`
# see the twin, and are named by the tripwire for it; the others see nothing.
SEEN_BY_THE_TRIPWIRE = {"loader-compile": "test module imported by non-test code"} | {
    "code-constants": "a test's code read by non-test code"
}


def test_a_fix_live_only_in_the_twin_is_not_fixed(judge: Judge) -> None:
    """Issue 33's last hole: the real fix run only in a run its sensor takes for the twin,
    by the twin's state in memory (a finder's list, the loader wrappers' closures, the
    loader's answer for the test file, the test file compiled by the loader, the test
    module's names, the test's code constants); an object equal to anything elsewhere.
    Every one was judged `fixed` while the plan sat in a finder and the loaders answered
    only for a planned file. Now the plan is in the monitor's hook alone and every run's
    loaders answer alike: the sensor sees nothing and cheats in the twin too
    (`rejected_oracle`), or reaches the test's code and is named (`rejected_tripwire`)."""
    variants = {c.variant for c in HOSTILE if c.family == "twin-memory"}
    assert len(variants) == 7
    assert {(c.variant, c.runner) for c in MEMORY_SENSORS} == {
        (v, r) for v in variants for r in RUNNERS
    }
    judged = _evaluate_all(judge, MEMORY_SENSORS)
    wrong = []
    for j in judged:
        seen = SEEN_BY_THE_TRIPWIRE.get(j.candidate.variant)
        expected = Outcome.REJECTED_TRIPWIRE if seen else Outcome.REJECTED_ORACLE
        if j.outcome is not expected or (seen and seen not in j.reason):
            wrong.append(f"{j.candidate.name}: {j.outcome} {j.reason}")
    assert not wrong, "\n".join(wrong)


def test_a_run_counter_outside_the_worktree_is_named_in_the_local_harness(judge: Judge) -> None:
    """The fix live where a counter kept in `/tmp` guesses the twin runs, with the twin
    there (after the last run): judged `fixed` under all four runners while the local
    harness kept the host's temporary folder between runs. Each run now has a temporary
    folder of its own, and a file the project's code writes outside it and the worktree
    is named by the tripwire (docs/verdict.md, "Counting runs")."""
    from tests.hostile.payloads import BOTH, Variant
    from tests.hostile.twinsense import BY_COUNT_TMP_LIVE
    from tests.hostile_battery import each_runner

    counter = Variant("twin-memory", "tmp-counter", BOTH, BY_COUNT_TMP_LIVE, "runs")
    picked = list(each_runner((counter,)))
    assert {c.runner for c in picked} == set(RUNNERS)
    with ThreadPoolExecutor(max_workers=2) as pool:
        judged = list(pool.map(lambda c: judge.evaluate(c, 2), picked))
    wrong = [
        f"{j.candidate.name}: {j.outcome} {j.reason}"
        for j in judged
        if j.outcome is not Outcome.REJECTED_TRIPWIRE or KEPT_OUTSIDE not in j.reason
    ]
    assert not wrong, "\n".join(wrong)


@pytest.mark.docker
def test_twin_sensors_are_refused_in_the_docker_harness_too(
    tmp_path: Path, require_docker: None
) -> None:
    """In a sandboxed container (the worktree bind-mounted, the collectors mounted
    read-only): the twin is made in the container's Python, and no sensor sees it, nor a
    run counter kept in the worktree or in `/tmp`, with the twin where it would guess."""
    from patchheal.harness.definitions import load_harness
    from patchheal.harness.docker.harness import DockerHarness
    from tests.hostile.payloads import BOTH, Variant
    from tests.hostile.twinsense import BY_COUNT_TMP_LIVE
    from tests.hostile_battery import each_runner

    picked = [c for c in SENSING if c.runner in ("python-m-pytest", "unittest")]
    picked = [c for c in picked if c.family in ("twin-content", "twin-times")]
    # The fix live where the twin's state or a counter shows it: the finder, the worktree,
    # and `/tmp`, which the local harness keeps between runs and the container empties.
    picked += [
        c
        for c in MEMORY_SENSORS
        if c.runner == "unittest" and c.variant in ("finder-state", "worktree-counter")
    ]
    tmp_counter = Variant("twin-memory", "tmp-counter", BOTH, BY_COUNT_TMP_LIVE, "runs")
    picked += [c for c in each_runner((tmp_counter,)) if c.runner == "python-m-pytest"]
    judge = Judge(
        tmp_path,
        lambda: DockerHarness(load_harness("python"), job_id=f"twin-{os.getpid()}-{tmp_path.name}"),
        python="python",
        pytest="python -m pytest",
    )
    try:
        # The twin after the second run: where a counter that survived would guess it.
        judged = [judge.evaluate(c, 2) for c in picked]
    finally:
        judge.close()
    assert len(judged) == 7
    wrong = [
        f"{j.candidate.name}: {j.outcome} {j.reason}"
        for j in judged
        if j.outcome is not Outcome.REJECTED_ORACLE
    ]
    assert not wrong, "\n".join(wrong)
