"""Every PromQL query of every Grafana dashboard panel returns data from a real Prometheus scraping a real worker.

The worker runs on real Kafka; its Observer/Reflector calls go through the model gateway and litellm to a scripted
OpenAI-compatible server on loopback (``om_stream.testing.fake_openai``) as ``openai/gpt-4o-mini``, so spend comes
from litellm's bundled price map exactly as in production. The script fails some calls (retries), reports cached
prompt tokens, and one tenant has a zero token budget (budget rejections). Prometheus (Debian's package, installed
into a cache by ``infra/tools/install-prometheus.sh``) scrapes the worker every second; then every panel target,
with the Grafana variables substituted, must return a series with a finite value, and every template variable must
have values.

The worker is the production ``om-stream worker``; the scenario's budget and retries are ``OM_GATEWAY_*`` settings.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import re
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from om_stream.devservices.jvm import free_port
from om_stream.testing.fake_openai import FailurePlan, FakeOpenAI, RecordedRequest, Reply, Response, Usage
from tests.support.worker import WorkerProcess, agent_for, message_record, worker_process

ROOT = Path(__file__).resolve().parents[2]
DASHBOARDS = sorted((ROOT / "grafana" / "dashboards").glob("*.json"))
INSTALL = ROOT / "infra" / "tools" / "install-prometheus.sh"
MODEL = "openai/gpt-4o-mini"
CAPPED = "tenant-without-budget"  # its token budget is 0: every call for it is refused
NAMESPACE = "om-dashboards-test"
RATE_INTERVAL_S = 10
OPTIONS: dict[str, Any] = {"observation": {"messageTokens": 150, "bufferTokens": 0.25, "blockAfter": 1.2},
                           "reflection": {"observationTokens": 250}}
WORDS = "the deployment moved to friday because the staging cluster needs a new partition plan"


# -- the scripted model provider -------------------------------------------------------------------------------

def _answer(request: RecordedRequest) -> Response:
    prompt = request.prompt_text
    tokens = max(50, len(prompt) // 4)
    if "New message history to observe" in prompt:
        n = request.index
        text = ("<observations>\nDate: Mar 1, 2026\n"
                f"* 🔴 (09:{n % 60:02d}) User stated the deployment moved to friday (note {n}).\n"
                f"* 🟡 (09:{n % 60:02d}) User explained the staging cluster needs a new partition plan first.\n"
                f"* 🟡 (09:{n % 60:02d}) Assistant proposed checking consumer lag before the rollout window.\n"
                "</observations>")
    else:  # a Reflector that does not compress: the engine condenses its answers (om_condensations_total)
        lines = "\n".join(f"* 🟡 (10:{i:02d}) User's deployment moved to friday, as said before ({i})."
                          for i in range(40))
        text = f"<observations>\nDate: Mar 1, 2026\n* 🔴 User's deployment moved to friday.\n{lines}\n</observations>"
    return Reply(text, usage=Usage(tokens, len(text) // 4, cached_tokens=tokens // 4))


# -- Prometheus ------------------------------------------------------------------------------------------------

def _prometheus_binary() -> str:
    explicit = os.environ.get("OM_PROMETHEUS_BIN")
    if explicit:
        return explicit
    out = subprocess.run(["bash", str(INSTALL)], check=False, capture_output=True, text=True, timeout=600)
    if out.returncode != 0:
        pytest.fail(f"install-prometheus.sh failed:\n{out.stderr[-3000:]}", pytrace=False)
    return out.stdout.strip().splitlines()[-1].split("=", 1)[1]


def _get(url: str, timeout: float = 10.0) -> Any:
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return json.loads(response.read())


class Prometheus:
    def __init__(self, binary: str, tmp: Path, target: str) -> None:
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        config = tmp / "prometheus.yml"
        config.write_text(json.dumps({  # YAML is a superset of JSON
            "global": {"scrape_interval": "1s", "scrape_timeout": "900ms", "evaluation_interval": "1s"},
            "scrape_configs": [{"job_name": "om-stream", "metrics_path": "/metrics",
                                "static_configs": [{"targets": [target], "labels": {"namespace": NAMESPACE}}]}]}))
        self.log = tmp / "prometheus.log"
        with self.log.open("wb") as out:
            self.popen = subprocess.Popen(
                [binary, f"--config.file={config}", f"--storage.tsdb.path={tmp / 'tsdb'}",
                 f"--web.listen-address=127.0.0.1:{self.port}", "--storage.tsdb.retention.time=1h",
                 "--log.level=warn"], stdout=out, stderr=subprocess.STDOUT, start_new_session=True)

    def wait_ready(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.popen.poll() is not None:
                raise AssertionError(f"prometheus exited:\n{self.log.read_text()[-3000:]}")
            try:
                with urllib.request.urlopen(f"{self.base}/-/ready", timeout=2) as response:
                    if response.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.2)
        raise AssertionError(f"prometheus not ready:\n{self.log.read_text()[-3000:]}")

    def api(self, path: str, **params: str) -> Any:
        body = _get(f"{self.base}/api/v1/{path}?{urllib.parse.urlencode(params)}")
        assert body["status"] == "success", body
        return body["data"]

    def stop(self) -> None:
        if self.popen.poll() is None:
            self.popen.terminate()
            try:
                self.popen.wait(15)
            except subprocess.TimeoutExpired:
                self.popen.kill()


# -- dashboards ------------------------------------------------------------------------------------------------

def _targets() -> list[tuple[str, dict[str, Any]]]:
    found = []
    for path in DASHBOARDS:
        board = json.loads(path.read_text())
        for panel in board["panels"]:
            for target in panel["targets"]:
                found.append((f"{board['title']} / {panel['title']} / {target['refId']}", target))
    return found


def _variables() -> list[tuple[str, str]]:
    return [(f"{json.loads(p.read_text())['title']} / ${v['name']}", v["query"]["query"])
            for p in DASHBOARDS for v in json.loads(p.read_text())["templating"]["list"] if v["type"] == "query"]


def grafana_expr(expr: str, range_s: int) -> str:
    """The query Grafana sends with every variable at "All" (``.*``) and the macros of a ``range_s`` window."""
    values = {"$__rate_interval": f"{RATE_INTERVAL_S}s", "$__range_s": str(range_s), "$__range": f"{range_s}s",
              "$__interval": "1s", "$namespace": ".*", "$model": ".*", "$role": ".*"}
    for name in sorted(values, key=len, reverse=True):
        expr = expr.replace(name, values[name])
    assert "$" not in expr, f"a variable Grafana would fill is not substituted: {expr}"
    return expr


def _finite(values: list[Any]) -> bool:
    return any(math.isfinite(float(v[1])) for v in values)


# -- the scenario ----------------------------------------------------------------------------------------------

def _scrape(port: int) -> dict[str, float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        text = response.read().decode()
    totals: dict[str, float] = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name = re.split(r"[{ ]", line, maxsplit=1)[0]
            totals[name] = totals.get(name, 0.0) + float(line.rsplit(" ", 1)[1])
    return totals


NEEDED = {"om_model_cost_usd_total", "om_model_retries_total", "om_model_budget_rejections_total",
          "om_generations_total", "om_buffer_to_activation_seconds_count", "om_dlq_records_total",
          "om_message_to_context_seconds_count", "om_model_cached_input_tokens_total", "om_condensations_total",
          "om_reflection_backoffs_total"}


@pytest.fixture
def fake_provider() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(default=_answer, failures=FailurePlan(rate=0.15, seed=8, kinds=("500",))) as server:
        yield server


@pytest.fixture
def scenario_worker(kafka_bootstrap: str, tmp_path: Path, fake_provider: FakeOpenAI) -> Iterator[WorkerProcess]:
    process = worker_process(kafka_bootstrap, tmp_path, options=OPTIONS, extra={
        "OM_MEMORY_MODEL": MODEL, "OM_MEMORY_API_BASE": fake_provider.base_url,
        "LITELLM_LOCAL_MODEL_COST_MAP": "True", "OM_WORKER_TIMER_INTERVAL_S": "0.5",
        # the scenario's gateway: one tenant without budget, fast retries
        "OM_GATEWAY_BUDGET_OVERRIDES": json.dumps({CAPPED: 0}), "OM_GATEWAY_MAX_RETRIES": "3",
        "OM_GATEWAY_BACKOFF_INITIAL_S": "0.05", "OM_GATEWAY_BACKOFF_MAX_S": "0.2", "OM_GATEWAY_TIMEOUT_S": "10"})
    process.start()
    try:
        yield process
    finally:
        process.stop()


async def _traffic(worker: WorkerProcess) -> None:
    async with agent_for(worker) as agent:
        async def play(thread: str, resource: str, turns: int, wait: bool) -> None:
            for turn in range(turns):
                for role, index in (("user", 2 * turn), ("assistant", 2 * turn + 1)):
                    record = message_record(thread, index, role, f"{thread} turn {turn}: {WORDS} {turn}",
                                            resource=resource)
                    await agent.send(record, key=thread.encode())
                    if wait and role == "user":
                        await agent.context_through(thread, record["message_id"], timeout=90)

        await agent.send(b"{not json", key=b"dashboards-dlq")
        await asyncio.gather(*(play(f"spend-{i}", "r1", 14, True) for i in range(3)),
                             play("capped-0", CAPPED, 6, False))


async def test_every_dashboard_query_returns_data_from_prometheus(scenario_worker: WorkerProcess,
                                                                  tmp_path: Path) -> None:
    binary = _prometheus_binary()
    prometheus = Prometheus(binary, tmp_path, f"127.0.0.1:{scenario_worker.metrics_port}")
    try:
        prometheus.wait_ready()
        started = time.time()
        await scenario_worker.wait_ready(timeout=120)
        await _traffic(scenario_worker)

        deadline = time.monotonic() + 120
        while True:
            seen = _scrape(scenario_worker.metrics_port)
            missing = sorted(name for name in NEEDED if seen.get(name, 0) <= 0)
            if not missing:
                break
            if time.monotonic() > deadline:
                raise AssertionError(f"the worker never reported {missing}:\n{scenario_worker.tail()}")
            await asyncio.sleep(1)
        await asyncio.sleep(RATE_INTERVAL_S / 2 + 3)  # a few more scrapes after the last increments

        ended = time.time()
        range_s = int(ended - started) + 1
        targets = _targets()
        assert len(targets) >= 12
        empty = []
        for where, target in targets:
            expr = grafana_expr(target["expr"], range_s)
            if target.get("instant"):
                result = prometheus.api("query", query=expr, time=f"{ended:.3f}")["result"]
                ok = any(math.isfinite(float(r["value"][1])) for r in result)
            else:
                result = prometheus.api("query_range", query=expr, start=f"{started:.3f}", end=f"{ended:.3f}",
                                        step="1")["result"]
                ok = any(_finite(r["values"]) for r in result)
            if not ok:
                empty.append(f"{where}: {expr} -> {json.dumps(result)[:300]}")
        for where, query in _variables():
            match = re.fullmatch(r"label_values\((.+),\s*(\w+)\)", query)
            assert match, f"{where}: only label_values(metric, label) variables are used: {query}"
            series = prometheus.api("series", **{"match[]": grafana_expr(match.group(1), range_s),
                                                  "start": f"{started:.3f}", "end": f"{ended:.3f}"})
            if not {s.get(match.group(2)) for s in series} - {None, ""}:
                empty.append(f"{where}: {query} has no values")
        assert empty == [], "dashboard queries without data:\n" + "\n".join(empty)

        # the spend numbers are litellm's prices for the tokens the provider reported, not a placeholder
        spent = prometheus.api("query", query=f"sum(om_model_cost_usd_total{{namespace=\"{NAMESPACE}\"}})",
                               time=f"{ended:.3f}")["result"]
        assert spent and float(spent[0]["value"][1]) > 0
        roles = prometheus.api("query", query="sum by (om_role) (om_model_cost_usd_total)",
                               time=f"{ended:.3f}")["result"]
        assert {r["metric"]["om_role"] for r in roles} >= {"observer", "reflector"}
    finally:
        prometheus.stop()
