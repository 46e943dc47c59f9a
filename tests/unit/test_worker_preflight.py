"""The worker's start-up checks of every setting that names a path, a host or a port (``preflight``), and the way
settings that cannot be read are reported: each refusal names the ``OM_*`` variable and its value, never a secret."""

from __future__ import annotations

import json
import socket
import subprocess
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError
from pydantic_settings import SettingsError

from om_stream.errors import ConfigError
from om_stream.runtime.worker.addresses import host_port_list, http_url, shown_url
from om_stream.runtime.worker.preflight import check, env_name, settings_refusals
from om_stream.settings import Settings
from tests.support.worker import listener_ports


@pytest.fixture
def base(tmp_path: Path) -> dict[str, Any]:
    """Settings a worker could start with here: a data folder of its own, free listener ports, the memory store."""
    web, metrics = listener_ports()
    return {"worker": {"data_dir": str(tmp_path / "data"), "web_port": web, "metrics_port": metrics},
            "memory": {"store": "memory"}}


def _settings(base: dict[str, Any], **groups: dict[str, Any]) -> Settings:
    merged = {group: {**base.get(group, {}), **values} for group, values in {**base, **groups}.items()}
    return Settings(**merged)


def _refused(settings: Settings) -> dict[str, str]:
    return {refusal.field: refusal.reason for refusal in check(settings)}


def test_settings_a_worker_can_use_pass_and_a_missing_data_folder_is_made_with_its_parents(
        base: dict[str, Any], tmp_path: Path) -> None:
    data = tmp_path / "var" / "lib" / "om-stream"
    settings = _settings(base, worker={"data_dir": str(data), "app_id": "om-prod"})
    assert check(settings) == []
    assert (data / "om-prod-data").is_dir()  # the folder Faust keeps its tables in, ready for it
    assert check(settings) == []  # and again once it exists


@pytest.mark.parametrize("role", ["models", "recall"])
def test_the_data_folder_is_named_after_the_roles_consumer_group(base: dict[str, Any], tmp_path: Path,
                                                                  role: str) -> None:
    assert check(_settings(base, worker={"role": role, "app_id": "om"})) == []
    assert (tmp_path / "data" / f"om-{role}-data").is_dir()


def test_a_file_in_the_way_of_the_data_folder_is_refused_naming_the_setting_and_the_file(
        base: dict[str, Any], tmp_path: Path) -> None:
    blocker = tmp_path / "state"
    blocker.write_text("not a folder")
    refused = _refused(_settings(base, worker={"data_dir": str(blocker / "data")}))
    assert list(refused) == ["OM_WORKER_DATA_DIR"]
    assert str(blocker / "data") in refused["OM_WORKER_DATA_DIR"]
    assert f"{blocker} is a file, not a folder" in refused["OM_WORKER_DATA_DIR"]


def test_a_file_where_faust_keeps_its_tables_is_refused(base: dict[str, Any], tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "om-stream-data").write_text("")
    refused = _refused(_settings(base))
    assert "om-stream-data is a file, not a folder" in refused["OM_WORKER_DATA_DIR"]


def test_a_folder_no_file_can_be_written_in_is_refused(base: dict[str, Any]) -> None:
    """The probe writes a file rather than reading permission bits, which say yes to root even where no file can be
    made (a read-only mount, /proc)."""
    search = json.dumps({"retrieval": {"vector": True}})
    refused = _refused(_settings(base, qdrant={"path": "/proc/self"}, memory={"store": "memory", "options": search}))
    assert refused["OM_QDRANT_PATH"].startswith("'/proc/self': the folder cannot be written: ")


def test_the_sqlite_file_gets_its_folder_and_a_folder_in_its_place_is_refused(base: dict[str, Any],
                                                                              tmp_path: Path) -> None:
    database = tmp_path / "fresh" / "om" / "content.db"
    assert check(_settings(base, memory={"store": "sqlite", "sqlite_path": str(database)})) == []
    assert database.parent.is_dir() and not database.exists()  # SQLite makes the file itself
    refused = _refused(_settings(base, memory={"store": "sqlite", "sqlite_path": str(tmp_path)}))
    assert "is a folder" in refused["OM_MEMORY_SQLITE_PATH"]
    (tmp_path / "blocker").write_text("")
    refused = _refused(_settings(base, memory={"store": "sqlite", "sqlite_path": str(tmp_path / "blocker" / "x.db")}))
    assert "is a file, not a folder" in refused["OM_MEMORY_SQLITE_PATH"]
    # unused: the memory store never opens it
    assert check(_settings(base, memory={"store": "memory", "sqlite_path": str(tmp_path / "blocker" / "x.db")})) == []


