"""A throwaway PostgreSQL server for tests: initdb into a temp dir, loopback only.

The server runs as a non-root user (PostgreSQL refuses root): the invoking
user when that is not root, else the `postgres` account Debian's package
creates, else a `patchheal-pg` system user made with useradd. It listens on a
unix socket in its own temp dir and on 127.0.0.1 at a free port, trusts
local connections (nobody else can reach it), runs with fsync off (the data
is thrown away), and is stopped and deleted at the end of the session.

Missing server binaries or a missing driver skip the PostgreSQL tests, unless
CI is set: then they fail, as the Docker tests do.
"""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

SUPERUSER = "patchheal"
DATABASE = "patchheal"
_FALLBACK_USER = "patchheal-pg"
_START_TIMEOUT = 60.0


def find_bindir() -> Path | None:
    """The newest server's bin dir (Debian: /usr/lib/postgresql/N/bin), else initdb on PATH."""

    def version(path: Path) -> int:
        part = path.parts[-3]
        return int(part) if part.isdigit() else 0

    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"), key=version)
    if found:
        return found[-1].parent
    on_path = shutil.which("initdb")
    return Path(on_path).parent if on_path else None


def unavailable(reason: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"{reason}, and CI is set: the PostgreSQL store tests must run")
    pytest.skip(reason)


def _server_user() -> pwd.struct_passwd:
    if os.geteuid() != 0:
        return pwd.getpwuid(os.geteuid())
    for name in ("postgres", _FALLBACK_USER):
        try:
            return pwd.getpwnam(name)
        except KeyError:
            continue
    subprocess.run(
        ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", _FALLBACK_USER],
        check=True,
        capture_output=True,
    )
    return pwd.getpwnam(_FALLBACK_USER)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class PgServer:
    """One running server; `url(db)` gives a SQLAlchemy URL over loopback TCP."""

    def __init__(self, bindir: Path, base: Path, user: pwd.struct_passwd) -> None:
        self.bindir, self.base, self.user = bindir, base, user
        self.data = base / "data"
        self.log = base / "server.log"
        self.port = 0
        self._proc: subprocess.Popen[bytes] | None = None

    def _as_server_user(self) -> dict[str, Any]:
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C", "LANG": "C"}
        kwargs: dict[str, Any] = {"cwd": self.base, "env": env}
        if os.geteuid() == 0:
            kwargs.update(user=self.user.pw_uid, group=self.user.pw_gid, extra_groups=[])
        return kwargs

    def url(self, database: str = DATABASE) -> str:
        return f"postgresql+psycopg://{SUPERUSER}@127.0.0.1:{self.port}/{database}"

    def start(self) -> None:
        # The temp dir is 0700 and owned by the server user; /tmp itself is world-traversable.
        os.chown(self.base, self.user.pw_uid, self.user.pw_gid)
        initdb = subprocess.run(
            [
                str(self.bindir / "initdb"),
                "-D",
                str(self.data),
                "-U",
                SUPERUSER,
                "--auth=trust",
                "--no-locale",
                "--encoding=UTF8",
                "--no-sync",
            ],
            capture_output=True,
            text=True,
            check=False,
            **self._as_server_user(),
        )
        if initdb.returncode != 0:
            raise RuntimeError(f"initdb failed ({initdb.returncode}):\n{initdb.stderr}")
        for _ in range(3):  # a free port can be taken by someone else before we bind it
            self.port = _free_port()
            if self._launch():
                return
        raise RuntimeError(f"PostgreSQL did not start; log:\n{self.log.read_text()[-4000:]}")

    def _launch(self) -> bool:
        settings = {
            "listen_addresses": "127.0.0.1",
            "port": str(self.port),
            "unix_socket_directories": str(self.base),
            "fsync": "off",
            "synchronous_commit": "off",
            "full_page_writes": "off",
            "max_connections": "100",
        }
        args = [str(self.bindir / "postgres"), "-D", str(self.data)]
        for key, value in settings.items():
            args += ["-c", f"{key}={value}"]
        with self.log.open("ab") as log:
            self._proc = subprocess.Popen(
                args, stdout=log, stderr=subprocess.STDOUT, **self._as_server_user()
            )
        deadline = time.monotonic() + _START_TIMEOUT
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                return False
            if self._accepts():
                return True
            time.sleep(0.05)
        self.stop()
        return False

    def _accepts(self) -> bool:
        import psycopg

        try:
            with psycopg.connect(
                host="127.0.0.1",
                port=self.port,
                user=SUPERUSER,
                dbname="postgres",
                connect_timeout=2,
            ):
                return True
        except psycopg.OperationalError:
            return False

    def create_database(self, name: str) -> str:
        import psycopg

        with psycopg.connect(
            host="127.0.0.1", port=self.port, user=SUPERUSER, dbname="postgres", autocommit=True
        ) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def fresh_database(self) -> str:
        """A new empty database on this server, for one test."""
        return self.create_database("t_" + uuid.uuid4().hex[:16])

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGINT)  # "fast shutdown": ends sessions, then exits
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=30)


def start_server() -> Iterator[PgServer]:
    bindir = find_bindir()
    if bindir is None or not (bindir / "postgres").exists():
        unavailable("the PostgreSQL server binaries (initdb, postgres) are not installed")
    try:
        import psycopg  # noqa: F401
    except ImportError:
        unavailable("the psycopg driver is not installed (pip install 'psycopg[binary]')")
    assert bindir is not None
    # Not pytest's tmp_path: its parents are 0700 root, which the server user cannot enter.
    base = Path(tempfile.mkdtemp(prefix="patchheal-pg-"))
    server = PgServer(bindir, base, _server_user())
    try:
        server.start()
        server.create_database(DATABASE)
        yield server
    finally:
        server.stop()
        shutil.rmtree(base, ignore_errors=True)


# Named apart from their fixture names, so that a test module importing them
# (`from tests.pg_support import pg_server_fixture`) can take `pg_server` as an argument.
@pytest.fixture(scope="session", name="pg_server")
def pg_server_fixture() -> Iterator[PgServer]:
    """A PostgreSQL server for the whole session (skips or fails as the module says)."""
    yield from start_server()


@pytest.fixture(scope="session", name="pg_url")
def pg_url_fixture(pg_server: PgServer) -> str:
    """The SQLAlchemy URL of the session's database `patchheal`."""
    return pg_server.url(DATABASE)
