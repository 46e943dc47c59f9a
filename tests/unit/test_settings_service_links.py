"""The settings read the ``OM_*`` variables they own and nothing else: the service links Kubernetes injects for every
Service of the namespace (kubelet's envvars.FromServices) must not stop the worker, and a typo is named, not fatal."""

from __future__ import annotations

import os

import pytest

from om_stream.settings import Settings, is_service_link, setting_names, unknown_settings

# what kubelet puts into a pod's environment for these Services (names upper-cased, '-' -> '_'); the first port of
# each gets the Docker-style S_PORT, named ports get S_SERVICE_PORT_<NAME>
SERVICE_LINKS = {
    # om-worker: ClusterIP 10.96.12.7, ports 6066 "http" and 6067 "metrics"
    "OM_WORKER_SERVICE_HOST": "10.96.12.7",
    "OM_WORKER_SERVICE_PORT": "6066",
    "OM_WORKER_SERVICE_PORT_HTTP": "6066",
    "OM_WORKER_SERVICE_PORT_METRICS": "6067",
    "OM_WORKER_PORT": "tcp://10.96.12.7:6066",
    "OM_WORKER_PORT_6066_TCP": "tcp://10.96.12.7:6066",
    "OM_WORKER_PORT_6066_TCP_PROTO": "tcp",
    "OM_WORKER_PORT_6066_TCP_PORT": "6066",
    "OM_WORKER_PORT_6066_TCP_ADDR": "10.96.12.7",
    "OM_WORKER_PORT_6067_TCP": "tcp://10.96.12.7:6067",
    "OM_WORKER_PORT_6067_TCP_PROTO": "tcp",
    "OM_WORKER_PORT_6067_TCP_PORT": "6067",
    "OM_WORKER_PORT_6067_TCP_ADDR": "10.96.12.7",
    # om-kafka: one unnamed port 9092
    "OM_KAFKA_SERVICE_HOST": "10.96.40.2",
    "OM_KAFKA_SERVICE_PORT": "9092",
    "OM_KAFKA_PORT": "tcp://10.96.40.2:9092",
    "OM_KAFKA_PORT_9092_TCP": "tcp://10.96.40.2:9092",
    "OM_KAFKA_PORT_9092_TCP_PROTO": "tcp",
    "OM_KAFKA_PORT_9092_TCP_PORT": "9092",
    "OM_KAFKA_PORT_9092_TCP_ADDR": "10.96.40.2",
    # om-cassandra: IPv6 ClusterIP (a single-stack IPv6 cluster), port 9042 "cql"
    "OM_CASSANDRA_SERVICE_HOST": "fd00:10:96::2a",
    "OM_CASSANDRA_SERVICE_PORT": "9042",
    "OM_CASSANDRA_SERVICE_PORT_CQL": "9042",
    "OM_CASSANDRA_PORT": "tcp://[fd00:10:96::2a]:9042",
    "OM_CASSANDRA_PORT_9042_TCP": "tcp://[fd00:10:96::2a]:9042",
    "OM_CASSANDRA_PORT_9042_TCP_PROTO": "tcp",
    "OM_CASSANDRA_PORT_9042_TCP_PORT": "9042",
    "OM_CASSANDRA_PORT_9042_TCP_ADDR": "fd00:10:96::2a",
    # om-memory: port 6066 "http"
    "OM_MEMORY_SERVICE_HOST": "10.96.3.3",
    "OM_MEMORY_SERVICE_PORT": "6066",
    "OM_MEMORY_SERVICE_PORT_HTTP": "6066",
    "OM_MEMORY_PORT": "tcp://10.96.3.3:6066",
    "OM_MEMORY_PORT_6066_TCP": "tcp://10.96.3.3:6066",
    "OM_MEMORY_PORT_6066_TCP_PROTO": "tcp",
    "OM_MEMORY_PORT_6066_TCP_PORT": "6066",
    "OM_MEMORY_PORT_6066_TCP_ADDR": "10.96.3.3",
    # om-gateway: 4000 "http" (TCP) and 4000 "quic" (UDP)
    "OM_GATEWAY_SERVICE_HOST": "10.96.8.1",
    "OM_GATEWAY_SERVICE_PORT": "4000",
    "OM_GATEWAY_SERVICE_PORT_HTTP": "4000",
    "OM_GATEWAY_SERVICE_PORT_QUIC": "4000",
    "OM_GATEWAY_PORT": "tcp://10.96.8.1:4000",
    "OM_GATEWAY_PORT_4000_TCP": "tcp://10.96.8.1:4000",
    "OM_GATEWAY_PORT_4000_TCP_PROTO": "tcp",
    "OM_GATEWAY_PORT_4000_TCP_PORT": "4000",
    "OM_GATEWAY_PORT_4000_TCP_ADDR": "10.96.8.1",
    "OM_GATEWAY_PORT_4000_UDP": "udp://10.96.8.1:4000",
    "OM_GATEWAY_PORT_4000_UDP_PROTO": "udp",
    "OM_GATEWAY_PORT_4000_UDP_PORT": "4000",
    "OM_GATEWAY_PORT_4000_UDP_ADDR": "10.96.8.1",
    # om-worker-metrics and om-worker-web: their S_PORT is the name of a real setting
    "OM_WORKER_METRICS_SERVICE_HOST": "10.96.12.8",
    "OM_WORKER_METRICS_SERVICE_PORT": "6067",
    "OM_WORKER_METRICS_PORT": "tcp://10.96.12.8:6067",
    "OM_WORKER_METRICS_PORT_6067_TCP_ADDR": "10.96.12.8",
    "OM_WORKER_WEB_SERVICE_HOST": "10.96.12.9",
    "OM_WORKER_WEB_PORT": "tcp://10.96.12.9:6066",
}


