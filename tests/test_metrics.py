"""StatsD metrics, received as real UDP packets on 127.0.0.1."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator

import pytest

from patchheal.telemetry.metrics import Metrics


@pytest.fixture
def receiver() -> Iterator[socket.socket]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    sock.settimeout(5)
    yield sock
    sock.close()


def packets(sock: socket.socket, count: int) -> list[str]:
    return [sock.recv(65535).decode() for _ in range(count)]


def test_counters_and_timers_with_tags(receiver: socket.socket) -> None:
    port = receiver.getsockname()[1]
    metrics = Metrics("127.0.0.1", port, prefix="patchheal")
    tags = {"failure_class": "code_bug", "strategy": "fix_logic"}
    metrics.incr("self_heal.attempts_total", tags=tags)
    metrics.incr("self_heal.recovered_total", 3)
    metrics.duration("step.duration_seconds", 1.25, tags={"failure_class": "code_bug"})
    metrics.duration("proposer.latency_ms", 0.5)
    metrics.incr("step.no_progress_total", tags={"strategy": "a|b,c#d e:f"})
    metrics.close()
    assert packets(receiver, 5) == [
        "patchheal.self_heal.attempts_total:1|c|#failure_class:code_bug,strategy:fix_logic",
        "patchheal.self_heal.recovered_total:3|c",
        # A name says its unit: seconds stay seconds, milliseconds are a StatsD timer.
        "patchheal.step.duration_seconds:1.250000|h|#failure_class:code_bug",
        "patchheal.proposer.latency_ms:500.000|ms",
        "patchheal.step.no_progress_total:1|c|#strategy:a_b_c_d_e_f",
    ]


def test_the_default_prefix_is_the_seed_specs_task(receiver: socket.socket) -> None:
    metrics = Metrics("127.0.0.1", receiver.getsockname()[1])
    metrics.incr("self_heal.attempts_total")
    metrics.close()
    assert packets(receiver, 1) == ["task.self_heal.attempts_total:1|c"]


def test_a_duration_without_a_unit_in_its_name_is_refused() -> None:
    """Invariant: no duration is sent in a unit its name does not say."""
    with pytest.raises(ValueError, match="_seconds or _ms"):
        Metrics(None).duration("step.duration", 1.0)


def test_disabled_metrics_are_a_no_op(receiver: socket.socket) -> None:
    for metrics in (Metrics(None), Metrics(""), Metrics("127.0.0.1", 0), Metrics("::1", 70000)):
        assert not metrics.enabled
        metrics.incr("self_heal.attempts_total")
        metrics.duration("step.duration_seconds", 1.0)
        metrics.close()
    receiver.settimeout(0.2)
    with pytest.raises(TimeoutError):
        receiver.recv(65535)


def test_an_outage_is_invisible_to_the_run(receiver: socket.socket) -> None:
    """Invariant: no metrics failure raises or blocks: nobody listening, bad values."""
    port = receiver.getsockname()[1]
    receiver.close()  # nobody listens any more: ICMP port unreachable comes back
    metrics = Metrics("127.0.0.1", port)
    started = time.perf_counter()
    for _ in range(20_000):
        metrics.incr("self_heal.attempts_total", tags={"strategy": "x" * 200})
    metrics.incr("too.big", tags={"pad": "p" * 70_000})  # EMSGSIZE from the kernel
    metrics.incr("bad", value="not a number")  # type: ignore[arg-type]
    metrics.duration("bad_seconds", "soon")  # type: ignore[arg-type]
    elapsed = time.perf_counter() - started
    metrics.close()
    metrics.incr("after.close")
    assert elapsed < 5.0


def test_a_full_socket_buffer_drops_packets_instead_of_blocking(receiver: socket.socket) -> None:
    receiver.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1024)  # never read: fills at once
    metrics = Metrics("127.0.0.1", receiver.getsockname()[1])
    metrics._sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1024)  # type: ignore[union-attr]
    started = time.perf_counter()
    for _ in range(20_000):
        metrics.duration("step.duration_seconds", 0.5, tags={"pad": "p" * 500})
    assert time.perf_counter() - started < 5.0
    metrics.close()
