"""Settings come from OM_* variables, grouped by their first word, and are frozen."""

from __future__ import annotations

import pydantic
import pytest

from om_stream.settings import CassandraSettings, Settings


def test_env_variables_fill_the_groups(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OM_KAFKA_BOOTSTRAP", "10.0.0.1:9093")
    monkeypatch.setenv("OM_CASSANDRA_HOSTS", "db1:9142,db2")
    settings = Settings()
    assert settings.kafka.bootstrap == "10.0.0.1:9093"
    assert settings.cassandra.contact_points() == [("db1", 9142), ("db2", 9042)]


def test_settings_are_frozen() -> None:
    settings = Settings()
    with pytest.raises(pydantic.ValidationError):
        settings.log_level = "debug"  # type: ignore[misc]


def test_contact_point_without_port_defaults_to_9042() -> None:
    assert CassandraSettings(hosts="127.0.0.1").contact_points() == [("127.0.0.1", 9042)]
