"""Versioned CQL migrations: ``migrations/NNNN_name.cql`` files shipped in the package, applied in order.

:func:`migrate` (what ``om-stream migrate`` runs) creates the keyspace with the configured replication when it is
missing, then applies every migration not yet recorded in ``schema_migrations`` and records it (version, name,
checksum, time). It is idempotent: run it again and nothing changes. Statements are written so that running one
twice is harmless (``IF NOT EXISTS``), so a migration interrupted half-way simply runs again. A recorded migration
whose file changed since is refused (the checksum differs): migrations are append-only.

:func:`check_migrated` is what the store runs when it starts: it refuses a keyspace that lacks a migration this
version of om-stream needs, with a message naming the command that fixes it.
"""

from __future__ import annotations

import hashlib
import logging
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib import resources
from typing import Any

from om_stream.adapters.cassandra_store.session import build_cluster, translate, unreachable
from om_stream.errors import StorageError
from om_stream.settings import CassandraSettings

__all__ = ["Migration", "MigrationReport", "check_migrated", "load_migrations", "migrate"]

log = logging.getLogger(__name__)

_FILE = re.compile(r"^(\d{4})_([a-z0-9_]+)\.cql$")
_DDL_TIMEOUT_S = 60.0  # a schema change waits for every node to agree on the schema
# how long migrate waits for the nodes to agree on the schema before a change and before it uses the new keyspace: a
# node back from a crash may take a minute to pull the changes it missed (Cassandra 5.0 delays a pull up to 60 s),
# and the driver's own wait after a statement is 10 s
_AGREEMENT_WAIT_S = 90
_LEDGER = ("CREATE TABLE IF NOT EXISTS schema_migrations (version int PRIMARY KEY, name text, checksum text, "
           "applied_at timestamp)")


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    statements: tuple[str, ...]
    checksum: str


@dataclass
class MigrationReport:
    keyspace: str
    created_keyspace: bool = False
    applied: list[int] = field(default_factory=list)  # versions applied by this run
    already: list[int] = field(default_factory=list)  # versions found recorded


def _statements(text: str) -> tuple[str, ...]:
    lines = [line for line in text.splitlines() if not line.strip().startswith("--")]
    statements: list[str] = []
    current: list[str] = []
    for line in lines:
        current.append(line)
        if line.rstrip().endswith(";"):
            statement = "\n".join(current).strip().rstrip(";").strip()
            if statement:
                statements.append(statement)
            current = []
    rest = "\n".join(current).strip()
    if rest:
        statements.append(rest)
    return tuple(statements)


def load_migrations() -> list[Migration]:
    """The migrations shipped with this version, by version."""
    folder = resources.files("om_stream.adapters.cassandra_store").joinpath("migrations")
    found: list[Migration] = []
    for entry in folder.iterdir():
        match = _FILE.match(entry.name)
        if not match:
            continue
        text = entry.read_text(encoding="utf-8")
        found.append(Migration(int(match.group(1)), match.group(2), _statements(text),
                               hashlib.sha256(text.encode()).hexdigest()[:16]))
    found.sort(key=lambda m: m.version)
    versions = [m.version for m in found]
    if versions != list(range(1, len(found) + 1)):
        raise StorageError(f"Cassandra migrations must be numbered 1..n without gaps, found {versions}")
    return found


def _replication(settings: CassandraSettings) -> str:
    if settings.replication_strategy == "SimpleStrategy":
        return f"{{'class': 'SimpleStrategy', 'replication_factor': {settings.replication_factor}}}"
    pairs = [item.split(":") for item in settings.datacenter_replication.split(",") if item.strip()]
    if not pairs or any(len(p) != 2 or not p[1].strip().isdigit() for p in pairs):
        raise StorageError("cassandra.datacenter_replication must list data centers as 'dc1:3,dc2:3' for "
                           "NetworkTopologyStrategy")
    dcs = ", ".join(f"'{dc.strip()}': {n.strip()}" for dc, n in pairs)
    return f"{{'class': 'NetworkTopologyStrategy', {dcs}}}"


