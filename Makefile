# om-stream task runner. CI runs the same targets through .ci/run.
SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV ?= .venv
PY := $(VENV)/bin/python
export LITELLM_LOCAL_MODEL_COST_MAP ?= True

.DEFAULT_GOAL := help
.PHONY: help install test test-unit test-clients lint type bench bench-engine bench-e2e bench-tracing-cpu bench-wire demo services-up services-down services-status clean

help: ## list the targets
	@grep -hE '^[a-zA-Z0-9_-]+:.*?## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*?## "}; {printf "  %-18s %s\n", $$1, $$2}'

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip

# the environment is rebuilt when the pinned dependencies change; `make install` forces it
INSTALLED := $(VENV)/.om-stream-installed

$(INSTALLED): requirements.lock pyproject.toml | $(PY)
	$(PY) -m pip install -q -r requirements.lock
	$(PY) -m pip install -q --no-deps -e .
	$(PY) -m om_stream.devservices fetch
	touch $@

install: ## create .venv, install the pinned dependencies and om-stream, fetch the Kafka/Cassandra jars and build Jaeger (cached)
	rm -f $(INSTALLED)
	$(MAKE) $(INSTALLED)

test: $(INSTALLED) tools-podman ## run every test tier (unit, component, contract, integration on real Kafka and Cassandra)
	$(PY) -m pytest

test-unit: ## unit tests only (no services)
	$(PY) -m pytest tests/unit

.PHONY: test-cluster
test-cluster: $(INSTALLED) ## workers on a three-node Cassandra cluster (replication 3, LOCAL_QUORUM) while nodes die, stall the store and return with old data
	$(PY) -m pytest tests/cluster

test-clients: $(INSTALLED) ## TypeScript and Go clients: shared vectors, unit tests, end to end on real Kafka with a worker, one trace from each agent through the worker into Jaeger (Python's run in `make test`)
	cd clients/ts && npm ci --no-audit --no-fund --loglevel=error && npm test
	cd clients/go && go test -count=1 ./...
	$(PY) -m pytest clients/test_clients_e2e.py clients/test_clients_tracing.py

lint: ## ruff
	$(VENV)/bin/ruff check om_stream tests bench clients schemas

type: ## mypy --strict on the package
	$(VENV)/bin/mypy

bench: bench-engine bench-wire bench-e2e bench-store bench-faults bench-chaos bench-lifecycle ## run every benchmark and print the figures

bench-e2e: ## worker throughput vs bare aiokafka and bare Faust, publish->context latency, on real Kafka, in memory and on Cassandra (medians of 3)
	$(PY) bench/e2e.py --trials 3 --workers 1,2 --split
	$(PY) bench/e2e.py --trials 3 --store cassandra --workers 1,2

.PHONY: bench-chaos
bench-chaos: ## join/leave/SIGKILL rounds across 3 workers (lost, duplicated, regressions, p99, time to serve again), then table recovery time memory vs RocksDB
	$(PY) bench/chaos.py --trials 3
	$(PY) bench/table_recovery.py --runs 3

bench-faults: ## 300 turns through litellm to a local server failing 30% of calls: no message lost, context bounded
	$(PY) bench/fault_run.py

bench-tracing: ## one worker with tracing off, at 10 % and at 100 % sampling into a real Jaeger, in the same trials: throughput and p99 publish->context (medians of 3)
	$(PY) bench/e2e.py --trials 3 --workers 1 --wire v1 --traced 0.1,1

bench-tracing-cpu: ## the memory agent's CPU per message with tracing off, at 0, 10 and 100 % (in process, spans encoded as OTLP; medians of 5 interleaved rounds), records without and with a traced agent's headers
	$(PY) bench/tracing_cpu.py --rounds 5
	$(PY) bench/tracing_cpu.py --rounds 5 --upstream

bench-wire: ## CPU microseconds per context publication, om.context/v1 against om.context/v2 (as first built, and the worker's path), on a long conversation of each shape (medians of 5)
	$(PY) bench/wire.py --runs 5

bench-engine: ## engine overhead and drift, model tokens, Reflector calls and the largest observation log, on the 2000-turn reference conversation and six conversation shapes (offline model)
	$(PY) bench/engine.py --runs 5

.PHONY: bench-instructions
bench-instructions: ## instructions per turn (engine, 200 turns of the project conversation) and per message (memory processor, tracing off) under callgrind: the same count every run, whatever the machine's load (~10 min; TREE=other/checkout to measure another tree)
	$(PY) bench/instructions.py $(if $(TREE),--tree $(TREE))

.PHONY: bench-lifecycle
bench-lifecycle: ## erase latency (thread; resource of 100 threads) across 3 workers, the stream's throughput during erasures, export rate and memory for 100,000 messages (SQLite, Cassandra)
	$(PY) bench/lifecycle.py --trials 3

