"""What ``om-stream worker`` checks of its settings before the framework starts: every setting that names a path, a
host or a port. A setting it cannot use stops it with a message that names the ``OM_*`` variable and its value
(never a secret) and exit status 3 (``main.EXIT_REFUSED``: nothing was started), not with a traceback from deep
inside Faust's start.

Each such setting gets one of three answers:

* **create** what a fresh host does not have yet: ``OM_WORKER_DATA_DIR`` and the app's folder in it
  (``<data_dir>/<group>-data``, where Faust keeps its tables), the folder of ``OM_MEMORY_SQLITE_PATH`` and the
  local recall index's ``OM_QDRANT_PATH``, each with its parents; refused when it cannot be created or written;
* **refuse** what can never work: a file that is missing, unreadable or not what it must be
  (``OM_MEMORY_CONFIG_FILE``, ``OM_KAFKA_SSL_CAFILE``, ``OM_CASSANDRA_TLS_*_FILE``), a host:port list or a URL that
  cannot name an address (``addresses``), a listener this process opens (``OM_WORKER_WEB_HOST``/``_PORT``,
  ``OM_WORKER_METRICS_HOST``/``_PORT``) on an address it cannot bind now: a port another process holds, a host that
  is not this machine's;
* **leave to the connection checks** a broker or a Cassandra node that does not answer yet: brokers may start after
  the worker (Kafka is retried), and a content store that cannot be used stops the worker with exit status 2 once
  it has tried.

Only what this worker uses is checked: the Cassandra settings with the Cassandra store, the TLS files with TLS on,
the API's listener in the roles that serve it, the index folder when recall search runs locally. A URL setting is
checked whenever it is set. ``settings_refusals`` says the same of settings that could not even be read.
"""

from __future__ import annotations

import errno
import logging
import os
import re
import socket
import ssl
import tempfile
from pathlib import Path
from typing import Any, get_args

import yaml
from pydantic import BaseModel, SecretStr, ValidationError
from pydantic_settings import SettingsError

from om_stream.core.config import OMConfig, ResolvedConfig
from om_stream.errors import ConfigError
from om_stream.runtime.worker.addresses import host_port_list, http_url, shown_url
from om_stream.runtime.worker.kafka_security import client_options
from om_stream.runtime.worker.roles import role_plan
from om_stream.settings import Settings, load_om_options

__all__ = ["check", "env_name", "settings_refusals"]

_TLS_PROTOCOLS = ("SSL", "SASL_SSL")


def check(settings: Settings) -> list[ConfigError]:
    """Every refusal of these settings (empty: the worker may start). Creates the folders that are missing."""
    refusals: list[ConfigError] = []
    worker, memory, kafka, cassandra = settings.worker, settings.memory, settings.kafka, settings.cassandra
    if not isinstance(logging.getLevelName(settings.log_level.upper()), int):
        refusals.append(ConfigError("OM_LOG_LEVEL", f"{settings.log_level!r} is not a log level (debug, info, "
                                                    "warning, error, critical)"))
    config = _options(settings, refusals)
    plan = role_plan(worker.role, worker.app_id, resource_scope=config is not None and config.scope == "resource")
    _folder(refusals, "OM_WORKER_DATA_DIR", Path(worker.data_dir), inner=f"{plan.group_id}-data")
    if memory.store == "sqlite" and memory.sqlite_path != ":memory:":
        _sqlite_file(refusals, memory.sqlite_path)
    local_index = config is not None and config.retrieval is not None and config.retrieval.vector
    if local_index and settings.qdrant.url is None and settings.qdrant.path != ":memory:":
        _folder(refusals, "OM_QDRANT_PATH", Path(settings.qdrant.path))
    _addresses(refusals, "OM_KAFKA_BOOTSTRAP", kafka.bootstrap, 9092)
    if kafka.security_protocol.upper() in _TLS_PROTOCOLS and kafka.ssl_cafile:
        _ca_file(refusals, "OM_KAFKA_SSL_CAFILE", kafka.ssl_cafile)
    if not any(r.field == "OM_KAFKA_SSL_CAFILE" for r in refusals):
        try:
            client_options(kafka)  # the protocol, the SASL mechanism and its credentials
        except ConfigError as exc:
            refusals.append(ConfigError(env_name(exc.field), exc.reason))
    if memory.store == "cassandra":
        _addresses(refusals, "OM_CASSANDRA_HOSTS", cassandra.hosts, 9042)
        if cassandra.tls:
            _cassandra_tls(refusals, cassandra.tls_ca_file, cassandra.tls_cert_file, cassandra.tls_key_file)
    _urls(refusals, settings)
    if plan.holds_table:  # the /v1/* API is served with the table only
        _listener(refusals, ("OM_WORKER_WEB_HOST", worker.web_host), ("OM_WORKER_WEB_PORT", worker.web_port))
    _listener(refusals, ("OM_WORKER_METRICS_HOST", worker.metrics_host),
              ("OM_WORKER_METRICS_PORT", worker.metrics_port))
    return refusals


