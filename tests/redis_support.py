"""A throwaway Redis server for tests (Debian's redis-server), loopback only.

A random free port on 127.0.0.1, no persistence (`--save '' --appendonly no`),
its directory in the test's temp dir, killed at teardown. A missing
redis-server skips the Celery tests, unless CI is set: then they fail.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

REDIS_SERVER = "/usr/bin/redis-server"


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(16).startswith(b"+PONG")
    except OSError:
        return False


def start_redis(directory: Path) -> Iterator[str]:
    """Run redis-server until the generator closes; yields its redis:// URL."""
    binary = REDIS_SERVER if Path(REDIS_SERVER).exists() else shutil.which("redis-server")
    if binary is None:
        reason = "redis-server is not installed (apt-get install redis-server)"
        if os.environ.get("CI"):
            pytest.fail(f"{reason}, and CI is set: the Celery tests must run")
        pytest.skip(reason)
    directory.mkdir(parents=True, exist_ok=True)
    port = _free_port()
    argv = [binary, "--bind", "127.0.0.1", "--port", str(port), "--save", "", "--appendonly"]
    argv += ["no", "--dir", str(directory), "--protected-mode", "yes"]
    log = (directory / "redis.log").open("wb")
    proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 30
        while not _answers(port):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"redis-server did not start: {(directory / 'redis.log')}")
            time.sleep(0.05)
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        proc.kill()
        proc.wait(timeout=30)
        log.close()
