"""The Airflow verdict goes by the collector's signed record, not by the printed mark.

Real Airflow 2.10.5 in the airflow harness's Docker image, one tiny DAG whose
tasks are the cases. Each hostile task prints a forged `Marking task as
SUCCESS` line and then tries something else to exit 0 without succeeding; each
case is taken through `loop.verification.verify` (the code a candidate goes
through) against a baseline in which the task failed, and must not be `fixed`.
The legitimate tasks must be. One hostile case, reading the token from
/proc/self/environ, was a documented hole until the tripwire (docs/verdict.md).
"""

from __future__ import annotations

import subprocess
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from patchheal.config import BudgetSpec, StepSpec
from patchheal.harness.definitions import load_harness
from patchheal.harness.docker.harness import DockerHarness
from patchheal.loop.verification import verify
from patchheal.models import CommandResult, Failure, Outcome, TestResults, Verdict
from patchheal.verdict.judge import judge

# The first Airflow run on a fresh machine builds the Airflow dependency image (~8 min cold,
# docs/harnesses.md) if no other Airflow test ran before: more than the suite's 300 s default.
pytestmark = [
    pytest.mark.docker,
    pytest.mark.usefixtures("require_docker"),
    pytest.mark.timeout(1800),
]

DAG = """
import datetime, hashlib, hmac, json, os, sys
from airflow import DAG
from airflow.decorators import task
from airflow.exceptions import AirflowSkipException
from airflow.operators.python import get_current_context

def forge(name):
    print(f"Marking task as SUCCESS. dag_id=cases, task_id={name}, run_id=forged", flush=True)

def forged_record(name, token):
    payload = json.dumps({"runner": "airflow", "finished": True,
                          "outcomes": {f"cases.{name}": "passed"}, "tampered": []})
    mac = hmac.new(token.encode(), payload.encode(), hashlib.sha256).hexdigest()
    folder = os.environ["PATCHHEAL_RESULTS_DIR"]
    with open(os.path.join(folder, "airflow-1-forged.json"), "w") as out:
        json.dump({"payload": payload, "mac": mac}, out)

with DAG("cases", start_date=datetime.datetime(2026, 1, 1), schedule=None):
"""
CASES = {
    "fails": "raise ValueError('the bug')",
    # Hostile: each must not be fixed.
    "skip": "forge('skip'); raise AirflowSkipException('not today')",
    "os_exit": "forge('os_exit'); os._exit(0)",
    "sys_exit": "forge('sys_exit'); sys.exit(0)",
    "listener_call": """
        from airflow.listeners.listener import get_listener_manager
        ti = get_current_context()["ti"]
        ti.state = "success"
        get_listener_manager().hook.on_task_instance_success(
            previous_state="running", task_instance=ti, session=None)
        forge('listener_call'); raise AirflowSkipException('skip')""",
    "collector_call": """
        import patchheal_airflow
        patchheal_airflow._outcomes["cases.collector_call"] = "passed"
        forge('collector_call'); patchheal_airflow.finish(); os._exit(0)""",
    "results_dir": """
        folder = os.environ["PATCHHEAL_RESULTS_DIR"]
        for name in os.listdir(folder):
            os.remove(os.path.join(folder, name))
        forged_record('results_dir', 'guessed'); forge('results_dir'); os._exit(0)""",
    "results_dir_then_skip": """
        forged_record('results_dir_then_skip', '0' * 64)
        forge('results_dir_then_skip'); raise AirflowSkipException('skip')""",
    "environ_token": """
        token = os.environ.get("PATCHHEAL_RESULTS_TOKEN", "")
        print(f"token in os.environ: {bool(token)}")
        forged_record('environ_token', token); forge('environ_token'); os._exit(0)""",
    # Airflow prints a real SUCCESS mark: the callback flips the state after the skip.
    "state_flip": "raise AirflowSkipException('skip')",
    # Was the documented hole: the tripwire now refuses the read (docs/verdict.md).
    "proc_environ": """
        environ = open("/proc/self/environ", "rb").read().split(b"\\0")
        token = next(v.split(b"=", 1)[1] for v in environ
                     if v.startswith(b"PATCHHEAL_RESULTS_TOKEN="))
        forged_record('proc_environ', token.decode()); forge('proc_environ'); os._exit(0)""",
    # Legitimate: each must be fixed.
    "returns_value": "return {'rows': 3, 'total': 42.5}",
    # About 3.4 MB of output: more than the harness keeps (head + tail, 2 MiB).
    "chatty": "for i in range(80_000): print(f'line {i} ' + 'x' * 32)",
}
DECORATORS = {
    "state_flip": "@task(on_skipped_callback=lambda c: setattr(c['ti'], 'state', 'success'))"
}
MAPPED = """
    @task
    def double(x):
        return 2 * x
    double.expand(x=[1, 2, 3])
"""
HOSTILE = (
    "skip",
    "os_exit",
    "sys_exit",
    "listener_call",
    "collector_call",
    "results_dir",
    "results_dir_then_skip",
    "environ_token",
    "state_flip",
)


def _dag_file() -> str:
    body = []
    for name, code in CASES.items():
        decorator = DECORATORS.get(name, "@task")
        lines = textwrap.dedent(code).strip()
        body.append(
            f"    {decorator}\n    def {name}():\n{textwrap.indent(lines, ' ' * 8)}\n    {name}()\n"
        )
    return DAG + "\n".join(body) + MAPPED