def env_name(dotted: str) -> str:
    """``kafka.ssl_cafile`` → ``OM_KAFKA_SSL_CAFILE`` (a name that is not a settings path comes back as it is)."""
    return "OM_" + dotted.replace(".", "_").upper() if re.fullmatch(r"[a-z]+(\.[a-z_]+)?", dotted) else dotted


def _options(settings: Settings, refusals: list[ConfigError]) -> ResolvedConfig | None:
    """The observationalMemory options, read as the worker will read them (None: refused)."""
    config_file = settings.memory.config_file
    if config_file and not _readable_file(refusals, "OM_MEMORY_CONFIG_FILE", config_file):
        return None
    try:
        return OMConfig.parse(load_om_options(settings.memory)).resolve()
    except ConfigError as exc:
        refusals.append(ConfigError(_options_source(settings), f"the observationalMemory options are refused: "
                                                               f"{exc}"))
    except (ValueError, AttributeError, TypeError, yaml.YAMLError) as exc:  # does not parse, or not an object
        refusals.append(ConfigError(_options_source(settings), f"cannot be read as observationalMemory options "
                                                               f"({type(exc).__name__}: {exc})"[:600]))
    return None


def _options_source(settings: Settings) -> str:
    names = [name for name, value in (("OM_MEMORY_CONFIG_FILE", settings.memory.config_file),
                                      ("OM_MEMORY_OPTIONS", settings.memory.options)) if value]
    return "/".join(names) or "OM_MEMORY_OPTIONS"


def _blocker(path: Path) -> Path | None:
    """The nearest of ``path`` and its parents that exists and is not a folder (a file in the way)."""
    for candidate in (path, *path.parents):
        if candidate.exists():
            return None if candidate.is_dir() else candidate
    return None


def _folder(refusals: list[ConfigError], name: str, path: Path, *, inner: str | None = None) -> None:
    """``path`` (and ``path/inner``) created with its parents if missing, and writable."""
    target = path / inner if inner else path
    shown = f"{str(path)!r}" + (f" (the worker keeps its state in {target})" if inner else "")
    try:
        target.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        blocker = _blocker(target)
        why = (f"{blocker} is a file, not a folder" if blocker is not None else
               f"{exc.strerror or exc} (running as uid {os.getuid()})" if isinstance(exc, PermissionError) else
               f"{exc.strerror or exc}")
        refusals.append(ConfigError(name, f"{shown}: the folder cannot be created: {why}"))
        return
    try:
        with tempfile.TemporaryFile(dir=target):
            pass
    except OSError as exc:
        refusals.append(ConfigError(name, f"{shown}: the folder cannot be written: {exc.strerror or exc} "
                                          f"(running as uid {os.getuid()})"))


def _sqlite_file(refusals: list[ConfigError], value: str) -> None:
    path = Path(value)
    if path.is_dir():
        refusals.append(ConfigError("OM_MEMORY_SQLITE_PATH", f"{value!r} is a folder; give the path of the "
                                                             "database file (it is created if missing)"))
        return
    before = len(refusals)
    _folder(refusals, "OM_MEMORY_SQLITE_PATH", path.parent)
    if len(refusals) > before or not path.exists():
        return
    try:
        with path.open("r+b"):
            pass
    except OSError as exc:
        refusals.append(ConfigError("OM_MEMORY_SQLITE_PATH", f"{value!r} cannot be opened for writing: "
                                                             f"{exc.strerror or exc}"))


def _readable_file(refusals: list[ConfigError], name: str, value: str) -> bool:
    path = Path(value)
    if not path.exists():
        why = "no such file"
    elif not path.is_file():
        why = "not a file"
    else:
        try:
            with path.open("rb") as handle:
                handle.read(1)
            return True
        except OSError as exc:
            why = f"cannot be read: {exc.strerror or exc}"
    refusals.append(ConfigError(name, f"{value!r}: {why}"))
    return False


def _ca_file(refusals: list[ConfigError], name: str, value: str) -> None:
    if not _readable_file(refusals, name, value):
        return
    try:
        ssl.create_default_context(cafile=value)
    except ssl.SSLError as exc:
        refusals.append(ConfigError(name, f"{value!r} holds no PEM certificate the TLS library can load "
                                          f"({exc.reason or exc})"))