def test_a_missing_or_unreadable_options_file_is_refused_and_so_are_options_that_do_not_parse(
        base: dict[str, Any], tmp_path: Path) -> None:
    missing = tmp_path / "om.yaml"
    assert _refused(_settings(base, memory={"config_file": str(missing)})) == {
        "OM_MEMORY_CONFIG_FILE": f"{str(missing)!r}: no such file"}
    assert "not a file" in _refused(_settings(base, memory={"config_file": str(tmp_path)}))["OM_MEMORY_CONFIG_FILE"]
    missing.write_text("observation: [unclosed")
    assert "cannot be read as observationalMemory options" in _refused(
        _settings(base, memory={"config_file": str(missing)}))["OM_MEMORY_CONFIG_FILE"]
    missing.write_text("observation:\n  messageTokens: -5\n")
    refused = _refused(_settings(base, memory={"config_file": str(missing)}))
    assert "observation.messageTokens" in refused["OM_MEMORY_CONFIG_FILE"]
    assert "OM_MEMORY_OPTIONS" in _refused(_settings(base, memory={"options": "{not json"}))


def test_the_local_recall_index_folder_is_made_only_when_search_runs_locally(base: dict[str, Any],
                                                                             tmp_path: Path) -> None:
    index = tmp_path / "index" / "qdrant"
    search = json.dumps({"retrieval": {"vector": True}})
    assert check(_settings(base, qdrant={"path": str(index)})) == []
    assert not index.exists()  # no vector search in the options: no index
    assert check(_settings(base, qdrant={"path": str(index)}, memory={"store": "memory", "options": search})) == []
    assert index.is_dir()
    (tmp_path / "plain").write_text("")
    refused = _refused(_settings(base, qdrant={"path": str(tmp_path / "plain" / "q")},
                                 memory={"store": "memory", "options": search}))
    assert "is a file, not a folder" in refused["OM_QDRANT_PATH"]


@pytest.mark.parametrize(("value", "why"), [
    ("", "no address given"),
    ("kafka://broker:9092", "without a scheme"),
    ("broker:99999", "not a number from 1 to 65535"),
    ("broker:0", "not a number from 1 to 65535"),
    ("broker:port", "not a number from 1 to 65535"),
    ("a:9092,,b:9092", "an empty entry"),
    (":9092", "the host is empty"),
    ("bad host:9092", "not a host name"),
    ("::1", "write it in brackets"),
    ("[::1", "expected [IPv6]:port"),
    ("[not-v6]:9092", "is not an IPv6 address"),
])
def test_a_bootstrap_list_that_cannot_name_a_broker_is_refused(base: dict[str, Any], value: str, why: str) -> None:
    refused = _refused(_settings(base, kafka={"bootstrap": value}))
    assert why in refused["OM_KAFKA_BOOTSTRAP"] and repr(value) in refused["OM_KAFKA_BOOTSTRAP"]


@pytest.mark.parametrize("value", ["127.0.0.1:9092", "kafka-0.kafka.svc:9092,kafka-1.kafka.svc:9093", "broker",
                                   "[::1]:9092", "om_kafka:9092", "10.0.0.7:9094 , 10.0.0.8:9094"])
def test_host_port_lists_that_name_brokers_pass_whether_or_not_they_answer(value: str) -> None:
    assert host_port_list(value, default_port=9092) is None


def test_cassandra_hosts_are_checked_only_with_the_cassandra_store(base: dict[str, Any]) -> None:
    assert check(_settings(base, cassandra={"hosts": "node:90420"})) == []
    refused = _refused(_settings(base, cassandra={"hosts": "node:90420"}, memory={"store": "cassandra"}))
    assert "'node:90420'" in refused["OM_CASSANDRA_HOSTS"]
    # a node that does not answer is left to the store's start (exit status 2), not refused here
    assert check(_settings(base, cassandra={"hosts": "no-such-node.invalid:9042"},
                           memory={"store": "cassandra"})) == []


