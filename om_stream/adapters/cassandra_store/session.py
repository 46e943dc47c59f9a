"""The Cassandra connection: built once from settings, queried from asyncio without blocking the event loop.

``cassandra-driver`` runs its own I/O loop (libev) in a thread. :meth:`CassandraSession.execute` starts a query
with ``execute_async`` and completes an asyncio future from the driver's callbacks (``call_soon_threadsafe``), so
a query costs the event loop nothing while it runs. Every query:

1. waits for a slot (at most ``max_concurrent_requests`` in flight per store: the driver queues without bound),
2. runs with the statement's consistency level (reads, writes and the serial level of lightweight transactions
   come from settings, set once on the prepared statement) and the request timeout,
3. is retried, with exponential backoff and jitter, on timeouts and unavailable / overloaded / restarting nodes,
   until ``retry_deadline_s`` has passed. Every om-stream write is idempotent (fixed ids and values, set additions,
   timestamps derived from the data), so a retry can only repeat what may already have been applied. A retried
   lightweight transaction reports "not applied" with the winner's row; the caller compares it with its own.
   Each retried failure is told to the session's ``ports.StoreOutages`` (if given) with its reason in words
   (:func:`outage_reason`: "LOCAL_QUORUM cannot be reached, it needs 2 replicas and 1 is alive"), and so is
   each success.

Prepared statements are bound by :class:`~om_stream.adapters.cassandra_store.statements.Prepared`, and requests
carry client timestamps from :class:`~om_stream.adapters.cassandra_store.statements.ClientTimestamps` (why both:
that module).

Driver exceptions are translated into :class:`~om_stream.errors.StorageError` here and never leave the package.
"""

from __future__ import annotations

import asyncio
import logging
import random
import ssl
from collections.abc import Awaitable, Sequence
from typing import Any

from opentelemetry.trace import NoOpTracer, SpanKind, Status, StatusCode, Tracer, get_current_span, use_span

from om_stream.adapters.cassandra_store.statements import ClientTimestamps, Prepared, statement_kind
from om_stream.errors import StorageError
from om_stream.ports import StoreOutages
from om_stream.settings import CassandraSettings

__all__ = ["STORE_NAME", "CassandraSession", "build_cluster", "outage_reason", "retryable", "run_all", "translate",
           "unreachable"]

log = logging.getLogger(__name__)
STORE_NAME = "cassandra"  # how outages name this store (the ``store`` label of ``om_store_unavailable``)



async def run_all(calls: Sequence[Awaitable[Any]]) -> list[Any]:
    """Run store calls concurrently; the first failure is raised after every call has finished (none is left
    running behind the caller's back)."""
    results = await asyncio.gather(*calls, return_exceptions=True)
    for result in results:
        if isinstance(result, BaseException):
            raise result
    return list(results)


def _retryable() -> tuple[type[BaseException], ...]:
    from cassandra import OperationTimedOut, ReadTimeout, Unavailable, WriteTimeout
    from cassandra.cluster import NoHostAvailable
    from cassandra.connection import ConnectionBusy, ConnectionException, ConnectionShutdown
    from cassandra.protocol import IsBootstrappingErrorMessage, OverloadedErrorMessage, ServerError

    return (OperationTimedOut, ReadTimeout, WriteTimeout, Unavailable, NoHostAvailable, ConnectionException,
            ConnectionShutdown, ConnectionBusy, OverloadedErrorMessage, IsBootstrappingErrorMessage, ServerError)


# why a replica failed a request (Cassandra's RequestFailureReason codes, in a ReadFailure / WriteFailure): a
# timeout, a schema that has not reached it yet (just after `om-stream migrate`, or a node that was down meanwhile),
# a node going down; the others (too many tombstones, a read too large, unknown) say the request itself is at fault
_PASSING_FAILURES = {2: "TIMEOUT", 3: "INCOMPATIBLE_SCHEMA", 5: "NODE_DOWN"}


def _passing_failure(exc: BaseException) -> bool:
    """A ReadFailure / WriteFailure whose every failed replica gave a reason that passes."""
    from cassandra import ReadFailure, WriteFailure

    codes: dict[Any, int] = (getattr(exc, "error_code_map", None) or {}) if isinstance(
        exc, ReadFailure | WriteFailure) else {}
    return bool(codes) and all(code in _PASSING_FAILURES for code in codes.values())


def retryable(exc: BaseException) -> bool:
    """Whether trying again can succeed: a node down or overloaded, a timeout, replicas failing for a reason that
    passes (their schema behind); not when Cassandra refused the statement itself."""
    return isinstance(exc, _retryable()) or _passing_failure(exc)


