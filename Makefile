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

demo: install
	DEBUG=1 $(BIN)/python manage.py demo --host $(HOST) --port $(PORT)

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

run: install
	DEBUG=1 $(BIN)/uvicorn scoutsite.asgi:application --host $(HOST) --port $(PORT)

worker: install
	$(BIN)/celery -A scoutsite worker --loglevel=INFO --concurrency=2

beat: install
	$(BIN)/celery -A scoutsite beat --loglevel=INFO

clean:
	rm -rf $(VENV) var

# Search speed and memory at 2k/10k/100k tools against the query-encoding floor (a benchmark, not a test).
.PHONY: bench-search
bench-search: $(BIN)/.installed
	$(BIN)/python bench/bench_search.py $(BENCH_ARGS)
