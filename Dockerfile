# The om-stream worker image, built by `make image` (infra/image/build.sh: tags om-stream:<version>), used by
# docker-compose.yml and the Helm chart. Runtime dependencies only, pinned by requirements.lock; runs as uid 10001;
# the Faust data dir (the RocksDB table store) is the working directory /var/lib/om-stream (a volume in compose, a
# PersistentVolumeClaim in the chart). Ports: 6066 the /v1/* API, 6067 /metrics and the probes.
# No `# syntax=` line: it would make BuildKit pull a frontend image, and buildah ignores it anyway.
ARG PYTHON_VERSION=3.11

# -- the runtime dependency list: [project].dependencies of pyproject.toml ----------------------------------------
# A stage of its own so that editing pyproject.toml elsewhere (version, tool settings) leaves the list, and so the
# dependency layer below, unchanged: a COPY --from is cached on the content it copies.
FROM python:${PYTHON_VERSION}-slim-bookworm AS spec
WORKDIR /spec
COPY pyproject.toml ./
RUN python -c 'import tomllib; print("\n".join(tomllib.load(open("pyproject.toml", "rb"))["project"]["dependencies"]))' \
      > runtime.in

# -- deps: the runtime closure in /opt/om-stream; pip (with setuptools, to build the package) lives in /opt/pip --
FROM python:${PYTHON_VERSION}-slim-bookworm AS deps
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore
RUN python -m venv /opt/pip && python -m venv --without-pip /opt/om-stream \
 && /opt/pip/bin/pip install -q setuptools==80.9.0
WORKDIR /src
COPY infra/image/trim-venv.sh /usr/local/bin/trim-venv
COPY requirements.lock ./
COPY --from=spec /spec/runtime.in ./
# the lock is the full closure CI installs (dev tools too): as constraints, only the runtime closure lands
RUN /opt/pip/bin/pip --python /opt/om-stream/bin/python install --no-compile --only-binary=:all: \
      --constraint requirements.lock --requirement runtime.in \
 && sh /usr/local/bin/trim-venv /opt/om-stream

# -- package: om_stream alone, laid out under /opt/package as it goes into the image ---------------------------
FROM deps AS package
COPY pyproject.toml README.md ./
COPY om_stream ./om_stream
RUN /opt/pip/bin/pip wheel -q --no-deps --no-build-isolation --wheel-dir /tmp/dist . \
 && /opt/pip/bin/pip --python /opt/om-stream/bin/python install -q --no-compile --no-deps --no-warn-script-location --root /opt/package \
      /tmp/dist/om_stream-*.whl \
 && /opt/om-stream/bin/python -m compileall -q --invalidation-mode unchecked-hash -s /opt/package -p / \
      /opt/package/opt/om-stream/lib

# -- the image -------------------------------------------------------------------------------------------------
FROM python:${PYTHON_VERSION}-slim-bookworm
# an official python image brings pip into the system interpreter: nothing in the image installs or builds at run
# time, so it goes (the Debian stand-in has none; on it this removes nothing)
RUN rm -rf /usr/local/bin/pip* /usr/local/lib/python3.*/site-packages/pip* \
      /usr/local/lib/python3.*/site-packages/setuptools* /usr/local/lib/python3.*/site-packages/wheel* \
 && groupadd --gid 10001 om \
 && useradd --uid 10001 --gid om --home-dir /var/lib/om-stream --shell /usr/sbin/nologin om \
 && mkdir -p /var/lib/om-stream && chown om:om /var/lib/om-stream
# dependencies first (large, changes with the lock), then the package (small, changes with the code)
COPY --from=deps /opt/om-stream /opt/om-stream
COPY --from=package /opt/package/ /
ENV PATH=/opt/om-stream/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    LITELLM_LOCAL_MODEL_COST_MAP=True \
    OM_WORKER_WEB_HOST=0.0.0.0 \
    OM_WORKER_METRICS_HOST=0.0.0.0
WORKDIR /var/lib/om-stream
USER 10001:10001
EXPOSE 6066 6067
# /healthz on the metrics listener: 200 once the state table is recovered and the worker is live
HEALTHCHECK --interval=10s --timeout=5s --start-period=120s --retries=3 \
  CMD ["python", "-c", "import os, sys, urllib.request; port = os.environ.get('OM_WORKER_METRICS_PORT', '6067'); sys.exit(urllib.request.urlopen(f'http://127.0.0.1:{port}/healthz', timeout=4).status != 200)"]
CMD ["om-stream", "worker"]
