"""Start-up errors a person can act on, with real worker processes: a data folder a fresh host does not have yet is
created, and a setting the worker cannot use stops it before it starts anything, with exit status 3 and a message
that names the ``OM_*`` variable and its value, not a traceback from inside Faust."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from om_stream.devservices.jvm import free_port
from om_stream.runtime.worker.main import EXIT_REFUSED
from tests.support.worker import WorkerProcess, agent_for, message_record, running_worker, worker_process


def _refused_before_kafka(worker: WorkerProcess) -> str:
    """The worker ended by itself with EXIT_REFUSED and never reached for Kafka; its log."""
    worker.start()
    assert worker.wait_exit(60) == EXIT_REFUSED
    log = worker.tail(20_000)
    assert "refuses to start" in log and "nothing was started" in log
    assert "Traceback" not in log
    assert "connecting to kafka" not in log.lower()
    return log


async def test_a_data_folder_that_does_not_exist_yet_is_created_and_the_worker_starts(kafka_bootstrap: str,
                                                                                       tmp_path: Path) -> None:
    data = tmp_path / "var" / "lib" / "om-stream"
    async with running_worker(kafka_bootstrap, tmp_path, options={},
                              extra={"OM_WORKER_DATA_DIR": str(data)}) as worker:
        assert data.is_dir()
        assert (data / f"{worker.env['OM_WORKER_APP_ID']}-data").is_dir()  # Faust's own folder, inside it
        async with agent_for(worker) as agent:
            await agent.send(message_record("fresh-host", 0, "user", "the first message on a new host"),
                             key=b"fresh-host")
            context = await agent.context_through("fresh-host", "fresh-host-m0")
        assert context["through_message_id"] == "fresh-host-m0"


async def test_a_data_folder_that_cannot_be_created_stops_the_worker_naming_the_setting(tmp_path: Path) -> None:
    blocker = tmp_path / "om-stream"
    blocker.write_text("a file where the data folder's parent should be")
    wanted = blocker / "data"
    # nothing listens at this bootstrap address: a worker that reached for Kafka would wait there, not exit
    worker = worker_process(f"127.0.0.1:{free_port()}", tmp_path, options={},
                            extra={"OM_WORKER_DATA_DIR": str(wanted)})
    log = _refused_before_kafka(worker)
    assert f"OM_WORKER_DATA_DIR: {str(wanted)!r}" in log
    assert f"{blocker} is a file, not a folder" in log
    assert blocker.is_file()


@pytest.mark.parametrize("listener", ["OM_WORKER_WEB_PORT", "OM_WORKER_METRICS_PORT"])
async def test_a_listener_port_another_process_holds_stops_the_worker_naming_the_setting(
        tmp_path: Path, listener: str) -> None:
    worker = worker_process(f"127.0.0.1:{free_port()}", tmp_path, options={})
    port = int(worker.env[listener])
    with socket.socket() as taken:
        taken.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        taken.bind(("127.0.0.1", port))
        taken.listen()
        log = _refused_before_kafka(worker)
    assert f"{listener}: {port}: the port is in use on '127.0.0.1'" in log
    assert (tmp_path / f"{worker.env['OM_WORKER_APP_ID']}-data").is_dir()  # what could be done was, harmlessly
