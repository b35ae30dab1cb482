"""Engine set-up for the attempt store: URL resolution and SQLite pragmas.

SQLite is the default and is shared by several processes (a heal run, a
`patchheal control` from another terminal, `patchheal locks`), so every
connection runs in WAL mode with a long busy timeout, and write transactions
start with `BEGIN IMMEDIATE`: a deferred transaction that reads first and
writes later can fail at once with "database is locked" instead of waiting.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Self

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, NoSuchModuleError, OperationalError
from sqlmodel import Session

from patchheal.errors import BadInput

DEFAULT_DB = Path("var/memory/attempts.sqlite3")
BUSY_TIMEOUT_SECONDS = 60.0


def resolve_db_url(value: str | Path) -> str:
    """A filesystem path becomes `sqlite:///<absolute path>` (parent folders created);
    an SQLAlchemy URL passes through after a syntax check."""
    text = str(value).strip()
    if not text:
        raise BadInput("the store location is empty: give a path or an SQLAlchemy URL")
    if isinstance(value, str) and "://" in text:
        try:
            make_url(text)
        except ArgumentError as exc:
            raise BadInput(f"not a valid store URL: {text!r} ({exc})") from None
        return text
    path = Path(text).expanduser().resolve()
    if path.is_dir():
        raise BadInput(f"the store path {str(value)!r} is a directory, not a database file")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise BadInput(f"cannot create the folder of the store {str(value)!r}: {exc}") from None
    return f"sqlite:///{path}"


def sqlite_path(url: str) -> Path | None:
    """The database file of an SQLite URL, None for other back ends or in-memory SQLite."""
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite" or parsed.database in (None, "", ":memory:"):
        return None
    return Path(parsed.database)


def make_engine(url: str) -> tuple[Engine, Engine]:
    """The engine for reads and one whose transactions take the write lock up front."""
    is_sqlite = make_url(url).get_backend_name() == "sqlite"
    connect_args: dict[str, Any] = {"timeout": BUSY_TIMEOUT_SECONDS} if is_sqlite else {}
    try:
        engine = create_engine(url, connect_args=connect_args)
    except (ArgumentError, NoSuchModuleError) as exc:
        raise BadInput(f"cannot open the store {url!r}: {exc}") from None
    except ImportError as exc:  # a back end whose driver is not installed
        raise BadInput(f"cannot open the store {url!r}: driver missing ({exc})") from None
    if not is_sqlite:
        return engine, engine

    @event.listens_for(engine, "connect")
    def _pragmas(dbapi_connection: Any, _record: Any) -> None:
        # Hand transaction control to the "begin" hook below (pysqlite's own
        # implicit BEGIN is always DEFERRED).
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_SECONDS * 1000)}")
        cursor.execute("PRAGMA journal_mode = WAL")
        # NORMAL under WAL survives a process crash (SIGKILL), which is what
        # the loop must survive; only power loss can drop the last commits.
        cursor.execute("PRAGMA synchronous = NORMAL")
        cursor.execute("PRAGMA foreign_keys = ON")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _begin(conn: Any) -> None:
        mode = conn.get_execution_options().get("sqlite_begin", "DEFERRED")
        conn.exec_driver_sql(f"BEGIN {mode}")

    return engine, engine.execution_options(sqlite_begin="IMMEDIATE")


class StoreBase:
    """Engines, sessions and the clock shared by the store's parts."""

    def __init__(self, url: str | Path) -> None:
        from sqlmodel import SQLModel

        from patchheal.memory.tables import ALL_TABLES

        self.url = resolve_db_url(url)
        self.is_sqlite = make_url(self.url).get_backend_name() == "sqlite"
        self._engine, self._write_engine = make_engine(self.url)
        try:
            # Inside one write transaction, so that two processes creating a
            # fresh store at the same moment do not both try CREATE TABLE.
            with self._write_engine.begin() as conn:
                SQLModel.metadata.create_all(conn, tables=ALL_TABLES)
        except OperationalError as exc:
            self._engine.dispose()
            raise BadInput(f"cannot open the store {self.url!r}: {exc.orig}") from None

    def close(self) -> None:
        self._engine.dispose()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def _read(self) -> Session:
        return Session(self._engine, expire_on_commit=False)

    def _write(self) -> Session:
        """A session whose transaction holds SQLite's write lock from its first statement."""
        return Session(self._write_engine, expire_on_commit=False)

    @staticmethod
    def _now() -> float:
        return time.time()
