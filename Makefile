# kafkawire: the two commands a new user needs are `make run` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
# Two install stamps: `make run` needs only the broker's own dependencies (a small venv, seconds
# on a warm pip cache); `make test` adds the dev and Spark extras (clients, mypy, pyspark).
RUN_STAMP := $(VENV)/.installed-run
STAMP     := $(VENV)/.installed

.PHONY: compat-cluster eos-cluster suites failover-java run test test-fast lint typecheck generate bench compat compat-fetch compat-record clean deps-system deps-java pipeline eos-soak eos-chain fuzz-soak crash-soak raft-sim quorum-failover failover eos-failover cluster-up cluster-down chaos docker-image docker-test double-kill acked-offsets

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)

$(RUN_STAMP): pyproject.toml | $(VENV)/bin/python
	@echo "kafkawire: installing the broker's dependencies into $(VENV) (first run only)..."
	@$(PY) -m pip install --disable-pip-version-check --progress-bar on -e '.[cli]' \
	  | grep -v -E '^Requirement already satisfied' || true
	@$(PY) -c 'import kafkawire.cli, trio, prometheus_client, confluent_kafka' || \
	  { echo "kafkawire: installing failed (see above)"; exit 1; }
	@touch $(RUN_STAMP)

$(STAMP): pyproject.toml | $(VENV)/bin/python
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev,spark,chaos]'
	touch $(STAMP) $(RUN_STAMP)

## run: a single node on 127.0.0.1:9092 with data in ./data, metrics and health on
## 127.0.0.1:9404 (Ctrl-C stops it cleanly). Installs only what the broker needs.
run: $(RUN_STAMP)
	$(PY) -m kafkawire serve $(ARGS)

## test: install the dev extras and system tools, fetch Apache Kafka's jars (cached in
## $$KAFKAWIRE_CACHE or ~/.cache/kafkawire), then run the whole suite: tests/ and, alongside it,
## the compat stage (every compat_tests scenario against a real Apache Kafka and against
## kafkawire) followed by the docker stage (docker-test below; DOCKER_STAGE=0 leaves it out);
## their output is printed when all are done and each exit status counts. TEST_SERIAL=1 runs
## them one after the other. KAFKAWIRE_REQUIRE_KAFKA=1: a test needing Kafka's jars fails
## instead of skipping.
## TEST_WORKERS=n: tests/ in n pytest-xdist workers (default 2; 1 runs it in one process).
TEST_WORKERS ?= 2
XDIST := $(if $(filter-out 0 1,$(TEST_WORKERS)),-n $(TEST_WORKERS) --dist loadfile)
COMPAT_LOG := .compat-stage.log
DOCKER_LOG := .docker-stage.log
DOCKER_STAGE ?= 1
test: $(STAMP) deps-system deps-java
	$(PY) -m ruff check .
	$(PY) -m mypy
	$(PY) -m compat_tests.kafka_dist fetch
ifeq ($(TEST_SERIAL),1)
	KAFKAWIRE_REQUIRE_KAFKA=1 $(PY) -m pytest $(XDIST) $(PYTEST_ARGS)
	KAFKAWIRE_REQUIRE_KAFKA=1 $(PY) -m pytest compat_tests -m compat $(PYTEST_ARGS)
	$(if $(filter 1,$(DOCKER_STAGE)),$(MAKE) --no-print-directory docker-test)
else
	{ KAFKAWIRE_REQUIRE_KAFKA=1 $(PY) -m pytest compat_tests -m compat $(PYTEST_ARGS) \
	    > $(COMPAT_LOG) 2>&1; echo $$? > $(COMPAT_LOG).rc; \
	  if [ "$(DOCKER_STAGE)" = 1 ]; then \
	    $(MAKE) --no-print-directory docker-test > $(DOCKER_LOG) 2>&1; \
	    echo $$? > $(DOCKER_LOG).rc; fi; } & bg=$$!; \
	KAFKAWIRE_REQUIRE_KAFKA=1 $(PY) -m pytest $(XDIST) $(PYTEST_ARGS); tests=$$?; \
	wait $$bg; stage=$$(cat $(COMPAT_LOG).rc); docker=0; \
	echo "=== compat stage (ran alongside tests/), exit $$stage ==="; cat $(COMPAT_LOG); \
	if [ "$(DOCKER_STAGE)" = 1 ]; then docker=$$(cat $(DOCKER_LOG).rc); \
	  echo "=== docker stage (ran alongside tests/, after the compat stage), exit $$docker ==="; \
	  cat $(DOCKER_LOG); fi; \
	test $$tests -eq 0 -a $$stage -eq 0 -a $$docker -eq 0
