"""The container image, built by ``infra/image/build.sh`` (``make image``) and run for real: ``om-stream demo`` in it,
and ``om-stream worker`` in it against real Kafka until its HEALTHCHECK passes and an agent's message gets a context.
Also what the image must not be: run as root, carry compilers or pip, lack the RocksDB table store.
"""

from __future__ import annotations

import re
import secrets
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from om_stream.client import ClientTopics, MessageRecord, OMClient
from tests.deploy.image_support import BuiltImage, build_image, container_name, env_args, host_uid_of
from tests.support.worker import message_record, worker_process

IMAGE_UID = 10001
DATA_DIR = "/var/lib/om-stream"  # the image's working directory, the worker's data dir


@pytest.fixture(scope="module")
def image() -> BuiltImage:
    return build_image()


def test_the_demo_runs_in_the_image_as_the_unprivileged_user(image: BuiltImage) -> None:
    engine = image.engine
    with container_name("om-image-demo", engine) as name:
        done = engine.run("run", "--name", name, "--network=none", image.tag,
                          "sh", "-c", "id -u && exec om-stream demo", timeout=300)
    uid, _, report = done.stdout.partition("\n")
    assert int(uid) == IMAGE_UID
    # the offline models read the whole sample conversation, observed and reflected it, and condensed the context
    summary = report[report.index("\nSummary"):]
    assert re.search(r"messages\s+56 \(", summary), summary
    observations = re.search(r"observations\s+(\d+) lines, (\d+) tokens", summary)
    calls = re.search(r"model calls\s+\d+ \(Observer (\d+), Reflector (\d+)\)", summary)
    compression = re.search(r"compression\s+([\d.]+)x", summary)
    assert observations and calls and compression, summary
    assert int(observations.group(1)) > 0 and int(calls.group(1)) > 0 and int(calls.group(2)) > 0, summary
    assert float(compression.group(1)) > 1.0, summary


def test_the_image_holds_no_build_tools_and_opens_a_rocksdb_table(image: BuiltImage) -> None:
    probe = (
        "for tool in gcc cc c++ g++ clang make ld as pip pip3 pip3.11 easy_install wheel; do"
        "  command -v $tool; done; "
        "python -c 'import importlib.util as u; print(\"importable:\", "
        "[m for m in (\"pip\", \"setuptools\", \"wheel\") if u.find_spec(m)])'"
    )
    found = image.engine.run("run", "--rm", "--network=none", image.tag, "sh", "-c", probe).stdout.splitlines()
    assert found == ["importable: []"], f"build tools in the image: {found}"

    # the table store the chart uses (rocksdict under Faust's rocksdb:// driver), written and read back in the image
    roundtrip = (
        "import sys, rocksdict; db = rocksdict.Rdict(sys.argv[1]); db[b'thread'] = b'state'; db.close(); "
        "db = rocksdict.Rdict(sys.argv[1]); print(db[b'thread'].decode()); db.close()"
    )
    done = image.engine.run("run", "--rm", "--network=none", image.tag,
                            "python", "-c", roundtrip, f"{DATA_DIR}/probe.db")
    assert done.stdout.strip() == "state"


@pytest.fixture
def worker_container(image: BuiltImage, kafka_bootstrap: str, tmp_path: Path) -> Iterator[tuple[str, dict[str, str]]]:
    """``om-stream worker`` (the image's CMD) on the host network, RocksDB table store, offline model."""
    spec = worker_process(kafka_bootstrap, tmp_path, options={"observation": {"messageTokens": 200}}, store="memory")
    env = {key: value for key, value in spec.env.items() if key.startswith("OM_")}
    env |= {"OM_WORKER_DATA_DIR": DATA_DIR, "OM_WORKER_TABLE_STORE": "rocksdb://",
            "OM_WORKER_API_TOKEN": secrets.token_urlsafe(24)}
    env.pop("OM_MEMORY_SQLITE_PATH", None)
    with container_name("om-image-worker", image.engine) as name:
        image.engine.run("run", "--detach", "--name", name, "--network=host", *env_args(env), image.tag)
        yield name, {**env, **{f"topic.{key}": value for key, value in spec.topics.items()}}


async def test_the_worker_in_the_image_becomes_healthy_and_answers_an_agent(
        image: BuiltImage, kafka_bootstrap: str, worker_container: tuple[str, dict[str, str]]) -> None:
    engine = image.engine
    name, env = worker_container
    started = time.monotonic()
    while not engine.healthy(name):
        state = engine.inspect(name)["State"]
        assert isinstance(state, dict)
        logs = engine.run("logs", name, check=False)
        output = (logs.stdout + logs.stderr)[-4000:]
        assert state["Running"], f"the worker exited ({state.get('ExitCode')}):\n{output}"
        assert time.monotonic() - started < 150, f"HEALTHCHECK still failing after 150s:\n{output}"
        time.sleep(1)

    # the process the kernel runs for the container is the image's user, not root
    pid = engine.inspect(name)["State"]
    assert isinstance(pid, dict)
    assert host_uid_of(int(pid["Pid"])) == IMAGE_UID

    topics = ClientTopics(messages=env["topic.messages"], events=env["topic.events"], context=env["topic.context"],
                          recall_requests=env["topic.recall_requests"], recall_responses=env["topic.recall_responses"])
    thread = "image-thread-1"
    async with OMClient(kafka_bootstrap, topics=topics) as om:
        sent = await om.publish(MessageRecord.model_validate(
            message_record(thread, 0, "user", "the worker in the image reads this and answers with a context")))
        context = await om.await_context(thread, sent.message_id, timeout=60)
    assert context.thread_id == thread and context.through_message_id == sent.message_id
    assert "answers with a context" in context.model_dump_json()

    # the state table lives in RocksDB on the data dir (what the chart's volume holds)
    stores = engine.run("exec", name, "find", DATA_DIR, "-name", "CURRENT", "-path", "*tables*").stdout.split()
    assert stores, "no RocksDB table under the data dir"
    assert all(path.startswith(f"{DATA_DIR}/{env['OM_WORKER_APP_ID']}-data/") for path in stores), stores