def _openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True)


def test_tls_files_must_exist_and_load(base: dict[str, Any], tmp_path: Path) -> None:
    ca, key, other_key = tmp_path / "ca.pem", tmp_path / "key.pem", tmp_path / "other.pem"
    _openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "1",
             "-subj", "/CN=test-ca", "-keyout", str(key), "-out", str(ca))
    _openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", str(other_key))
    tls = {"tls": True, "tls_ca_file": str(ca)}
    cassandra = {"store": "cassandra"}
    assert check(_settings(base, cassandra={**tls, "tls_cert_file": str(ca), "tls_key_file": str(key)},
                           memory=cassandra)) == []
    refused = _refused(_settings(base, cassandra={**tls, "tls_cert_file": str(ca), "tls_key_file": str(other_key)},
                                 memory=cassandra))
    assert "does not load as a certificate and its key" in refused["OM_CASSANDRA_TLS_CERT_FILE"]
    refused = _refused(_settings(base, cassandra={**tls, "tls_ca_file": str(tmp_path / "gone.pem")},
                                 memory=cassandra))
    assert refused == {"OM_CASSANDRA_TLS_CA_FILE": f"{str(tmp_path / 'gone.pem')!r}: no such file"}
    refused = _refused(_settings(base, cassandra={**tls, "tls_ca_file": str(other_key)}, memory=cassandra))
    assert "holds no PEM certificate" in refused["OM_CASSANDRA_TLS_CA_FILE"]
    refused = _refused(_settings(base, cassandra={**tls, "tls_key_file": str(key)}, memory=cassandra))
    assert "without OM_CASSANDRA_TLS_CERT_FILE" in refused["OM_CASSANDRA_TLS_KEY_FILE"]
    assert check(_settings(base, cassandra={"tls": False, "tls_ca_file": str(tmp_path / "gone.pem")},
                           memory=cassandra)) == []  # TLS off: the file is not used
    kafka = {"security_protocol": "SSL", "ssl_cafile": str(tmp_path / "gone.pem")}
    assert list(_refused(_settings(base, kafka=kafka))) == ["OM_KAFKA_SSL_CAFILE"]
    assert check(_settings(base, kafka={**kafka, "ssl_cafile": str(ca)})) == []


def test_kafka_security_settings_are_refused_naming_the_variable_and_never_the_password(
        base: dict[str, Any]) -> None:
    refused = _refused(_settings(base, kafka={"security_protocol": "SASL_SSL", "sasl_mechanism": "PLAIN",
                                              "sasl_password": "hunter2-secret"}))
    assert "OM_KAFKA_SASL_USERNAME" in refused
    assert "hunter2-secret" not in repr(refused)
    assert "OM_KAFKA_SECURITY_PROTOCOL" in _refused(_settings(base, kafka={"security_protocol": "TLS"}))


@pytest.mark.parametrize(("name", "groups"), [
    ("OM_QDRANT_URL", {"qdrant": {"url": "qdrant:6333"}}),
    ("OM_MEMORY_API_BASE", {"memory": {"store": "memory", "api_base": "ftp://models.internal/v1"}}),
    ("OM_EMBEDDING_API_BASE", {"embedding": {"api_base": "http://:8080/v1"}}),
    ("OM_GATEWAY_API_BASES[openai]", {"gateway": {"api_bases": {"openai": "https://api.example.com:70000/v1"}}}),
])
def test_urls_that_cannot_name_a_server_are_refused(base: dict[str, Any], name: str,
                                                    groups: dict[str, dict[str, Any]]) -> None:
    assert list(_refused(_settings(base, **groups))) == [name]


def test_urls_are_shown_without_their_credentials_or_query() -> None:
    assert shown_url("ftp://user:hunter2@models.internal:8080/v1?key=abc") == "ftp://***@models.internal:8080/v1?..."
    assert shown_url("user:hunter2@host/v1") == "***@host/v1"
    assert http_url("https://user:pw@api.example.com/v1") is None
    assert http_url("http://[::1]:8080") is None
    assert http_url("https://api.example.com:0") is not None


