"""Engine set-up for the attempt store: URL resolution, SQLite pragmas, PostgreSQL locking.

SQLite is the default and is shared by several processes (a heal run, a
`patchheal control` from another terminal, `patchheal locks`), so every
connection runs in WAL mode with a long busy timeout, and write transactions
start with `BEGIN IMMEDIATE`: a deferred transaction that reads first and
writes later can fail at once with "database is locked" instead of waiting.

The store's write transactions read, decide, then write (a job's lock, a
fresh store's CREATE TABLE, `ensure_job`), which is safe only because SQLite
runs them one at a time. PostgreSQL's READ COMMITTED would let two of them
decide on the same snapshot and collide on a key, so there each write
transaction first takes one transaction-scoped advisory lock: the same
one-writer-at-a-time rule, across machines. Write transactions are a few
milliseconds; a heal attempt is seconds to minutes, so they never queue long.
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path
from typing import Any, Self

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, NoSuchModuleError, OperationalError
from sqlmodel import Session

from patchheal.errors import BadInput
from patchheal.retry import retrying

BUSY_TIMEOUT_SECONDS = 60.0
# The PostgreSQL advisory lock key of the store's write transactions ("patchhea" in ASCII);
# advisory locks are per database, so stores in other databases do not share it.
PG_WRITE_LOCK_KEY = 0x7061746368686561


def resolve_db_url(value: str | Path, *, create: bool = True) -> str:
    """A filesystem path becomes `sqlite:///<absolute path>` (parent folders created);
    an SQLAlchemy URL passes through after a syntax check.

    With `create=False` (read-only commands) a SQLite file that does not exist
    is an error and nothing is created: an empty directory must not answer
    "consistent" about a store that was never there.
    """
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
    if not create and not path.is_file():
        raise BadInput(f"no attempt store at {path} (nothing was healed with this --db)")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise BadInput(f"cannot create the folder of the store {str(value)!r}: {exc}") from None
    return f"sqlite:///{path}"


def display_url(url: str) -> str:
    """The URL as messages may show it: a PostgreSQL URL's password becomes ***."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except ArgumentError:
        return url


def sqlite_path(url: str) -> Path | None:
    """The database file of an SQLite URL, None for other back ends or in-memory SQLite."""
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite" or parsed.database in (None, "", ":memory:"):
        return None
    return Path(parsed.database)


def _busy(exc: BaseException) -> bool:
    return isinstance(exc, sqlite3.OperationalError) and exc.sqlite_errorcode in (
        sqlite3.SQLITE_BUSY,
        sqlite3.SQLITE_LOCKED,
    )


def _into_wal(cursor: Any) -> None:
    """WAL mode, once per store file. Switching needs the file to itself and SQLite does not
    wait on its busy timeout for that, so processes opening a fresh store at the same
    moment retry (a store already in WAL mode needs nothing)."""
    if str(cursor.execute("PRAGMA journal_mode").fetchone()[0]).lower() == "wal":
        return
    for attempt in retrying(_busy, attempts=40, base=0.05, cap=1.0):
        with attempt:
            cursor.execute("PRAGMA journal_mode = WAL")


def make_engine(url: str) -> tuple[Engine, Engine]:
    """The engine for reads and one whose transactions take the write lock up front."""
    parsed = make_url(url)
    backend = parsed.get_backend_name()
    connect_args: dict[str, Any] = {}
    options: dict[str, Any] = {}
    if backend == "sqlite":
        connect_args["timeout"] = BUSY_TIMEOUT_SECONDS
    elif backend == "postgresql":
        # A server that is down or unreachable is an error, not a hang; a
        # connection the server dropped while a long heal ran is replaced.
        if "connect_timeout" not in parsed.query:
            connect_args["connect_timeout"] = 30
        options["pool_pre_ping"] = True
    try:
        engine = create_engine(url, connect_args=connect_args, **options)
    except (ArgumentError, NoSuchModuleError) as exc:
        raise BadInput(f"cannot open the store {display_url(url)!r}: {exc}") from None
    except ImportError as exc:  # a back end whose driver is not installed
        hint = " (pip install 'patchheal[postgres]')" if backend == "postgresql" else ""
        raise BadInput(
            f"cannot open the store {display_url(url)!r}: driver missing ({exc}){hint}"
        ) from None
    if backend == "postgresql":
        return engine, _pg_serialized_writes(engine)
    if backend != "sqlite":
        return engine, engine

    @event.listens_for(engine, "connect")
    def _pragmas(dbapi_connection: Any, _record: Any) -> None:
        # Hand transaction control to the "begin" hook below (pysqlite's own
        # implicit BEGIN is always DEFERRED).
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_SECONDS * 1000)}")
        _into_wal(cursor)
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