def _environment(monkeypatch: pytest.MonkeyPatch, variables: dict[str, str]) -> None:
    for name in [n for n in os.environ if n.upper().startswith("OM_")]:
        monkeypatch.delenv(name)
    for name, value in variables.items():
        monkeypatch.setenv(name, value)


def test_the_service_links_of_five_services_do_not_stop_the_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    _environment(monkeypatch, {**SERVICE_LINKS, "OM_KAFKA_BOOTSTRAP": "om-kafka:9092",
                               "OM_WORKER_WEB_HOST": "0.0.0.0", "OM_CASSANDRA_HOSTS": "om-cassandra"})
    settings = Settings()
    assert settings.kafka.bootstrap == "om-kafka:9092"  # the settings given are read
    assert settings.worker.web_host == "0.0.0.0"
    assert settings.cassandra.hosts == "om-cassandra"
    # a service link that has a setting's name is not that setting: the defaults stand
    assert settings.worker.web_port == 6066 and settings.worker.metrics_port == 6067
    assert unknown_settings(SERVICE_LINKS) == {}  # and none of them is reported as a typo


def test_a_port_setting_given_as_a_number_is_read(monkeypatch: pytest.MonkeyPatch) -> None:
    _environment(monkeypatch, {"OM_WORKER_WEB_PORT": "7000", "OM_WORKER_METRICS_PORT": "7001"})
    settings = Settings()
    assert (settings.worker.web_port, settings.worker.metrics_port) == (7000, 7001)


def test_a_misspelt_setting_is_ignored_and_named_with_the_closest_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    environ = {"OM_WORKER_WEB_PROT": "7000", "OM_KAFKA_BOOTSTRAPS": "b:9092", "OM_WORKER_PORT": "6066",
               "OM_SOMETHING_ELSE": "x"}
    _environment(monkeypatch, environ)
    settings = Settings()  # starts: an unknown variable is not fatal any more
    assert settings.worker.web_port == 6066 and settings.kafka.bootstrap == "127.0.0.1:9092"
    assert unknown_settings(environ) == {"OM_KAFKA_BOOTSTRAPS": "OM_KAFKA_BOOTSTRAP",
                                         "OM_WORKER_WEB_PROT": "OM_WORKER_WEB_PORT",
                                         "OM_WORKER_PORT": "OM_WORKER_WEB_PORT",  # a number: not a service link
                                         "OM_SOMETHING_ELSE": None}


def test_the_typo_report_never_carries_a_value() -> None:
    report = unknown_settings({"OM_MEMORY_API_KYE": "sk-very-secret-value"})
    assert report == {"OM_MEMORY_API_KYE": "OM_MEMORY_API_KEY"}
    assert "sk-very-secret-value" not in repr(report)


@pytest.mark.parametrize(("name", "value", "link"), [
    ("OM_WORKER_PORT", "tcp://10.0.0.1:6066", True),
    ("OM_WORKER_PORT", "6066", False),
    ("OM_WORKER_PORT_6066_TCP_ADDR", "10.0.0.1", True),
    ("OM_WORKER_PORT_6066_TCP_ADDR", "om-worker", False),
    ("OM_WORKER_PORT_6066_SCTP_PROTO", "sctp", True),
    ("OM_WORKER_PORT_6066_TCP_PROTO", "http", False),
    ("OM_WORKER_SERVICE_PORT_HTTP", "6066", True),
    ("OM_WORKER_SERVICE_PORT", "http", False),
    ("OM_WORKER_SERVICE_HOST", "::1", True),
    ("OM_WORKER_WEB_HOST", "10.0.0.1", False),
    ("om_kafka_port", "tcp://10.0.0.2:9092", True),  # pydantic-settings hands the names over in lower case
])
def test_a_service_link_is_recognised_by_its_name_and_its_value(name: str, value: str, link: bool) -> None:
    assert is_service_link(name, value) is link


def test_every_documented_setting_is_owned() -> None:
    from om_stream.observability.settings_doc import settings_docs

    assert {doc.env for doc in settings_docs()} <= setting_names()
    assert "OM_WORKER_API_TOKEN" in setting_names() and "OM_WORKER_METRICS_PORT" in setting_names()
