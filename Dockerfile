# syntax=docker/dockerfile:1
# The om-stream worker image: `docker build -t om-stream .` (used by docker-compose.yml and the Helm chart).
# Runtime dependencies only, pinned by requirements.lock; runs as uid 10001; the Faust data dir (table store) is the
# working directory /var/lib/om-stream (a volume in compose, a PersistentVolumeClaim in the chart).
ARG PYTHON_VERSION=3.11

FROM python:${PYTHON_VERSION}-slim-bookworm AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
RUN python -m venv /opt/om-stream
COPY requirements.lock pyproject.toml README.md ./
COPY om_stream ./om_stream
# the lock is the full closure CI installs (dev tools too): used as constraints, only the runtime closure lands
RUN /opt/om-stream/bin/pip install --constraint requirements.lock . \
 && /opt/om-stream/bin/python -m compileall -q /opt/om-stream/lib

FROM python:${PYTHON_VERSION}-slim-bookworm
RUN groupadd --gid 10001 om \
 && useradd --uid 10001 --gid om --home-dir /var/lib/om-stream --shell /usr/sbin/nologin om \
 && mkdir -p /var/lib/om-stream && chown om:om /var/lib/om-stream
COPY --from=build /opt/om-stream /opt/om-stream
ENV PATH=/opt/om-stream/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    LITELLM_LOCAL_MODEL_COST_MAP=True \
    OM_WORKER_WEB_HOST=0.0.0.0
WORKDIR /var/lib/om-stream
USER 10001:10001
EXPOSE 6066
HEALTHCHECK --interval=10s --timeout=5s --start-period=120s --retries=3 \
  CMD ["python", "-c", "import urllib.request,sys; sys.exit(urllib.request.urlopen('http://127.0.0.1:6066/healthz', timeout=4).status != 200)"]
CMD ["om-stream", "worker"]