endif

## pipeline: the Spark clickstream example end to end on its own kafkawire (needs Java 17 + Maven)
pipeline: $(STAMP) deps-java
	$(PY) -m examples.clickstream $(ARGS)

## cluster-up / cluster-down: a local 3-node cluster of real processes in ./data/cluster
## (NODES=n, CONTROLLERS=n for dedicated controllers; prints `bootstrap: ...`)
NODES ?= 3
CONTROLLERS ?= 0
cluster-up: $(RUN_STAMP)
	$(PY) -m kafkawire cluster up --nodes $(NODES) --controllers $(CONTROLLERS)
cluster-down: $(RUN_STAMP)
	$(PY) -m kafkawire cluster down

## chaos: a stock-client workload (acks=all idempotent + transactional producers,
## read_committed consumer) for DURATION (10m) while nodes are killed, stopped, paused and,
## as root (NETNS=1), partitioned; then the history check, summary.txt and chaos.png in
## ./data/chaos (docs/CLUSTER.md). Exit status 1 when anything acknowledged was lost.
DURATION ?= 10m
chaos: $(RUN_STAMP)
	$(PY) -m pip install -q -e '.[chaos]'
	$(PY) -m kafkawire cluster chaos --duration $(DURATION) --nodes $(NODES) \
	  --dir ./data/chaos-cluster --out ./data/chaos $(if $(NETNS),--netns)

## docker-image: the base image from Debian packages (debootstrap + docker import, cached in
## $$KAFKAWIRE_CACHE or ~/.cache/kafkawire) and kafkawire:dev on it; as root it installs Debian's
## docker.io, docker-compose and debootstrap where missing and starts dockerd when no engine
## answers. docker-test: the compose cluster tests (tests/test_docker_cluster.py), bounded by
## DOCKER_TIMEOUT seconds, then the cleanup (the tests' containers, networks and volumes; the
## dockerd it started). They skip, saying why, where no engine can run. `make test` runs
## docker-test in the background after the compat stage (DOCKER_STAGE=0: not at all).
DOCKER_TIMEOUT ?= 1500
docker-image: $(STAMP)
	$(PY) -m tests.docker_env
docker-test: $(STAMP)
	@KAFKAWIRE_DOCKER_TESTS=1 timeout -k 60 $(DOCKER_TIMEOUT) $(PY) -m pytest -s \
	    tests/test_docker_cluster.py -m docker -v -rs $(PYTEST_ARGS); rc=$$?; \
	  [ $$rc -ne 124 ] || echo "docker-test: stopped after DOCKER_TIMEOUT=$(DOCKER_TIMEOUT) s"; \
	  $(PY) -m tests.docker_env cleanup; exit $$rc

## fuzz-soak: the structure-aware fuzzing of every API key and version against a live broker,
## long (FUZZ_EXAMPLES per API key, default 2000; the test run uses 6)
fuzz-soak: $(STAMP)
	KAFKAWIRE_FUZZ_EXAMPLES=$(or $(FUZZ_EXAMPLES),2000) $(PY) -m pytest tests/test_fuzz_structured.py tests/test_fuzz_live.py -q $(PYTEST_ARGS)

## crash-soak: the kill -9 durability loops with KILL9_ROUNDS kills each (default 50; the test
## run uses 5)
crash-soak: $(STAMP)
	KAFKAWIRE_KILL9_ROUNDS=$(or $(KILL9_ROUNDS),50) $(PY) -m pytest tests/test_crash_durability.py -q $(PYTEST_ARGS)

test-fast: $(STAMP)
	$(PY) -m pytest -m "not slow and not compat and not spark" $(PYTEST_ARGS)

## deps-system: Debian packages the tests use (kcat; prometheus for the metrics test, tmux for
## the CLI's terminal test); no-op when present
deps-system:
	@missing=""; \
	  { command -v kcat >/dev/null 2>&1 || command -v kafkacat >/dev/null 2>&1; } || missing="kcat"; \
	  command -v prometheus >/dev/null 2>&1 || missing="$$missing prometheus"; \
	  command -v tmux >/dev/null 2>&1 || missing="$$missing tmux"; \
	  [ -z "$$missing" ] || { echo "installing$$missing"; \
	    SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	    $$SUDO apt-get update -qq && \
	    DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq --no-install-recommends \
	      $$missing >/dev/null; }

## deps-java: Java 17+ and Maven for the Spark tests (Debian packages); no-op when present
deps-java:
	@{ command -v java >/dev/null 2>&1 && command -v mvn >/dev/null 2>&1; } || \
	  { echo "installing Java and Maven"; \
	    SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	    $$SUDO apt-get update -qq && \
	    $$SUDO apt-get install -y -qq default-jre-headless maven >/dev/null; }