def test_a_listener_port_another_process_holds_is_refused(base: dict[str, Any]) -> None:
    settings = _settings(base)
    for name, port in (("OM_WORKER_WEB_PORT", settings.worker.web_port),
                       ("OM_WORKER_METRICS_PORT", settings.worker.metrics_port)):
        with socket.socket() as taken:
            taken.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the one who holds it would
            taken.bind(("127.0.0.1", port))
            taken.listen()
            refused = _refused(settings)
        assert list(refused) == [name]
        assert refused[name].startswith(f"{port}: the port is in use on '127.0.0.1'")
    assert check(settings) == []  # released: the worker may start


def test_the_api_port_is_not_checked_in_roles_that_serve_no_api(base: dict[str, Any]) -> None:
    settings = _settings(base, worker={"role": "models"})
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", settings.worker.web_port))
        taken.listen()
        assert check(settings) == []


# binding a socket sends nothing: 192.0.2.1 (TEST-NET-1) is only asked whether it is one of this machine's addresses
@pytest.mark.allow_remote_network
@pytest.mark.parametrize(("host", "why"), [("192.0.2.1", "is not an address of this machine"),
                                           ("no-such-host.invalid", "does not resolve")])
def test_a_listener_host_that_is_not_this_machines_is_refused(base: dict[str, Any], host: str, why: str) -> None:
    refused = _refused(_settings(base, worker={"metrics_host": host}))
    assert why in refused["OM_WORKER_METRICS_HOST"] and repr(host) in refused["OM_WORKER_METRICS_HOST"]


def test_an_unknown_log_level_is_refused(base: dict[str, Any]) -> None:
    assert "OM_LOG_LEVEL" in _refused(Settings(**base, log_level="loud"))


def _read_error(monkeypatch: pytest.MonkeyPatch, environ: dict[str, str]) -> list[ConfigError]:
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    with pytest.raises((ValidationError, SettingsError)) as caught:
        Settings()
    assert isinstance(caught.value, ValidationError | SettingsError)
    return settings_refusals(caught.value)


def test_settings_that_cannot_be_read_are_reported_by_variable_with_the_value(monkeypatch: pytest.MonkeyPatch) -> None:
    refusals = _read_error(monkeypatch, {"OM_WORKER_WEB_PORT": "99999", "OM_KAFKA_PARTITIONS": "many"})
    shown = {refusal.field: refusal.reason for refusal in refusals}
    assert shown["OM_WORKER_WEB_PORT"].startswith("'99999': ")
    assert shown["OM_KAFKA_PARTITIONS"].startswith("'many': ")


def test_a_secret_that_cannot_be_read_is_reported_without_its_value(monkeypatch: pytest.MonkeyPatch) -> None:
    refusals = _read_error(monkeypatch, {"OM_WORKER_API_TOKEN": "hunter2 with a space"})
    assert [refusal.field for refusal in refusals] == ["OM_WORKER_API_TOKEN"]
    assert "hunter2" not in str(refusals[0]) and "printable ASCII" in str(refusals[0])
    refusals = _read_error(monkeypatch, {"OM_WORKER_API_TOKEN": "fine", "OM_GATEWAY_API_KEYS": '{"openai": 7}'})
    assert refusals[0].field == "OM_GATEWAY_API_KEYS[openai]" and "7" not in refusals[0].reason


def test_a_rule_between_settings_and_json_that_does_not_parse_name_their_group(
        monkeypatch: pytest.MonkeyPatch) -> None:
    refusals = _read_error(monkeypatch, {"OM_WORKER_WEB_PORT": "7000", "OM_WORKER_METRICS_PORT": "7000"})
    assert refusals[0].field == "OM_WORKER" and "both 7000" in refusals[0].reason
    monkeypatch.delenv("OM_WORKER_METRICS_PORT")
    refusals = _read_error(monkeypatch, {"OM_GATEWAY_API_BASES": "not json"})
    assert refusals[0].field == "OM_GATEWAY_*"


def test_settings_paths_map_to_their_variables() -> None:
    assert env_name("kafka.ssl_cafile") == "OM_KAFKA_SSL_CAFILE"
    assert env_name("observation.messageTokens") == "observation.messageTokens"