# the `bench` extra of pyproject.toml (matplotlib), installed without touching om-stream's own install
BENCH_INSTALLED := $(VENV)/.om-stream-bench-installed
$(BENCH_INSTALLED): pyproject.toml | $(INSTALLED)
	$(PY) -c "import tomllib; print('\n'.join(tomllib.load(open('pyproject.toml', 'rb'))['project']['optional-dependencies']['bench']))" \
		| xargs $(PY) -m pip install -q
	touch $@

DURATION ?= 1h
.PHONY: bench-soak
bench-soak: $(BENCH_INSTALLED) ## DURATION (1h; 600 = 10 min) of traffic at half a worker's measured capacity, 2000 threads, 3 workers with a SIGKILL, a leave and a join every 3 min, 10% of model calls failing, one node of a 3-node Cassandra restarted; prints RSS, fds, tasks, maps, lag, p50/p99 per interval, then lost/duplicated/regressed and model calls paid twice; writes docs/soak-<minutes>min.{csv,json,png}
	$(PY) bench/soak.py --duration $(DURATION)

.PHONY: bench-store
bench-store: ## messages/s written to Cassandra and recall p50/p99 over 100,000 stored messages (starts Cassandra if OM_CASSANDRA_HOSTS is unset)
	$(PY) bench/store_bench.py --runs 3

demo: $(INSTALLED) ## replay a sample conversation through Observational Memory (no broker, no API key)
	$(VENV)/bin/om-stream demo

services-up: ## start Apache Kafka, Apache Cassandra and Jaeger in the background (CASSANDRA_NODES=3: a cluster); prints their addresses
	$(PY) -m om_stream.devservices up $(if $(CASSANDRA_NODES),--cassandra-nodes $(CASSANDRA_NODES))

services-down: ## stop what services-up started
	$(PY) -m om_stream.devservices down

services-status: ## show the running services
	$(PY) -m om_stream.devservices status

clean: ## remove caches (not the venv, not the jar cache)
	rm -rf .pytest_cache .mypy_cache .ruff_cache .hypothesis build *.egg-info

# -- observability and deployment (grafana/, helm/om-stream/, docker-compose.yml) ---------------------------------
.PHONY: tools-prometheus tools-podman tools-helm tools-kube tools-compose chart-dashboards chart-sync docs-operate test-deploy test-deploy-live

.PHONY: tools-jaeger
tools-jaeger: ## build Jaeger v2 (the tracing backend of the tests) from the Go module proxy into ~/.cache/om-stream/tools (cached; ~15 min cold)
	bash infra/tools/install-jaeger.sh

tools-prometheus: ## unpack Debian's prometheus into ~/.cache/om-stream/tools (cached; for the dashboard proof)
	bash infra/tools/install-prometheus.sh

tools-podman: ## install podman with runc from Debian when missing (podman-compose needs it even for `config`)
	bash infra/tools/install-podman.sh

tools-helm: ## build helm and kubeconform from the Go module proxy and lay out the Kubernetes schemas (cached)
	bash infra/tools/install-helm-tools.sh

tools-compose: ## build Docker Compose v2 from the Go module proxy and fetch the compose schema (cached; ~10 min cold)
	bash infra/tools/install-compose.sh
	bash infra/tools/install-compose-schema.sh

tools-kube: ## build kube-apiserver, controller manager, scheduler and kwok, install etcd, fetch the CRDs (cached; ~6 min cold)
	bash infra/tools/install-kube-tools.sh

chart-dashboards: ## copy grafana/dashboards into the Helm chart (a contract test fails on drift)
	cp grafana/dashboards/*.json helm/om-stream/dashboards/

chart-sync: chart-dashboards ## regenerate the chart's settings/secrets schema from settings.py
	$(PY) -m om_stream.observability.settings_doc --sync-chart helm/om-stream/values.schema.json

docs-operate: ## regenerate the settings and metrics tables of docs/operate.md and the topics' table of docs/lifecycle.md
	$(PY) -m om_stream.observability.settings_doc --write docs/operate.md
	$(PY) -m om_stream.observability.settings_doc --write docs/lifecycle.md

.PHONY: image
image: ## build the worker image om-stream:<version> (podman or docker; base image made with debootstrap, cached)
	bash infra/image/build.sh

# the chart, compose and dashboard checks of test-deploy that `make test` runs too (they need the tools installed)
DEPLOY_CHECKS = tests/contract/test_metrics_contract.py tests/contract/test_helm_chart.py \
	tests/contract/test_helm_operations.py tests/contract/test_helm_roles.py tests/contract/test_compose.py \
	tests/contract/test_dashboards_grafana_models.py tests/integration/test_dashboards_prometheus.py

test-deploy: $(INSTALLED) tools-prometheus tools-podman tools-helm tools-kube tools-compose ## the image built and run, the chart on a real API server, compose and dashboards checked by their own tools
	$(PY) -m pytest $(DEPLOY_CHECKS) tests/deploy

test-deploy-live: $(INSTALLED) tools-podman tools-helm tools-kube ## only what test-deploy adds to `make test`: the image built and run, the chart on a real API server (CI runs it after `make test`)
	$(PY) -m pytest tests/deploy
