"""The SQLite store's connection: opening and migrating a database, and running each store operation on it.

One connection per store, used by one thread at a time (a lock). An operation runs on the caller's thread when it
cannot wait: nothing is queued before it, the connection is free, and (for a write) SQLite grants the write lock at
once, which is what a busy timeout of 0 asks. Otherwise it runs on the connection's own thread with the full busy
timeout, so the event loop never waits on another process's lock. A handoff to that thread costs far more than
most store operations (a wake-up of each thread and two GIL switches against a few microseconds of SQLite), hence
the fast path. Each write is one ``BEGIN IMMEDIATE`` transaction; each read runs outside any.

File databases use WAL with ``synchronous = NORMAL``: a commit is in the WAL (the OS's page cache) when it returns,
so it survives the process crashing; only the operating system crashing or the power failing may lose the last
commits, never corrupt the file. Checkpoints (the only fsyncs) run on the connection's own thread, every
:data:`_CHECKPOINT_COMMITS` commits, never on the caller's.

Never holds OM rules or SQL of the store's tables (``sqlite_store``); ``sqlite3`` exceptions leave this module as
:class:`~om_stream.errors.StorageError`.
"""

from __future__ import annotations

import asyncio
import fcntl
import logging
import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

from om_stream.errors import StorageError

__all__ = ["SqliteConnection"]

log = logging.getLogger(__name__)
T = TypeVar("T")
_CHECKPOINT_COMMITS = 256  # commits between two WAL checkpoints (SQLite's own default is every ~1,000 pages)
_BUSY = (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)


