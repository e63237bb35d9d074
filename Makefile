# kafkawire: the two commands a new user needs are `make run` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: run test test-fast lint typecheck generate bench raft-sim compat compat-fetch compat-record clean deps-system deps-java pipeline

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)

$(STAMP): pyproject.toml | $(VENV)/bin/python
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev,spark]'
	touch $(STAMP)

## run: a single node on 127.0.0.1:9092 with data in ./data (Ctrl-C stops it cleanly)
run: $(STAMP)
	$(PY) -m kafkawire serve $(ARGS)

## test: install the dev extras and system tools, fetch Apache Kafka's jars (cached in
## $$KAFKAWIRE_CACHE or ~/.cache/kafkawire), then run the whole suite: tests/, then the compat
## stage (every compat_tests scenario against a real Apache Kafka and against kafkawire).
## KAFKAWIRE_REQUIRE_KAFKA=1: a test needing Kafka's jars fails instead of skipping.
test: $(STAMP) deps-system deps-java
	$(PY) -m ruff check .
	$(PY) -m mypy
	$(PY) -m compat_tests.kafka_dist fetch
	KAFKAWIRE_REQUIRE_KAFKA=1 $(PY) -m pytest $(PYTEST_ARGS)
	KAFKAWIRE_REQUIRE_KAFKA=1 $(PY) -m pytest compat_tests -m compat $(PYTEST_ARGS)

## pipeline: the Spark clickstream example end to end on its own kafkawire (needs Java 17 + Maven)
pipeline: $(STAMP) deps-java
	$(PY) -m examples.clickstream $(ARGS)

test-fast: $(STAMP)
	$(PY) -m pytest -m "not slow and not compat and not spark" $(PYTEST_ARGS)

## deps-system: Debian packages the client tests use (kcat); no-op when present
deps-system:
	@command -v kcat >/dev/null 2>&1 || command -v kafkacat >/dev/null 2>&1 || \
	  { echo "installing kcat"; \
	    SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	    $$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq kcat >/dev/null; }

## deps-java: Java 17+ and Maven for the Spark tests (Debian packages); no-op when present
deps-java:
	@{ command -v java >/dev/null 2>&1 && command -v mvn >/dev/null 2>&1; } || \
	  { echo "installing Java and Maven"; \
	    SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	    $$SUDO apt-get update -qq && \
	    $$SUDO apt-get install -y -qq default-jre-headless maven >/dev/null; }

lint: $(STAMP)
	$(PY) -m ruff check .

typecheck: $(STAMP)
	$(PY) -m mypy

## generate: regenerate protocol/_generated from ../shared/kafka-protocol
generate: $(STAMP)
	$(PY) -m protocol.generator

## compat: fetch Apache Kafka jars once (cache: $$KAFKAWIRE_CACHE or ~/.cache/kafkawire), then run
## every compat_tests scenario against Kafka and kafkawire and compare (compat_tests/README.md)
compat: $(STAMP)
	$(PY) -m compat_tests.kafka_dist fetch
	$(PY) -m pytest compat_tests -m compat $(PYTEST_ARGS)

compat-fetch: $(STAMP)
	$(PY) -m compat_tests.kafka_dist fetch

## compat-record: re-record Kafka's outcomes into compat_tests/expected/ (Kafka only)
compat-record: $(STAMP)
	$(PY) -m compat_tests.kafka_dist fetch
	KAFKAWIRE_COMPAT_TARGETS=kafka KAFKAWIRE_COMPAT_RECORD=1 $(PY) -m pytest compat_tests -m compat $(PYTEST_ARGS)

bench: $(STAMP)
	$(PY) bench/run.py

## raft-sim: the deterministic Raft simulation over SEEDS seeds (default 10000) on JOBS processes;
## a failing seed replays with `python -m kraft.raft.sim --seed N --trace`
SEEDS ?= 10000
JOBS  ?= 2
raft-sim: $(STAMP)
	$(PY) bench/raft_sim.py --seeds $(SEEDS) --jobs $(JOBS)

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
