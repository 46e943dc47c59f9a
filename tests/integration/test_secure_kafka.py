"""Kafka security settings on a real broker: a SASL_SSL listener with SCRAM-SHA-512 users and a certificate from
the test CA (``tests/support/secure_services.py``; the node certificate names 127.0.0.1 only).

The worker (a real process, Faust's consumer and producer and the admin client that creates the topics) and the
Python client both go through that listener; a wrong password or an untrusted certificate fails at once with an
error that says so, and never shows the password.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest

from om_stream.client import ClientTopics, MessageRecord, OMClient
from om_stream.client.security import KafkaConnectError, kafka_security_options
from tests.support.secure_services import SecureKafkaService, secure_kafka_service
from tests.support.worker import ROOT, WorkerProcess, message_record, running_worker, worker_process

pytestmark = pytest.mark.integration
FAST_S = 5.0  # a refused login must be reported well within this (aiokafka's request timeout is 40 s)


@pytest.fixture(scope="session")
def secure_kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureKafkaService]:
    with secure_kafka_service(tmp_path_factory.mktemp("secure-kafka")) as service:
        yield service


def _env(service: SecureKafkaService, password: str) -> dict[str, str]:
    return {"OM_KAFKA_SECURITY_PROTOCOL": "SASL_SSL", "OM_KAFKA_SASL_MECHANISM": "SCRAM-SHA-512",
            "OM_KAFKA_SASL_USERNAME": service.user, "OM_KAFKA_SASL_PASSWORD": password,
            "OM_KAFKA_SSL_CAFILE": service.ca_file}


def _options(service: SecureKafkaService, *, password: str | None = None, cafile: str | None = "ca",
             ) -> dict[str, object]:
    return kafka_security_options(security_protocol="SASL_SSL", sasl_mechanism="SCRAM-SHA-512", username=service.user,
                                  password=service.password if password is None else password,
                                  cafile=service.ca_file if cafile == "ca" else cafile)


def _topics(worker: WorkerProcess) -> ClientTopics:
    t = worker.topics
    return ClientTopics(messages=t["messages"], events=t["events"], context=t["context"],
                        recall_requests=t["recall_requests"], recall_responses=t["recall_responses"])


async def test_the_worker_and_the_client_work_through_the_sasl_ssl_listener(secure_kafka: SecureKafkaService,
                                                                             tmp_path: Path) -> None:
    """publish -> the worker (memory store, offline model) -> the context on om.context, all over SASL_SSL. Before
    the worker handed its credentials to Faust, its consumer spoke PLAINTEXT to this listener and never got ready."""
    started = time.monotonic()
    async with running_worker(secure_kafka.bootstrap, tmp_path, options={}, store="memory",
                              extra=_env(secure_kafka, secure_kafka.password)) as worker:
        ready_s = time.monotonic() - started
        async with OMClient(secure_kafka.bootstrap, topics=_topics(worker),
                            kafka_options=_options(secure_kafka)) as om:
            thread = "secure-thread"
            sent = await om.publish(MessageRecord.model_validate(
                message_record(thread, 0, "user", "the launch moves to friday")))
            context = await om.await_context(thread, sent.message_id, timeout=60)
        assert context.through_message_id == sent.message_id
        assert [m.message_id for m in context.messages] == [sent.message_id]
        log = worker.tail(200_000)
    assert secure_kafka.password not in log
    print(f"worker ready over SASL_SSL after {ready_s:.1f}s")  # a measurement


async def test_the_client_reports_refused_credentials_at_once(secure_kafka: SecureKafkaService) -> None:
    wrong = "not-the-password-4711"
    client = OMClient(secure_kafka.bootstrap, kafka_options=_options(secure_kafka, password=wrong))
    started = time.monotonic()
    with pytest.raises(KafkaConnectError) as caught:
        await client.start()
    elapsed = time.monotonic() - started
    assert caught.value.reason == "authentication_failed"
    text = str(caught.value)
    assert "SASL authentication failed for user 'om_stream' with SCRAM-SHA-512" in text, text
    assert wrong not in text and wrong not in repr(caught.value)
    assert elapsed < FAST_S, f"the refusal took {elapsed:.1f}s"
    assert isinstance(caught.value, ConnectionError)


@pytest.mark.parametrize(("bootstrap_host", "cafile", "expected"), [
    ("127.0.0.1", None, "self-signed certificate in certificate chain"),  # the system CAs do not know the test CA
    ("localhost", "ca", "Hostname mismatch, certificate is not valid for 'localhost'"),  # the cert names 127.0.0.1
], ids=["no-ca-file", "hostname-not-in-certificate"])
async def test_the_client_reports_a_certificate_it_cannot_verify(secure_kafka: SecureKafkaService,
                                                                 bootstrap_host: str, cafile: str | None,
                                                                 expected: str) -> None:
    bootstrap = secure_kafka.bootstrap.replace("127.0.0.1", bootstrap_host)
    client = OMClient(bootstrap, kafka_options=_options(secure_kafka, cafile=cafile))
    started = time.monotonic()
    with pytest.raises(KafkaConnectError) as caught:
        await client.start()
    assert caught.value.reason == "tls"
    assert "TLS certificate verification failed" in str(caught.value) and expected in str(caught.value)
    assert time.monotonic() - started < FAST_S


def test_the_worker_exits_at_once_on_refused_credentials(secure_kafka: SecureKafkaService, tmp_path: Path) -> None:
    """``om-stream worker`` with a wrong password: exit status 2 (a settings problem, not a crash to restart into),
    the reason in its log, the password nowhere."""
    wrong = "wrong-worker-password-0815"
    env = worker_process(secure_kafka.bootstrap, tmp_path, options={}, extra=_env(secure_kafka, wrong)).env
    log = tmp_path / "worker.log"
    started = time.monotonic()
    with log.open("wb") as out:
        done = subprocess.run([sys.executable, "-m", "om_stream", "--log-level", "info", "worker"], cwd=ROOT,
                              env=env, stdout=out, stderr=subprocess.STDOUT, timeout=120, check=False)
    elapsed = time.monotonic() - started
    text = log.read_text(errors="replace")
    assert done.returncode == 2, text[-3000:]
    assert "SASL authentication failed for user 'om_stream' with SCRAM-SHA-512" in text, text[-3000:]
    assert wrong not in text
    # the process start (imports) takes most of the elapsed time on a busy machine: time the refusal in the log
    connecting, refused = _logged_at(text, "connecting to Kafka at"), _logged_at(text, "Unable connect to")
    assert 0 <= refused - connecting < FAST_S, text[-3000:]
    print(f"worker refused {refused - connecting:.2f}s after it connected, exit after {elapsed:.1f}s")


def _logged_at(log: str, needle: str) -> float:
    """The time (seconds, from the log format's asctime) of the first line holding ``needle``."""
    line = next((line for line in log.splitlines() if needle in line), None)
    assert line is not None, f"no log line with {needle!r}:\n{log[-3000:]}"
    stamp = datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f")
    return stamp.timestamp()