def _cassandra_tls(refusals: list[ConfigError], ca_file: str | None, cert_file: str | None,
                   key_file: str | None) -> None:
    if ca_file:
        _ca_file(refusals, "OM_CASSANDRA_TLS_CA_FILE", ca_file)
    if key_file and not cert_file:
        refusals.append(ConfigError("OM_CASSANDRA_TLS_KEY_FILE", f"{key_file!r} is set without "
                                                                 "OM_CASSANDRA_TLS_CERT_FILE: mutual TLS needs the "
                                                                 "certificate too"))
    if not cert_file or not _readable_file(refusals, "OM_CASSANDRA_TLS_CERT_FILE", cert_file):
        return
    if key_file and not _readable_file(refusals, "OM_CASSANDRA_TLS_KEY_FILE", key_file):
        return
    try:
        ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT).load_cert_chain(cert_file, key_file)
    except ssl.SSLError as exc:  # never the key's content: the library names only what failed
        refusals.append(ConfigError("OM_CASSANDRA_TLS_CERT_FILE", f"{cert_file!r} with the key "
                                                                  f"{key_file or cert_file!r} does not load as a "
                                                                  f"certificate and its key ({exc.reason or exc})"))


def _addresses(refusals: list[ConfigError], name: str, value: str, default_port: int) -> None:
    problem = host_port_list(value, default_port=default_port)
    if problem:
        refusals.append(ConfigError(name, f"{value!r}: {problem}"))


def _urls(refusals: list[ConfigError], settings: Settings) -> None:
    named = [("OM_QDRANT_URL", settings.qdrant.url), ("OM_MEMORY_API_BASE", settings.memory.api_base),
             ("OM_EMBEDDING_API_BASE", settings.embedding.api_base),
             *((f"OM_GATEWAY_API_BASES[{key}]", url) for key, url in settings.gateway.api_bases.items())]
    for name, url in named:
        if url is not None and (problem := http_url(url)):
            refusals.append(ConfigError(name, f"{shown_url(url)!r}: {problem}"))


def _listener(refusals: list[ConfigError], host: tuple[str, str], port: tuple[str, int]) -> None:
    """The address can be bound now, as the server will bind it (every address the host resolves to)."""
    (host_name, host_value), (port_name, port_value) = host, port
    try:
        found = socket.getaddrinfo(host_value or None, port_value, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        refusals.append(ConfigError(host_name, f"{host_value!r} does not resolve to an address of this machine "
                                               f"({exc.strerror})"))
        return
    for family, kind, proto, _, address in dict.fromkeys(found):
        problem = _bind(family, kind, proto, address)
        if problem is None:
            continue
        code, text = problem
        if code == errno.EADDRINUSE:
            refusals.append(ConfigError(port_name, f"{port_value}: the port is in use on {host_value!r} (another "
                                                   f"process listens there); choose a free port"))
        elif code == errno.EADDRNOTAVAIL:
            refusals.append(ConfigError(host_name, f"{host_value!r} is not an address of this machine"))
        elif code == errno.EACCES:
            refusals.append(ConfigError(port_name, f"{port_value}: binding this port on {host_value!r} is not "
                                                   f"permitted (below 1024 it needs privileges)"))
        else:
            refusals.append(ConfigError(port_name, f"{host_value}:{port_value} cannot be listened on: {text}"))
        return


def _bind(family: int, kind: int, proto: int, address: Any) -> tuple[int, str] | None:
    """Binds and releases ``address`` with the options asyncio's servers use; (errno, text) when it fails."""
    probe = socket.socket(family, kind, proto)
    try:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family == socket.AF_INET6:
            probe.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        probe.bind(address)
    except OSError as exc:
        return exc.errno or 0, exc.strerror or str(exc)
    finally:
        probe.close()
    return None


def settings_refusals(error: ValidationError | SettingsError) -> list[ConfigError]:
    """Why the settings could not be read, each naming its ``OM_*`` variable and, unless it is a secret, the value
    given."""
    if isinstance(error, SettingsError):  # a JSON value that does not parse; pydantic-settings names the group
        group = re.search(r'field "(\w+)"', str(error))
        name = f"OM_{group[1].upper()}_*" if group else "OM_*"
        return [ConfigError(name, f"{error} (one of these variables holds JSON that does not parse)")]
    refusals = []
    for problem in error.errors(include_url=False):
        location = [str(part) for part in problem["loc"]]
        message = problem["msg"].removeprefix("Value error, ")
        if len(location) < 2:  # a rule between several settings of a group: the message names them
            refusals.append(ConfigError(f"OM_{'_'.join(location).upper()}", message))
            continue
        name = f"OM_{location[0]}_{location[1]}".upper() + "".join(f"[{key}]" for key in location[2:])
        shown = "" if _secret(location[0], location[1]) else f"{problem['input']!r}: "
        refusals.append(ConfigError(name, f"{shown}{message}"))
    return refusals


def _secret(group: str, name: str) -> bool:
    field = Settings.model_fields.get(group)
    annotation = field.annotation if field is not None else None
    if not (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
        return True  # not a known setting: show nothing
    inner = annotation.model_fields.get(name)
    return inner is None or _mentions_secret(inner.annotation)


def _mentions_secret(annotation: Any) -> bool:
    return annotation is SecretStr or any(_mentions_secret(arg) for arg in get_args(annotation))
