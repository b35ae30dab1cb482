"""StatsD metrics of a real heal run, received on a real UDP socket on 127.0.0.1."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.healjobs import (
    STEP_BUG,
    WRONG,
    diff_for,
    heal_in_process,
    make_calc_repo,
    make_multi_repo,
    multi_steps,
    patchheal_cli,
    state_args,
    step_fix_diff,
    step_module,
    write_spec,
)

Packet = tuple[str, str, str, dict[str, str]]  # name, value, kind, tags


def parse(line: str) -> Packet:
    """`name:value|kind|#k:v,k:v` (DogStatsD tags)."""
    parts = line.split("|")
    name, value = parts[0].split(":", 1)
    tags: dict[str, str] = {}
    for part in parts[2:]:
        if part.startswith("#"):
            tags = dict(tag.split(":", 1) for tag in part[1:].split(","))
    return name, value, parts[1], tags


@pytest.fixture
def statsd() -> Iterator[socket.socket]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    sock.settimeout(0.2)
    yield sock
    sock.close()


def drain(sock: socket.socket) -> list[Packet]:
    packets: list[Packet] = []
    while True:
        try:
            data = sock.recv(65535)
        except TimeoutError:
            return packets
        packets += [parse(line) for line in data.decode().splitlines() if line]


@pytest.mark.slow
def test_heal_run_sends_attempt_recovery_timer_and_timeout_metrics(
    tmp_path: Path, statsd: socket.socket
) -> None:
    """One attempt hangs (idle timeout), the next fixes the step: every metric says so."""
    repo = make_multi_repo(tmp_path, 1)
    hang = step_module(1).replace(STEP_BUG, "    import time\n    time.sleep(60)\n")
    spec = write_spec(
        tmp_path / "job.toml",
        repo,
        job_id="one",
        steps=multi_steps(1),
        diffs=[diff_for(repo, {"bugs/b1.py": hang}), step_fix_diff(repo, 1)],
        budget="idle_timeout_seconds = 1\nstep_timeout_seconds = 30",
    )
    port = statsd.getsockname()[1]
    done = patchheal_cli("heal", str(spec), *state_args(tmp_path), "--statsd", f"127.0.0.1:{port}")
    assert done.returncode == 0, done.stderr
    packets = drain(statsd)
    base = {"failure_class": "code_bug", "strategy": "scripted"}
    timeout_tags = {**base, "outcome": "timeout"}
    fixed_tags = {**base, "outcome": "fixed"}
    counters = [(n, v, t) for n, v, k, t in packets if k == "c"]
    assert counters == [
        ("task.self_heal.attempts_total", "1", timeout_tags),
        ("task.step.idle_timeout_total", "1", timeout_tags),
        ("task.self_heal.attempts_total", "1", fixed_tags),
        ("task.self_heal.recovered_total", "1", base),
    ]
    timers = [(n, float(v), t) for n, v, k, t in packets if k == "h"]
    assert [(n, t) for n, _, t in timers] == [
        ("task.step.duration_seconds", timeout_tags),
        ("task.step.duration_seconds", fixed_tags),
    ]
    # Durations are in seconds, as the name says, and they are the attempts' own.
    records = [
        json.loads(p.read_text())
        for p in sorted((tmp_path / "var" / "runs" / "one" / "attempts").glob("*/record.json"))
    ]
    for (_, value, _), record in zip(timers, records, strict=True):
        assert value == pytest.approx(record["duration_seconds"], abs=1e-5)
    assert timers[0][1] >= 1.0  # the idle timeout of 1 s


@pytest.mark.slow
def test_wall_timeout_exhausted_and_no_progress_counters(
    tmp_path: Path, statsd: socket.socket
) -> None:
    """Job a: its only attempt runs past the wall clock (pytest prints nothing meanwhile, so
    the idle limit is set higher) and the budget is spent. Job b: no progress, stuck."""
    repo = make_calc_repo(tmp_path)
    spin = WRONG.replace("return b - a", "while True:\n        pass")
    wrong = diff_for(repo, {"calc.py": WRONG})
    same = diff_for(repo, {"calc.py": WRONG.replace("return b - a", "return  b - a")})
    host, port = statsd.getsockname()
    # 10 s: the reproduction must end within it on a loaded machine (at 1.5 s it timed out
    # in CI at load 4); the spinning candidate never does.
    budget = "max_attempts = 1\nstep_timeout_seconds = 10\nidle_timeout_seconds = 30"
    spec = write_spec(
        tmp_path / "a.toml", repo, job_id="a", diffs=[diff_for(repo, {"calc.py": spin})],
        budget=budget,
    )  # fmt: skip
    heal_in_process(tmp_path, spec, statsd_host=host, statsd_port=port)
    spec = write_spec(
        tmp_path / "b.toml",
        repo,
        job_id="b",
        diffs=[wrong, same, same],
        budget="no_progress_limit = 2\nmax_hard_resets = 0",
    )
    heal_in_process(tmp_path, spec, statsd_host=host, statsd_port=port)
    counters = [(n, t) for n, _, k, t in drain(statsd) if k == "c"]
    base = {"failure_class": "code_bug", "strategy": "scripted"}
    # Every terminal stop counts as exhausted, the stuck one too; `stop` says which.
    assert counters == [
        ("task.self_heal.attempts_total", {**base, "outcome": "timeout"}),
        ("task.step.wall_timeout_total", {**base, "outcome": "timeout"}),
        ("task.self_heal.exhausted_total", {"failure_class": "code_bug", "stop": "not_fixed"}),
        ("task.self_heal.attempts_total", {**base, "outcome": "no_effect"}),
        ("task.self_heal.attempts_total", {**base, "outcome": "rejected_repeat"}),
        ("task.self_heal.attempts_total", {**base, "outcome": "rejected_repeat"}),
        ("task.step.no_progress_total", {"failure_class": "code_bug"}),
        ("task.self_heal.exhausted_total", {"failure_class": "code_bug", "stop": "not_fixed"}),
    ]


def test_a_metrics_outage_does_not_affect_the_run(tmp_path: Path) -> None:
    """Nothing listens on the port: the sends fail (ICMP port unreachable), the run does not."""
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    repo = make_multi_repo(tmp_path, 1)
    spec = write_spec(
        tmp_path / "job.toml",
        repo,
        job_id="one",
        steps=multi_steps(1),
        diffs=[step_fix_diff(repo, 1)],
    )
    started = time.monotonic()
    done = patchheal_cli(
        "heal", str(spec), *state_args(tmp_path), "--statsd", f"127.0.0.1:{port}", "--json"
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["status"] == "fixed"
    assert time.monotonic() - started < 60
