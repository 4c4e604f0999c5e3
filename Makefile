# Scout. Two commands for a newcomer: `make demo` (set up, sync real servers, serve) and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: install tools demo test lint format run worker beat check clean

$(BIN)/.installed: requirements.txt
	$(PYTHON) -m venv $(VENV)
	# torch first, from the machine's local CPU wheel: a bare `torch` pulls a multi-GB CUDA build.
	$(BIN)/pip install --quiet torch==2.13.0
	$(BIN)/pip install --quiet -r requirements.txt
	touch $@

# Node tools: npm MCP reference servers and the MCP Inspector CLI, with node 22 from the npm registry.
tools/node_modules/.installed: tools/package.json tools/package-lock.json
	cd tools && npm ci --no-audit --no-fund --loglevel=error
	touch $@

install: $(BIN)/.installed tools/node_modules/.installed

# Django's debug pages (settings, code, SQL) only for a developer who asks: `make demo DEBUG=1` (loopback only).
DEBUG ?=
# A per-checkout secret key in var/, made once and never committed, so the demo runs with DEBUG off.
KEY_FILE := var/secret-key

# The demo's memory server keeps its graph in this file. Every process that may start that server names the same one:
# the gateway for calls, a Celery worker for syncs (a worker without it failed the server's sync, "environment
# variable(s) not set: MEMORY_FILE_PATH", and its tools were hidden from clients until the next good sync).
export MEMORY_FILE_PATH ?= $(CURDIR)/var/demo-memory.jsonl

$(KEY_FILE):
	mkdir -p var
	umask 077 && $(PYTHON) -c "import secrets; print(secrets.token_urlsafe(50))" > $@

demo: install $(KEY_FILE)
	DEBUG=$(DEBUG) SECRET_KEY_FILE=$(KEY_FILE) $(BIN)/python manage.py demo --host $(HOST) --port $(PORT)

test: install
	$(BIN)/pytest $(PYTEST_ARGS)

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: install
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

check: install
	SECRET_KEY=check $(BIN)/python manage.py check
	SECRET_KEY=check $(BIN)/python manage.py makemigrations --check --dry-run

# The address Scout's links name (approval URLs, the landing page): where `make run` serves unless set.
SCOUT_PUBLIC_URL ?= http://$(HOST):$(PORT)

# Worker processes (`make run WORKERS=4`). uvicorn's supervisor kills a worker that does not answer its ping within
# --timeout-worker-healthcheck seconds (5 by default) and starts another: on a loaded machine a worker still starting
# (its interpreter, before it can answer) missed it and was killed, again and again (opsux5). A hung worker is
# replaced a minute later instead.
WORKERS ?= 1
WORKER_HEALTHCHECK_TIMEOUT ?= 60

# Every serving process and the Celery worker (`make worker`) write their counters and histograms to files in this
# directory, and a scrape of any worker sums them all (prometheus-client's multiprocess mode): without it, with
# WORKERS=2, /metrics showed the counters of whichever worker answered, and never the worker's syncs (opsux6). Before
# a process starts, the files of processes no longer running (an earlier run's) are removed, a live one's kept; the
# loop doing it is not echoed (`make run` printed it, three lines of shell, before the server's own command).
PROMETHEUS_MULTIPROC_DIR ?= $(CURDIR)/var/prometheus
METRICS_DIR_READY = mkdir -p $(PROMETHEUS_MULTIPROC_DIR) && for f in $(PROMETHEUS_MULTIPROC_DIR)/*_*.db; do \
	pid=$${f\#\#*_}; kill -0 $${pid%.db} 2>/dev/null || rm -f "$$f"; done

run: install $(KEY_FILE)
	@$(METRICS_DIR_READY)
	DEBUG=$(DEBUG) SECRET_KEY_FILE=$(KEY_FILE) SCOUT_PUBLIC_URL=$(SCOUT_PUBLIC_URL) PROMETHEUS_MULTIPROC_DIR=$(PROMETHEUS_MULTIPROC_DIR) $(BIN)/uvicorn scoutsite.asgi:application --http scoutsite.serving:BoundedH11Protocol --host $(HOST) --port $(PORT) --workers $(WORKERS) --timeout-worker-healthcheck $(WORKER_HEALTHCHECK_TIMEOUT)

# Beside `make demo` or `make run` with REDIS_URL: the same secret key (without it they refused to start).
worker: install $(KEY_FILE)
	@$(METRICS_DIR_READY)
	DEBUG=$(DEBUG) SECRET_KEY_FILE=$(KEY_FILE) PROMETHEUS_MULTIPROC_DIR=$(PROMETHEUS_MULTIPROC_DIR) $(BIN)/celery -A scoutsite worker --loglevel=INFO --concurrency=2

beat: install $(KEY_FILE)
	DEBUG=$(DEBUG) SECRET_KEY_FILE=$(KEY_FILE) $(BIN)/celery -A scoutsite beat --loglevel=INFO

clean:
	rm -rf $(VENV) var

# Search speed and memory at 2k/10k/100k tools against the query-encoding floor (a benchmark, not a test).
.PHONY: bench-search
bench-search: $(BIN)/.installed
	$(BIN)/python bench/bench_search.py $(BENCH_ARGS)

# Load suite L1-L5 (SECURITY-TESTS C3): a benchmark, not a test, never in CI. Loopback only, bounded in time.
# locust lives in its own virtualenv (.venv-load, requirements-load.txt) so it never touches the app's.
LOAD_VENV := .venv-load
.PHONY: load
load: $(BIN)/.installed
	test -x $(LOAD_VENV)/bin/locust || (python3 -m venv $(LOAD_VENV) && $(LOAD_VENV)/bin/pip install -r requirements-load.txt)
	$(BIN)/python bench/load/run_load.py $(LOAD_ARGS)

# Mutation testing of governance/services, governance/selectors, mcpgateway/services and search/engine
# (mutmut, [tool.mutmut] in pyproject.toml): a habit, not a test, never in CI or make test. A deterministic
# sample per package keeps it under an hour on 2 cores; MUTATE_ARGS="--sample 0" checks every mutant.
# Results and the triage of survivors: docs/mutation-report.md.
.PHONY: mutate
mutate: $(BIN)/.installed
	$(BIN)/pip install --quiet -r requirements-mutate.txt
	nice -n 10 $(BIN)/python bench/mutation/run_mutate.py $(MUTATE_ARGS)