def _recorded(session: Any) -> dict[int, str]:
    return {row.version: row.checksum for row in session.execute("SELECT version, checksum FROM schema_migrations")}


def _await_agreement(cluster: Any, keyspace: str, when: str) -> None:
    """Wait until every node the driver sees up reports the same schema version, or refuse: a schema change made
    while nodes disagree is one some of them may not apply, and a keyspace one of them lacks fails ``USE``."""
    if not cluster.control_connection.wait_for_schema_agreement(wait_time=_AGREEMENT_WAIT_S):
        raise StorageError(f"the Cassandra nodes did not agree on the schema {when} keyspace {keyspace} within "
                           f"{_AGREEMENT_WAIT_S} s: `nodetool describecluster` names the nodes that differ; run "
                           "`om-stream migrate` again once they agree")


def migrate(settings: CassandraSettings) -> MigrationReport:
    """Create the keyspace if needed and apply the pending migrations (blocking; run it from a command)."""
    from cassandra import DriverException
    from cassandra.cluster import NoHostAvailable

    migrations = load_migrations()
    keyspace = settings.keyspace
    report = MigrationReport(keyspace)
    cluster = build_cluster(settings)
    try:
        session = cluster.connect()

        def run(cql: str, params: tuple[Any, ...] | None = None) -> Any:
            return session.execute(cql, params, timeout=_DDL_TIMEOUT_S)

        _await_agreement(cluster, keyspace, "before migrating")
        exists = run("SELECT keyspace_name FROM system_schema.keyspaces WHERE keyspace_name = %s",
                                 (keyspace,)).one()
        if exists is None:
            run(f"CREATE KEYSPACE IF NOT EXISTS {keyspace} WITH replication = {_replication(settings)}")
            report.created_keyspace = True
            log.info("created keyspace %s", keyspace)
            _await_agreement(cluster, keyspace, "after creating")  # `USE` runs on every node's connections
        session.set_keyspace(keyspace)
        run(_LEDGER)
        recorded = _recorded(session)
        for migration in migrations:
            if migration.version in recorded:
                if recorded[migration.version] != migration.checksum:
                    raise StorageError(f"migration {migration.version:04d}_{migration.name} was changed after it "
                                       f"was applied to {keyspace} (checksum {recorded[migration.version]} → "
                                       f"{migration.checksum}); add a new migration instead")
                report.already.append(migration.version)
                continue
            for statement in migration.statements:
                run(statement)
            run("INSERT INTO schema_migrations (version, name, checksum, applied_at) VALUES "
                            "(%s, %s, %s, %s)",
                            (migration.version, migration.name, migration.checksum, datetime.now(UTC)))
            report.applied.append(migration.version)
            log.info("applied migration %04d_%s to %s", migration.version, migration.name, keyspace)
        _await_agreement(cluster, keyspace, "after migrating")
    except NoHostAvailable as exc:  # refused credentials or TLS, or no node up: say which and what fixes it
        raise unreachable(settings, exc) from exc
    except DriverException as exc:
        raise translate(exc, f"migrating keyspace {keyspace}") from exc
    finally:
        cluster.shutdown()
    return report


def check_migrated(recorded: dict[int, str], keyspace: str) -> None:
    """Refuse a keyspace missing a migration this version needs (``recorded``: version → checksum)."""
    missing = [m for m in load_migrations() if m.version not in recorded]
    if missing:
        names = ", ".join(f"{m.version:04d}_{m.name}" for m in missing)
        raise StorageError(f"Cassandra keyspace {keyspace!r} is not migrated (missing {names}): run "
                           "`om-stream migrate` before starting om-stream")
    unknown = sorted(v for v in recorded if v > len(load_migrations()))
    if unknown:
        log.warning("keyspace %s has migrations %s this version of om-stream does not know (a newer version "
                    "migrated it)", keyspace, unknown)