def translate(exc: BaseException, what: str) -> StorageError:
    """A driver exception as the one StorageError the rest of om-stream sees, transient when :func:`retryable`."""
    return StorageError(f"Cassandra: {what}: {type(exc).__name__}: {exc}", transient=retryable(exc))


def outage_reason(exc: BaseException, what: str) -> str:
    """Why a retryable failure happened, in words an operator acts on: the consistency level and how many replicas
    it needed and had, a timeout, no node reachable. Never any data."""
    from cassandra import ConsistencyLevel, OperationTimedOut, ReadTimeout, Unavailable, WriteTimeout
    from cassandra.cluster import NoHostAvailable
    from cassandra.connection import ConnectionException

    def level(value: object) -> str:
        return ConsistencyLevel.value_to_name.get(value, str(value))  # type: ignore[no-any-return]

    if isinstance(exc, Unavailable):
        alive, needed = exc.alive_replicas, exc.required_replicas
        return (f"{what}: {level(exc.consistency)} cannot be reached, it needs {needed} replicas and "
                f"{alive} {'is' if alive == 1 else 'are'} alive")
    if isinstance(exc, WriteTimeout | ReadTimeout):
        kind = "write" if isinstance(exc, WriteTimeout) else "read"
        return (f"{what}: {level(exc.consistency)} {kind} timed out, {exc.received_responses} of "
                f"{exc.required_responses} replicas answered")
    if isinstance(exc, NoHostAvailable):
        # the driver tried every node it counts up, and each answered or failed: the first answer says why
        answered = [e for e in (exc.errors or {}).values() if isinstance(e, Unavailable | WriteTimeout | ReadTimeout)]
        if answered:
            return outage_reason(answered[0], what)
        return f"{what}: no node reachable ({', '.join(str(h) for h in (exc.errors or {})) or 'none known'})"
    if isinstance(exc, OperationTimedOut):
        return f"{what}: no answer from {exc.last_host or 'the coordinator'} in time"
    if isinstance(exc, ConnectionException):
        return f"{what}: connection to {exc.endpoint or 'a node'} lost"
    if _passing_failure(exc):
        failures = ", ".join(f"{_PASSING_FAILURES[code]} from {host}"
                             for host, code in getattr(exc, "error_code_map", {}).items())
        return f"{what}: replicas failed it ({failures})"
    return f"{what}: {type(exc).__name__}"


def unreachable(settings: CassandraSettings, exc: Any) -> StorageError:
    """Why no contact point took the connection, with the settings that fix it. ``exc.errors``: host → error."""
    from cassandra import AuthenticationFailed

    errors = dict(exc.errors or {})
    details = "; ".join(f"{host}: {type(e).__name__}: {e}" for host, e in errors.items()) or str(exc)
    if any(isinstance(e, AuthenticationFailed) for e in errors.values()):
        return StorageError(f"Cassandra at {settings.hosts} refused the credentials ({details}): check "
                            "cassandra.username and cassandra.password (OM_CASSANDRA_USERNAME, "
                            "OM_CASSANDRA_PASSWORD)")
    if any(_tls_failure(e) for e in errors.values()):
        return StorageError(f"Cassandra at {settings.hosts}: the TLS handshake failed ({details}): check that "
                            "cassandra.tls_ca_file (OM_CASSANDRA_TLS_CA_FILE) signs the nodes' certificates, that "
                            "they name the addresses dialled (cassandra.tls_check_hostname), and the client "
                            "certificate when the nodes require one (OM_CASSANDRA_TLS_CERT_FILE / _KEY_FILE)")
    return StorageError(f"Cassandra at {settings.hosts} unreachable ({details}): check cassandra.hosts "
                        "(OM_CASSANDRA_HOSTS), the network and TLS settings, and that the nodes are up")


def _tls_failure(exc: BaseException) -> bool:
    # the driver re-raises a failed handshake as a plain OSError that carries the ssl module's text
    text = str(exc)
    return isinstance(exc, ssl.SSLError) or "[SSL" in text or "CERTIFICATE_VERIFY_FAILED" in text


def _ssl_context(settings: CassandraSettings) -> ssl.SSLContext | None:
    if not settings.tls:
        return None
    context = ssl.create_default_context(cafile=settings.tls_ca_file)
    context.check_hostname = settings.tls_check_hostname
    if settings.tls_cert_file:
        context.load_cert_chain(settings.tls_cert_file, settings.tls_key_file)
    return context