@contextmanager
def _setup_lock(database: Path) -> Iterator[None]:
    """An exclusive lock between the processes (and stores) opening ``database``, on a file beside it: not on the
    database file itself, since closing any descriptor of that file drops this process's SQLite locks on it."""
    with open(database.with_name(database.name + "-setup.lock"), "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _busy(exc: sqlite3.Error) -> bool:
    return isinstance(exc, sqlite3.OperationalError) and (getattr(exc, "sqlite_errorcode", 0) & 0xFF) in _BUSY


class SqliteConnection:
    """``run(fn)`` / ``run(fn, write=True)``: ``fn(connection)`` as one read or one transaction. ``migrations``:
    one script per schema version (``PRAGMA user_version`` counts those applied)."""

    def __init__(self, path: str, timeout_s: float, migrations: Sequence[str]) -> None:
        self.path = path
        self._timeout_ms = int(timeout_s * 1000)
        self._migrations = tuple(migrations)
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="om-sqlite")
        self._conn: sqlite3.Connection | None = None
        self._closed = False
        self._lock = threading.Lock()  # the connection's one user at a time
        self._queued = 0  # operations handed to the connection's thread and not finished: later ones queue too
        self._waits = True  # the connection's busy timeout is the full one (else 0)
        self._commits = 0  # since the last checkpoint

    # -- running operations --------------------------------------------------------------------------------------

    async def run(self, fn: Callable[[sqlite3.Connection], T], *, write: bool = False) -> T:
        if self._closed:
            raise StorageError("the SQLite content store is closed")
        try:
            if not self._queued and self._conn is not None and self._lock.acquire(blocking=False):
                try:
                    done, value = self._now(self._conn, fn, write)
                finally:
                    self._lock.release()
                if done:
                    return value
            self._queued += 1
            try:
                return await asyncio.get_running_loop().run_in_executor(self._executor, self._waiting, fn, write)
            finally:
                self._queued -= 1
        except sqlite3.Error as exc:
            # an OperationalError may pass (a lock, a full disk, an I/O error); a constraint or a malformed value
            # fails the same way every time: a refusal, not an outage
            raise StorageError(f"SQLite ({self.path}): {type(exc).__name__}: {exc}",
                               transient=isinstance(exc, sqlite3.OperationalError)) from exc

    def _now(self, conn: sqlite3.Connection, fn: Callable[[sqlite3.Connection], T], write: bool) -> tuple[bool, T]:
        """``fn`` on the caller's thread, unless it would wait for a lock: then ``(False, _)`` and nothing done."""
        if self._waits:
            conn.execute("PRAGMA busy_timeout = 0")
            self._waits = False
        try:
            if not write:
                return True, fn(conn)
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            if _busy(exc):
                return False, None  # type: ignore[return-value]
            raise
        try:
            result = fn(conn)
        except sqlite3.Error as exc:
            conn.execute("ROLLBACK")
            if _busy(exc):
                return False, None  # type: ignore[return-value]
            raise
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
        self._committed()
        return True, result

    def _waiting(self, fn: Callable[[sqlite3.Connection], T], write: bool) -> T:
        """``fn`` on the connection's thread, waiting up to the busy timeout for another process's lock."""
        with self._lock:
            conn = self._connection()
            if not self._waits:
                conn.execute(f"PRAGMA busy_timeout = {self._timeout_ms}")
                self._waits = True
            if not write:
                return fn(conn)
            conn.execute("BEGIN IMMEDIATE")
            try:
                result = fn(conn)
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            self._committed()
            if self._commits >= _CHECKPOINT_COMMITS:
                self._checkpoint(conn)
            return result

    def _committed(self) -> None:
        if self.path == ":memory:":
            return
        self._commits += 1
        if self._commits == _CHECKPOINT_COMMITS:  # once: the checkpoint resets the count
            self._executor.submit(self._checkpoint_later)

    def _checkpoint_later(self) -> None:
        with self._lock:
            if self._conn is not None and self._commits >= _CHECKPOINT_COMMITS:
                self._checkpoint(self._conn)

    def _checkpoint(self, conn: sqlite3.Connection) -> None:
        self._commits = 0
        try:
            conn.execute("PRAGMA wal_checkpoint(PASSIVE)")
        except sqlite3.Error as exc:  # the next checkpoint copies what this one did not; nothing is lost
            log.warning("SQLite (%s): WAL checkpoint failed: %s: %s", self.path, type(exc).__name__, exc)

    async def scrub(self) -> None:
        """After an erase: rebuild the database from its live rows (``VACUUM``), then copy the WAL into it and
        truncate the WAL, so that no copy of an erased row stays in a file. ``secure_delete`` overwrites a deleted
        row, but not the copies a page keeps of rows it moved when it was rebalanced, nor the earlier versions of
        a page the WAL holds; measured: a property run found an erased message's bytes in a live page of the
        messages table. A reader of another process may hold the WAL: then the truncation waits for the busy
        timeout, and a WAL that could not be truncated is reported."""
        if self.path == ":memory:":
            return

        def truncate(conn: sqlite3.Connection) -> tuple[int, int, int]:
            conn.execute("VACUUM")
            busy, frames, copied = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
            return int(busy), int(frames), int(copied)

        self._queued += 1  # on the connection's thread, with the full busy timeout: a reader may be finishing
        try:
            busy, frames, copied = await asyncio.get_running_loop().run_in_executor(
                self._executor, self._waiting, truncate, False)
        except sqlite3.Error as exc:
            raise StorageError(f"SQLite ({self.path}): scrubbing the WAL after an erase: {type(exc).__name__}: "
                               f"{exc}") from exc
        finally:
            self._queued -= 1
        self._commits = 0
        if busy:
            log.warning("SQLite (%s): the WAL could not be truncated after an erase (%d of %d frames copied): "
                        "another connection reads it; it is truncated at the next erase or checkpoint",
                        self.path, copied, frames)

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True

        def shut() -> None:
            with self._lock:
                if self._conn is not None:
                    self._conn.close()
                    self._conn = None

        await asyncio.get_running_loop().run_in_executor(self._executor, shut)
        self._executor.shutdown(wait=True)

    # -- opening -------------------------------------------------------------------------------------------------

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            self._conn = self._open()
            self._waits = True
        return self._conn

    def _open(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = None
        try:
            if self.path != ":memory:":
                Path(self.path).parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(self.path, timeout=self._timeout_ms / 1000, isolation_level=None,
                                   check_same_thread=False)  # used under ``_lock``, from either thread
            conn.execute("PRAGMA foreign_keys = OFF")
            conn.execute("PRAGMA secure_delete = ON")  # a deleted row's bytes are overwritten, not left in the page
            if self.path == ":memory:":
                self._migrate(conn)
                return conn
            # Setting up a file (WAL mode, then the migrations) is done by one opener at a time: two processes
            # opening a new file together would otherwise switch its journal mode while the other migrates, and
            # SQLite answers that with "database is locked" at once, without waiting for its busy timeout.
            with _setup_lock(Path(self.path)):
                conn.execute("PRAGMA journal_mode = WAL")
                conn.execute("PRAGMA synchronous = NORMAL")
                conn.execute("PRAGMA wal_autocheckpoint = 0")  # checkpoints run on this thread (``_checkpoint``)
                self._migrate(conn)
            return conn
        except (sqlite3.Error, OSError) as exc:
            if conn is not None:
                conn.close()
            raise StorageError(f"SQLite database {self.path!r} cannot be opened ({type(exc).__name__}: {exc}): "
                               "check that the path names a file this process can create and write") from exc
        except BaseException:
            if conn is not None:
                conn.close()
            raise

    def _migrate(self, conn: sqlite3.Connection) -> None:
        migrations = self._migrations

        def version() -> int:
            found = int(conn.execute("PRAGMA user_version").fetchone()[0])
            if found > len(migrations):
                raise StorageError(f"the database has schema version {found}, newer than this om-stream knows "
                                   f"({len(migrations)}): upgrade om-stream")
            return found

        while version() < len(migrations):
            conn.execute("BEGIN IMMEDIATE")
            try:
                number = version()  # again, under the write lock: another process may have just migrated
                if number < len(migrations):
                    for statement in migrations[number].split(";"):
                        if statement.strip():
                            conn.execute(statement)
                    conn.execute(f"PRAGMA user_version = {number + 1}")
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