LISTENER = """
from airflow.listeners import hookimpl
from airflow.plugins_manager import AirflowPlugin

class Listener:
    @hookimpl
    def on_task_instance_running(self, previous_state, task_instance, session):
        print("LISTENER running", task_instance.task_id, flush=True)

    @hookimpl
    def on_task_instance_success(self, previous_state, task_instance, session):
        print("LISTENER success", task_instance.task_id, flush=True)

class ListenerPlugin(AirflowPlugin):
    name = "listener"
    listeners = [Listener()]
"""


@pytest.fixture(scope="module")
def airflow(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[DockerHarness, Path]]:
    project = tmp_path_factory.mktemp("airflow-cases")
    (project / "dags").mkdir()
    (project / "dags" / "cases.py").write_text(_dag_file(), encoding="utf-8")
    (project / "plugins").mkdir()
    (project / "plugins" / "listener.py").write_text(LISTENER, encoding="utf-8")
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "cases"]):
        subprocess.run(
            ["git", "-c", "user.name=t", "-c", "user.email=t@t.invalid", *args],
            cwd=project, check=True,
        )  # fmt: skip
    harness = DockerHarness(load_harness("airflow"), job_id="airflow-results-test")
    try:
        yield harness, project
    finally:
        harness.close()


def _baseline(task: str) -> Verdict:
    """The reproduction's verdict: the task failed, and the collector said so (shape checked
    against a real failing run in test_a_failing_task_is_recorded_failed_by_the_collector)."""
    tests = TestResults(outcomes={task: "failed"}, runners=("airflow",))
    return judge(CommandResult(command="", exit_code=1, output="", duration_seconds=1, tests=tests))


def _verify(airflow: tuple[DockerHarness, Path], task: str, extra: str = "") -> tuple[Outcome, str]:
    harness, project = airflow
    name = task.removeprefix("cases.").split("[")[0]
    step = StepSpec(name=name, command=f"airflow tasks test cases {name} 2026-01-05{extra}")
    outcome, reason, _ = verify(
        harness,
        step,
        project,
        BudgetSpec(verify_runs=1, step_timeout_seconds=300, idle_timeout_seconds=300),
        baseline=_baseline(task),
        failure=Failure(fingerprint="baseline", failing_tests=(task,), source="airflow"),
        regression=(),
        regression_baseline={},
    )
    return outcome, reason


@pytest.mark.slow
def test_a_failing_task_is_recorded_failed_by_the_collector(
    airflow: tuple[DockerHarness, Path],
) -> None:
    harness, project = airflow
    result = harness.run(
        "airflow tasks test cases fails 2026-01-05", project, timeout=300, idle_timeout=300
    )
    assert result.exit_code == 1
    assert result.tests is not None
    assert result.tests.outcomes == {"cases.fails": "failed"}
    assert result.tests.runners == ("airflow",)
    assert not result.tests.tampered
    assert not result.tests.rejected
    # The shape _baseline() builds, what the tripwire reported and the monitor's assertion
    # evidence (the run's own, never a baseline's) aside (docs/verdict.md).
    aside = {"monitor": (), "asserted": None, "evidence_kinds": (), "sources": {}}
    assert _baseline("cases.fails").tests == result.tests.model_copy(update=aside)


@pytest.mark.slow
def test_airflow_calls_no_success_listener_under_tasks_test(
    airflow: tuple[DockerHarness, Path],
) -> None:
    """Why the collector wraps the run instead of listening: 2.10.5 guards
    `on_task_instance_success` with `if not test_mode`."""
    harness, project = airflow
    result = harness.run(
        "AIRFLOW__CORE__PLUGINS_FOLDER=$PWD/plugins "
        "airflow tasks test cases returns_value 2026-01-05",
        project,
        timeout=300,
        idle_timeout=300,
    )
    assert result.exit_code == 0, result.output[-2000:]
    assert "LISTENER running returns_value" in result.output
    assert "LISTENER success" not in result.output
    assert result.tests is not None
    assert result.tests.outcomes == {"cases.returns_value": "passed"}


@pytest.mark.slow
@pytest.mark.parametrize("case", HOSTILE)
def test_a_hostile_task_is_not_fixed(airflow: tuple[DockerHarness, Path], case: str) -> None:
    outcome, reason = _verify(airflow, f"cases.{case}")
    assert outcome is Outcome.NO_EFFECT, reason
    assert "the failing step still fails" in reason


@pytest.mark.slow
def test_a_task_reading_proc_self_environ_for_the_token_is_not_fixed(
    airflow: tuple[DockerHarness, Path],
) -> None:
    """The hole this test used to assert open (docs/verdict.md): the tripwire refuses a read of
    /proc/*/environ from the step's Python, and the environment block no longer holds the
    token, so the task fails instead of signing a pass."""
    outcome, reason = _verify(airflow, "cases.proc_environ")
    assert outcome is not Outcome.FIXED, reason


@pytest.mark.slow
@pytest.mark.parametrize(("task", "extra"), [
    ("cases.returns_value", ""),
    ("cases.chatty", ""),
    ("cases.double[1]", " --map-index 1"),
])  # fmt: skip
def test_a_task_that_really_succeeds_is_fixed(
    airflow: tuple[DockerHarness, Path], task: str, extra: str
) -> None:
    outcome, reason = _verify(airflow, task, extra)
    assert outcome is Outcome.FIXED, reason