def build_cluster(settings: CassandraSettings) -> Any:
    """A ``cassandra.cluster.Cluster`` from settings: contact points, auth, TLS, load balancing, reconnection."""
    from cassandra import ConsistencyLevel, DriverException
    from cassandra.auth import PlainTextAuthProvider
    from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile
    from cassandra.policies import DCAwareRoundRobinPolicy, ExponentialReconnectionPolicy, TokenAwarePolicy

    auth = None
    if settings.username:
        password = settings.password.get_secret_value() if settings.password else ""
        auth = PlainTextAuthProvider(username=settings.username, password=password)
    profile = ExecutionProfile(
        load_balancing_policy=TokenAwarePolicy(DCAwareRoundRobinPolicy(local_dc=settings.local_datacenter)),
        request_timeout=settings.request_timeout_s,
        consistency_level=ConsistencyLevel.name_to_value[settings.read_consistency],
        serial_consistency_level=ConsistencyLevel.name_to_value[settings.serial_consistency])
    points = settings.contact_points()
    try:
        context = _ssl_context(settings)
        return Cluster(
            contact_points=[host for host, _ in points] if len({p for _, p in points}) == 1 else points,
            port=points[0][1], auth_provider=auth, ssl_context=context,
            execution_profiles={EXEC_PROFILE_DEFAULT: profile}, connect_timeout=settings.connect_timeout_s,
            control_connection_timeout=settings.connect_timeout_s,
            reconnection_policy=ExponentialReconnectionPolicy(0.5, settings.reconnect_max_delay_s),
            protocol_version=5, idle_heartbeat_interval=10, timestamp_generator=ClientTimestamps())
    except (OSError, ssl.SSLError, ValueError, DriverException) as exc:  # e.g. contact points that do not resolve
        raise StorageError(f"Cassandra: invalid connection settings: {type(exc).__name__}: {exc}") from exc