def _pg_serialized_writes(engine: Engine) -> Engine:
    """The write engine: each transaction first waits for the store's advisory lock."""

    @event.listens_for(engine, "begin")
    def _begin(conn: Any) -> None:
        if conn.get_execution_options().get("pg_write_lock"):
            # Held until commit or rollback; a writer stuck longer than
            # SQLite's busy timeout fails instead of blocking the fleet.
            conn.exec_driver_sql(f"SET LOCAL lock_timeout = '{int(BUSY_TIMEOUT_SECONDS)}s'")
            conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock({PG_WRITE_LOCK_KEY})")

    return engine.execution_options(pg_write_lock=True)


def add_missing_columns(conn: Any, added: dict[str, tuple[str, ...]]) -> None:
    """Add the text columns a table gained since an existing store was created (with their
    model's type and an empty default), so an old store opens with the new code and keeps
    its rows."""
    from sqlalchemy import inspect as sa_inspect
    from sqlmodel import SQLModel

    inspector = sa_inspect(conn)
    quoted = conn.dialect.identifier_preparer.quote
    for table_name, columns in added.items():
        have = {c["name"] for c in inspector.get_columns(table_name)}
        table = SQLModel.metadata.tables[table_name]
        for name in columns:
            if name not in have:
                kind = table.columns[name].type.compile(dialect=conn.dialect)
                conn.exec_driver_sql(
                    f"ALTER TABLE {quoted(table_name)} ADD COLUMN {quoted(name)} {kind} "
                    "NOT NULL DEFAULT ''"
                )


def _require_sqlite_file(url: str) -> None:
    """A `sqlite:///path` URL given to a read-only command must name an existing file."""
    path = sqlite_path(url)
    if path is not None and not path.is_file():
        raise BadInput(f"no attempt store at {path} (nothing was healed with this --db)")


class StoreBase:
    """Engines, sessions and the clock shared by the store's parts."""

    def __init__(self, url: str | Path, *, create: bool = True) -> None:
        from sqlmodel import SQLModel

        from patchheal.memory.tables import ADDED_COLUMNS, ALL_TABLES

        self.url = resolve_db_url(url, create=create)
        if not create:
            _require_sqlite_file(self.url)
        self.display_url = display_url(self.url)  # for messages: no password
        self.is_sqlite = make_url(self.url).get_backend_name() == "sqlite"
        self._engine, self._write_engine = make_engine(self.url)
        try:
            # Inside one write transaction, so that two processes creating a
            # fresh store at the same moment do not both try CREATE TABLE.
            with self._write_engine.begin() as conn:
                SQLModel.metadata.create_all(conn, tables=ALL_TABLES)
                add_missing_columns(conn, ADDED_COLUMNS)
        except OperationalError as exc:
            self._engine.dispose()
            raise BadInput(f"cannot open the store {self.display_url!r}: {exc.orig}") from None

    def close(self) -> None:
        self._engine.dispose()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def _read(self) -> Session:
        return Session(self._engine, expire_on_commit=False)

    def _write(self) -> Session:
        """A session whose transaction holds the store's write lock from its first statement."""
        return Session(self._write_engine, expire_on_commit=False)

    @staticmethod
    def _now() -> float:
        return time.time()
