"""The Cassandra content store: versioned CQL migrations, an asyncio session with retries, the store, and the
model-call results it keeps (``ports.CycleResults``).

    from om_stream.adapters.cassandra_store import CassandraContentStore, migrate

    migrate(settings.cassandra)                    # `om-stream migrate`: idempotent
    store = CassandraContentStore(settings.cassandra)
    await store.start()                            # refuses unreachable hosts, an unmigrated keyspace (StorageError)
"""

from om_stream.adapters.cassandra_store.schema_migrations import (
    Migration,
    MigrationReport,
    check_migrated,
    load_migrations,
    migrate,
)
from om_stream.adapters.cassandra_store.store import CassandraContentStore

__all__ = ["CassandraContentStore", "Migration", "MigrationReport", "check_migrated", "load_migrations", "migrate"]
