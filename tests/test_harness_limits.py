"""Job packages, the worktree size limit and the runner-like environment: the pure parts
(issue 32 items 4 and 8). The real-Docker side is in test_harness_tree_docker.py and
test_harness_runner_docker.py."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from patchheal.config import build_spec
from patchheal.errors import SpecError
from patchheal.failure.analysis import analyze
from patchheal.failure.classify import classify
from patchheal.harness.config import HarnessDef
from patchheal.harness.definitions import load_harness
from patchheal.harness.engine import sandbox
from patchheal.harness.engine.treesize import allocated_bytes, shown
from patchheal.harness.images import recipe
from patchheal.harness.tables import SandboxSpec
from patchheal.models import CommandResult, FailureClass
from patchheal.verdict.judge import judge


def _spec(tmp_path: Path, packages: object) -> object:
    data = {
        "job": {"id": "pk", "repo": str(tmp_path), "packages": packages},
        "steps": [{"name": "t", "command": "true"}],
    }
    return build_spec(data, source="job.toml", base_dir=tmp_path)


def test_job_packages_take_debian_names(tmp_path: Path) -> None:
    spec = _spec(tmp_path, ["graphviz", "libpq-dev", "g++", "python3.11-dev"])
    assert spec.job.packages == ("graphviz", "libpq-dev", "g++", "python3.11-dev")  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    "bad", ["Graphviz", "a", "-o", "jq; rm -rf /", "jq=1.6", "lib pq", "", "über", "x" * 101]
)
def test_job_packages_refuse_what_is_no_debian_name(tmp_path: Path, bad: str) -> None:
    with pytest.raises(SpecError) as caught:
        _spec(tmp_path, ["jq", bad])
    assert "not a Debian package name" in str(caught.value)


def test_the_image_of_a_package_list_is_keyed_by_the_sorted_list() -> None:
    python = load_harness("python")
    base = recipe.image_tag(python)
    one = recipe.image_tag(recipe.with_packages(python, ["tree", "jq"]))
    same = recipe.image_tag(recipe.with_packages(python, ["jq", "tree", "jq"]))
    other = recipe.image_tag(recipe.with_packages(python, ["jq"]))
    assert one == same
    assert len({base, one, other}) == 3
    assert recipe.with_packages(python, []) is python
    # A harness on another's image (dbt on python): the packages go into the chain's base.
    dbt = recipe.with_packages(load_harness("dbt"), ["jq"])
    assert recipe.image_tag(dbt) != recipe.image_tag(load_harness("dbt"))
    assert recipe._base_harness(dbt).image.extra_packages == ("jq",)


def test_job_packages_are_refused_where_no_image_takes_them() -> None:
    with pytest.raises(SpecError, match="not a Debian package name"):
        recipe.with_packages(load_harness("python"), ["NotOne"])
    compose = HarnessDef.model_validate(
        {"name": "svc", "kind": "compose", "compose": {"service": "step"}}
    )
    with pytest.raises(SpecError, match="compose harness"):
        recipe.with_packages(compose, ["jq"])


@pytest.mark.parametrize(
    ("value", "ok"),
    [("4g", True), ("20m", True), ("off", True), ("big", False), ("-1g", False), ("", False)],
)
def test_worktree_size_takes_a_size_or_off(value: str, ok: bool) -> None:
    if ok:
        assert SandboxSpec.model_validate({"worktree_size": value}).worktree_size == value
    else:
        with pytest.raises(ValueError, match="worktree_size"):
            SandboxSpec.model_validate({"worktree_size": value})
    assert SandboxSpec.model_validate({}).worktree_size == "4g"


def test_allocated_bytes_counts_blocks_once_per_inode_and_not_through_links(
    tmp_path: Path,
) -> None:
    (tmp_path / "d" / "e").mkdir(parents=True)
    (tmp_path / "d" / "e" / "one.bin").write_bytes(os.urandom(3 << 20))
    before = allocated_bytes(tmp_path)
    assert 3 << 20 <= before < (3 << 20) + (1 << 20)
    os.link(tmp_path / "d" / "e" / "one.bin", tmp_path / "hard.bin")
    (tmp_path / "outside").symlink_to("/usr")
    assert allocated_bytes(tmp_path) - before < 64 << 10
    (tmp_path / "two.bin").write_bytes(os.urandom(1 << 20))
    assert allocated_bytes(tmp_path) >= before + (1 << 20)
    assert allocated_bytes(tmp_path / "missing") == 0
    assert shown(20 << 20) == "20 MiB"
    assert shown(4 << 30) == "4 GiB"
    assert shown(1536) == "1.5 KiB"


STOPPED = CommandResult(
    command="pytest",
    exit_code=None,
    output="....\n[patchheal: the step was stopped: the step's writes filled its worktree]\n",
    duration_seconds=3.0,
    stopped="the step's writes filled its worktree past its limit of 20 MiB",
)


def test_a_stopped_run_is_judged_by_its_limit_and_classified_infra_not_code() -> None:
    verdict = judge(STOPPED)
    assert not verdict.passed
    assert verdict.reason == f"stopped: {STOPPED.stopped}"
    failure = analyze(STOPPED.output, command="pytest")
    found = classify(failure, STOPPED.output, exit_code=None, stopped=STOPPED.stopped)
    assert found.failure_class is FailureClass.INFRA_ISSUE
    assert "20 MiB" in found.evidence[0]
    assert any("worktree_size" in action for action in found.next_actions)
    # Only the harness's field stops a run: the same words printed by a step that exits 0
    # are its output, not a limit (a candidate cannot dress its run as stopped).
    printed = judge(STOPPED.model_copy(update={"stopped": None, "exit_code": 0}))
    assert printed.passed
    assert printed.reason == "exited with code 0"


def test_the_step_environment_is_a_ci_runners() -> None:
    env = sandbox.environment(load_harness("python"), ())
    assert env["CI"] == "true"
    assert env["HOME"] == "/tmp"
    assert env["LANG"] == "C.UTF-8"


def test_a_verification_run_stopped_by_its_limit_is_not_a_verdict_on_the_patch(
    tmp_path: Path,
) -> None:
    """Not `no_effect` (which keeps the candidate's claim for that fingerprint forever): the
    run says why it ended, records `harness_error` (claim released), the next candidate runs."""
    from patchheal.models import Outcome
    from patchheal.verdict.decide import decide
    from patchheal.verdict.evidence import VerificationEvidence

    base_output = "FAILED tests/test_a.py::test_a - AssertionError\n1 failed in 0.1s\n"
    base = CommandResult(command="pytest", exit_code=1, output=base_output, duration_seconds=1)
    baseline = judge(base)
    failure = analyze(base_output, command="pytest")
    evidence = VerificationEvidence(
        command="pytest", tree=tmp_path, baseline=baseline, failure=failure
    )
    ended = decide(evidence.with_run(STOPPED))
    assert ended.outcome is Outcome.HARNESS_ERROR
    assert ended.reason == f"the run was stopped: {STOPPED.stopped}"
    # The same failing output without the harness's stop is the patch's own verdict.
    plain = STOPPED.model_copy(update={"stopped": None, "exit_code": 1, "output": base_output})
    judged = decide(evidence.with_run(plain))
    assert judged.outcome is Outcome.NO_EFFECT