## eos-soak: issue 11's loop (commit one record, abort one record, no pause) for 1,000 rounds
## with librdkafka, kafka-python, aiokafka and Kafka's Java 4.x producer on a fresh kafkawire
## (ROUNDS=n to change; BOOTSTRAP=host:port to run it against another broker, e.g. Apache Kafka)
ROUNDS ?= 1000
eos-soak: $(STAMP)
	$(PY) -m compat_tests.kafka_dist fetch
	$(PY) -m tests.eos_loop --rounds $(ROUNDS) $(if $(BOOTSTRAP),--bootstrap $(BOOTSTRAP))

## eos-chain: three consume-transform-produce stages with exactly-once and members joining,
## leaving and killed, RECORDS (100,000) records, on a fresh kafkawire then on a fresh Apache
## Kafka 4.3.1 (needs the jars: compat-fetch)
RECORDS ?= 100000
eos-chain: $(STAMP)
	$(PY) -m compat_tests.kafka_dist fetch
	$(PY) -m tests.eos_chain --records $(RECORDS) --churn-s 2 --kill
	$(PY) -m tests.eos_chain --records $(RECORDS) --churn-s 2 --kill --kafka

## eos-cluster: tests/eos_chain.py's consume-transform-produce chain with exactly-once and
## members joining and leaving (a rebalance every 2 s), EOS_RECORDS (100,000) records, on 3
## combined kafkawire nodes and then on 3 combined Apache Kafka 4.3.1 nodes, no kills
## (bench/eos_failover.py --kills 0; figures in docs/BENCHMARKS.md)
EOS_RECORDS ?= 100000
eos-cluster: $(STAMP)
	$(PY) -m compat_tests.kafka_dist fetch
	$(PY) bench/eos_failover.py --records $(EOS_RECORDS) --churn-s 2 --kills 0
	$(PY) bench/eos_failover.py --records $(EOS_RECORDS) --churn-s 2 --kills 0 --kafka

## failover: 1 controller + 3 brokers, RF=3, min.insync.replicas=2, an idempotent acks=all
## librdkafka producer, kill -9 of the partition leader KILLS (100) times: 0 acknowledged records
## lost, 0 duplicates, order kept (bench/failover.py; figures in docs/BENCHMARKS.md).
## CLIENT=kafka-python: a kafka-python producer, and a kafka-python consumer reading all along;
## COMBINED=1: 3 combined kafkawire nodes; KAFKA=1: 3 combined Apache Kafka 4.3.1 nodes
KILLS ?= 100
CLIENT ?= confluent
failover: $(STAMP)
	$(PY) bench/failover.py --kills $(KILLS) --client $(CLIENT) $(if $(KAFKA),--kafka,$(if $(COMBINED),--combined,))

## failover-java: the same kill loop with Kafka 4.3.1's Java VerifiableProducer (acks=all,
## idempotent) and VerifiableConsumer on 3 combined kafkawire nodes (KAFKA=1: on 3 combined
## Apache Kafka 4.3.1 nodes), 3 partitions, RF=3, min.insync.replicas=2; the checker reads their
## JSON events: 0 lost, 0 duplicates, no reordering (bench/failover_java.py); MINUTES=N stops
## killing after N minutes and checks what was produced
failover-java: $(STAMP)
	$(PY) -m compat_tests.kafka_dist fetch
	$(PY) bench/failover_java.py --kills $(KILLS) $(if $(KAFKA),--kafka,--combined) $(if $(MINUTES),--max-minutes $(MINUTES),)

## double-kill: kill -9 two of three combined nodes 2 s apart and restart both, TRIALS (20)
## times, with an idempotent acks=all producer writing all along: the time until every ISR is
## full again, and nothing acknowledged lost (bench/double_kill.py, issue 27; figures in
## docs/BENCHMARKS.md). KAFKA=1: three Apache Kafka 4.3.1 nodes (VERSION=4.4: 4.4.0); a trial
## whose ISRs stay short keeps the nodes' logs in data/double-kill
TRIALS ?= 20
double-kill: $(STAMP)
	$(if $(KAFKA),$(PY) -m compat_tests.kafka_dist fetch $(if $(VERSION),--line $(VERSION),),)
	$(PY) bench/double_kill.py --trials $(TRIALS) $(if $(KAFKA),--kafka $(if $(VERSION),--version $(VERSION),),)