class CassandraSession:
    """One driver session for a store, with asyncio execution, bounded concurrency and retries."""

    def __init__(self, settings: CassandraSettings, session: Any, cluster: Any,
                 outages: StoreOutages | None = None, tracer: Tracer | None = None) -> None:
        self.settings = settings
        self.tracer = tracer or NoOpTracer()  # a span per statement, inside a recording span only
        self.session = session
        self.cluster = cluster
        self.outages = outages
        self._slots = asyncio.Semaphore(settings.max_concurrent_requests)
        self.retries = 0  # queries attempted again after a retryable failure (for tests and metrics)
        from cassandra import ConsistencyLevel, DriverException
        from cassandra.protocol import ErrorMessage
        from cassandra.query import BatchStatement, BatchType

        # resolved once: a query runs these lines thousands of times a second
        self._failures = (*_retryable(), DriverException, ErrorMessage, ValueError, TypeError)  # bind: ValueError
        self._batch = BatchStatement
        self._unlogged = BatchType.UNLOGGED
        self._write_level = ConsistencyLevel.name_to_value[settings.write_consistency]

    @classmethod
    async def connect(cls, settings: CassandraSettings, keyspace: str | None,
                      outages: StoreOutages | None = None, tracer: Tracer | None = None) -> CassandraSession:
        """Connect (in a worker thread: the driver's connect blocks) to ``keyspace`` (None: no keyspace); the
        session tells ``outages`` of the failures it retries."""

        def open_session() -> tuple[Any, Any]:
            from cassandra import DriverException
            from cassandra.cluster import NoHostAvailable

            cluster = build_cluster(settings)
            try:
                session = cluster.connect()
                if keyspace is not None:
                    found = session.execute("SELECT keyspace_name FROM system_schema.keyspaces WHERE "
                                            "keyspace_name = %s", (keyspace,)).one()
                    if found is None:
                        raise StorageError(f"Cassandra keyspace {keyspace!r} does not exist: run `om-stream "
                                           "migrate` to create and migrate it before starting om-stream")
                    session.set_keyspace(keyspace)
            except NoHostAvailable as exc:
                cluster.shutdown()
                raise unreachable(settings, exc) from exc
            except DriverException as exc:
                cluster.shutdown()
                raise translate(exc, f"cannot connect to {settings.hosts}") from exc
            except BaseException:
                cluster.shutdown()
                raise
            return cluster, session

        cluster, session = await asyncio.to_thread(open_session)
        return cls(settings, session, cluster, outages, tracer)

    async def prepare(self, cql: str, *, write: bool = False, idempotent: bool = True) -> Prepared:
        """The statement prepared once, with its consistency levels (``write``: the write level, else the read
        level) and idempotence (False: never retried by the driver) set on it, which every binding takes."""
        from cassandra import ConsistencyLevel, DriverException

        level = self.settings.write_consistency if write else self.settings.read_consistency
        try:
            statement = await asyncio.to_thread(self.session.prepare, cql)
        except DriverException as exc:
            raise translate(exc, f"cannot prepare {cql.split('(', maxsplit=1)[0].strip()!r}") from exc
        statement.consistency_level = ConsistencyLevel.name_to_value[level]
        statement.serial_consistency_level = ConsistencyLevel.name_to_value[self.settings.serial_consistency]
        statement.is_idempotent = idempotent
        return Prepared(statement)

    def unlogged_batch(self, statements: Sequence[tuple[Prepared, Sequence[Any]]]) -> Any:
        """One unlogged batch of bound statements, at the write consistency level."""
        batch = self._batch(batch_type=self._unlogged, consistency_level=self._write_level)
        add = batch.add
        for prepared, params in statements:
            add(prepared.bind(params))
        return batch

    async def execute(self, statement: Prepared | Any, params: Sequence[Any] | None = None, *,
                      what: str = "query") -> list[Any]:
        """Every row of the result (all pages), retrying retryable failures until the deadline. ``statement``:
        a :class:`Prepared` bound to ``params``, or a driver statement (a batch, a CQL string with ``params``).
        Within a recording span (a traced input's store write), the statement is a span of its own, named by its
        kind (``INSERT om_messages``; a batch: ``BATCH``), with the OpenTelemetry database attributes and never a
        value."""
        if get_current_span().is_recording():
            kind = (statement.kind if isinstance(statement, Prepared) else
                    statement_kind(statement) if isinstance(statement, str) else ("BATCH", None))
            operation, table = kind
            attributes: dict[str, str] = {"db.system.name": "cassandra", "db.operation.name": operation}
            if table is not None:
                attributes["db.collection.name"] = table
            if self.settings.keyspace:
                attributes["db.namespace"] = self.settings.keyspace
            span = self.tracer.start_span(f"{operation} {table}" if table else operation, kind=SpanKind.CLIENT,
                                          attributes=attributes, record_exception=False,
                                          set_status_on_exception=False)
            with use_span(span, end_on_exit=True, record_exception=False, set_status_on_exception=False):
                try:
                    return await self._execute(statement, params, what)
                except StorageError as exc:
                    span.set_attribute("error.type", type(exc).__name__)
                    span.set_status(Status(StatusCode.ERROR, type(exc).__name__))
                    raise
        return await self._execute(statement, params, what)

    async def _execute(self, statement: Prepared | Any, params: Sequence[Any] | None, what: str) -> list[Any]:
        if isinstance(statement, Prepared):
            try:
                statement = statement.bind(params)
            except (ValueError, TypeError) as exc:
                raise translate(exc, what) from exc
            params = None
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.settings.retry_deadline_s
        attempt = 0
        while True:
            try:
                async with self._slots:
                    rows = await self._once(statement, params)
                if self.outages is not None:
                    self.outages.succeeded(STORE_NAME)
                return rows
            except self._failures as exc:
                if not retryable(exc):
                    raise translate(exc, what) from exc
                attempt += 1
                if self.outages is not None:
                    self.outages.failing(STORE_NAME, outage_reason(exc, what))
                delay = min(self.settings.retry_base_delay_s * 2 ** (attempt - 1), self.settings.retry_max_delay_s)
                delay *= 0.5 + random.random() / 2
                if loop.time() + delay > deadline:
                    raise translate(exc, f"{what} failed after {attempt} attempts "
                                         f"({self.settings.retry_deadline_s:.0f} s)") from exc
                self.retries += 1
                log.warning("Cassandra %s failed (%s), retry %d in %.2f s", what, type(exc).__name__, attempt, delay)
                await asyncio.sleep(delay)

    async def _once(self, statement: Any, params: Sequence[Any] | None) -> list[Any]:
        loop = asyncio.get_running_loop()
        done: asyncio.Future[list[Any]] = loop.create_future()
        rows: list[Any] = []
        response = self.session.execute_async(statement, params, timeout=self.settings.request_timeout_s)

        def settle(result: list[Any] | None, error: BaseException | None) -> None:
            if done.done():
                return
            if error is not None:
                done.set_exception(error)
            else:
                done.set_result(result or [])

        def on_page(page: Sequence[Any] | None) -> None:
            rows.extend(page or ())
            if response.has_more_pages:
                response.start_fetching_next_page()
            else:
                loop.call_soon_threadsafe(settle, rows, None)

        def on_error(error: BaseException) -> None:
            loop.call_soon_threadsafe(settle, None, error)

        response.add_callbacks(on_page, on_error)
        return await done

    async def close(self) -> None:
        await asyncio.to_thread(self.cluster.shutdown)
