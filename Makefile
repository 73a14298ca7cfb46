# The two commands a newcomer needs: `make run` and `make test`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: run test lint system-deps node-peers bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test,spark]'
	touch $(STAMP)

# Peers that do not come from PyPI: kcat (tests) and Java (Spark, for `make run` and the tests).
system-deps:
	@./scripts/system-deps.sh

# The Node.js clients the tests drive (kafkajs, @platformatic/kafka, Node 22), from the npm registry.
node-peers: system-deps
	@./scripts/node-peers.sh

run: system-deps $(STAMP)
	$(PY) -m samsa.cli pipeline

# Lint and types alone (CI runs them first, in `make test`).
lint: $(STAMP)
	$(PY) -m ruff check
	$(PY) -m mypy samsa

test: lint system-deps node-peers $(STAMP)
	$(PY) -m pytest -q

bench: $(STAMP)
	$(PY) bench/records.py

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .hypothesis