## acked-offsets: RUNS (20) runs of KILLS_PER_RUN (5) kill -9 of a partition leader with 16
## CPU hogs starving the brokers, under an idempotent acks=all librdkafka producer: every
## acknowledged record read back once at the offset its delivery report gave
## (bench/acked_offsets.py, issue 27); a failed run keeps logs, segments, reports and Kafka's
## DumpLogSegments in data/acked-offsets. KAFKA=1: three Apache Kafka 4.3.1 nodes
RUNS ?= 20
KILLS_PER_RUN ?= 5
acked-offsets: $(STAMP)
	$(if $(KAFKA),$(PY) -m compat_tests.kafka_dist fetch,)
	$(PY) bench/acked_offsets.py --runs $(RUNS) --kills $(KILLS_PER_RUN) $(if $(KAFKA),--kafka,)

## eos-failover: tests/eos_chain.py's consume-transform-produce chain (transactions, librdkafka
## and Java members) on 3 combined kafkawire nodes (KAFKA=1: Apache Kafka 4.3.1) while KILLS
## (100) partition leaders are killed with SIGKILL, a kill every 3 s at most; judged at
## read_committed: 0 lost, 0 duplicated, 0 aborted records returned (bench/eos_failover.py);
## MINUTES=N: no kill starts after N minutes
eos-failover: $(STAMP)
	$(PY) -m compat_tests.kafka_dist fetch
	$(PY) bench/eos_failover.py --records 30000 --kill-every 3 --kills $(KILLS) $(if $(KAFKA),--kafka,) $(if $(MINUTES),--max-minutes $(MINUTES),) $(if $(KEEP),--keep,)

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

## compat-cluster: every single-node scenario on a 3-node Apache Kafka 4.3.1 and a 3-node
## kafkawire (the CI stage runs the ON_CLUSTER_CI subset), then the 3-node scenarios
## (compat_tests/README.md, "Single-node scenarios on 3 nodes")
compat-cluster: $(STAMP)
	$(PY) -m compat_tests.kafka_dist fetch
	KAFKAWIRE_COMPAT_CLUSTER=all $(PY) -m pytest compat_tests/test_compat_cluster.py -m compat $(PYTEST_ARGS)

## suites: other people's integration suites (franz-go's pkg/kgo, kafka-python's
## test/integration, librdkafka's tests/ quick suite) against fresh 3-node clusters of each of
## SYSTEMS (kafkawire,kafka; kafka44 = Apache Kafka 4.4.0), SUITES to pick; results and logs in
## ./data/suites, then the failures on kafkawire that Kafka passed (compat_tests/suites.py)
SYSTEMS ?= kafkawire,kafka
SUITES ?= franz-go,kafka-python,librdkafka
suites: $(STAMP) deps-java
	$(PY) -m compat_tests.kafka_dist fetch
	$(PY) -m compat_tests.suites run --system $(SYSTEMS) --suite $(SUITES) --out ./data/suites

## compat-record: re-record Kafka's outcomes into compat_tests/expected/ (Kafka only; the 3-node
## ones into expected/cluster3/ for the CI list: KAFKAWIRE_COMPAT_CLUSTER=all for every scenario)
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

## quorum-failover: 3 controllers + 1 broker as processes; kill -9 the active controller ROUNDS
## times (default 20) while topics are created; election / first-write p50/p99, nothing lost
ROUNDS ?= 20
quorum-failover: $(STAMP)
	$(PY) bench/quorum_failover.py --rounds $(ROUNDS)

## metadata-propagation: a topic, an ACL and a topic config written WRITES (30) times each through
## a non-leader node of a 3-node kafkawire cluster, then of a 3-node Apache Kafka (KAFKA_LINE=4.x:
## 4.3.1, 4.4: 4.4.0): when every node shows each write (bench/metadata_propagation.py)
KAFKA_LINE ?= 4.x
WRITES ?= 30
metadata-propagation: $(STAMP)
	$(PY) -m compat_tests.kafka_dist fetch --line $(KAFKA_LINE)
	$(PY) bench/metadata_propagation.py --rounds $(WRITES) --kafka-version $(KAFKA_LINE)

## cpu-starvation: a 3-node kafkawire then a 3-node Apache Kafka 4.3.1, each beside two busy
## loops, under franz-go's TestTxnEtl (STARVE_RECORDS=50000 records, PAIRS=1 alternating pairs):
## client request timeouts, time per transaction, leaders elected, controller stalls
## (bench/cpu_starvation.py; builds the franz-go test binary from the Go module proxy once)
STARVE_RECORDS ?= 50000
PAIRS ?= 1
cpu-starvation: $(STAMP)
	$(PY) -m compat_tests.kafka_dist fetch --line 4.x
	$(PY) bench/cpu_starvation.py --records $(STARVE_RECORDS) --pairs $(PAIRS)

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
