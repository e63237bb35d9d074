# kafkawire: one broker node. Build: `docker build -t kafkawire .` (context: 3 MB, .dockerignore)
# Size: 208 MB on a Debian bookworm minbase + python3 base built with debootstrap (124 MB with
# docs and locales removed: `python -m tests.docker_env`), so kafkawire and its dependencies are
# 85 MB; on python:3.11-slim (about 130 MB) expect about 215 MB. Runs as user kafkawire (uid
# 10001); data in the /data volume. A cluster: docker-compose.yml (docs/CLUSTER.md).
# The base image is a build argument, so that a locally built base works where no registry can
# be reached: `docker build --build-arg BASE_IMAGE=my-debian-python .` (it needs python3 >= 3.11
# with the venv module, e.g. Debian bookworm's python3 and python3-venv).
ARG BASE_IMAGE=python:3.11-slim

# ---- build: the virtual environment (no compiler needed: every dependency ships binary wheels)
FROM ${BASE_IMAGE} AS build
# the dependencies first, from pyproject.toml alone: a layer that a change of the code keeps
COPY pyproject.toml /src/pyproject.toml
RUN python3 -m venv /opt/kafkawire \
 && python3 -c "import tomllib; p = tomllib.load(open('/src/pyproject.toml', 'rb'))['project']; \
print('\n'.join(p['dependencies'] + p['optional-dependencies']['cli']))" > /src/requirements.txt \
 && /opt/kafkawire/bin/pip install --no-cache-dir --disable-pip-version-check \
      -r /src/requirements.txt
WORKDIR /src
COPY README.md ./
COPY kafkawire kafkawire
COPY protocol protocol
COPY log log
COPY kraft kraft
COPY groups groups
COPY txn txn
RUN /opt/kafkawire/bin/pip install --no-cache-dir --disable-pip-version-check --no-deps . \
 && /opt/kafkawire/bin/python -m pip uninstall -y -q pip setuptools

# ---- run: that environment (one layer, the same path), a non-root user ----------------------
FROM ${BASE_IMAGE}
COPY --from=build /opt/kafkawire /opt/kafkawire
RUN useradd --system --uid 10001 --home-dir /data --shell /usr/sbin/nologin kafkawire \
 && mkdir -p /data && chown kafkawire:kafkawire /data
ENV PATH=/opt/kafkawire/bin:$PATH PYTHONUNBUFFERED=1
USER kafkawire
WORKDIR /data
VOLUME /data
# 9092: Kafka protocol; 9404: /metrics (Prometheus), /health/live, /health/ready
EXPOSE 9092 9404
# ready = registered, unfenced, quorum led (docs/METRICS.md); python: no curl in slim images
HEALTHCHECK --interval=10s --timeout=5s --start-period=30s --retries=3 \
  CMD ["python3", "-c", "import sys, urllib.request as u; u.urlopen('http://127.0.0.1:9404/health/ready', timeout=4); sys.exit(0)"]
ENTRYPOINT ["kafkawire", "serve"]
CMD ["--override", "listeners=PLAINTEXT://0.0.0.0:9092", \
     "--override", "advertised.listeners=PLAINTEXT://localhost:9092", \
     "--override", "log.dir=/data", \
     "--override", "metrics.port=9404"]
