# The two commands a newcomer needs: `make run` and `make test`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: run test system-deps bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test]'
	touch $(STAMP)

# Peers the tests drive that do not come from PyPI (kcat, Java).
system-deps:
	@./scripts/system-deps.sh

run: $(STAMP)
	$(PY) -m samsa.selfcheck

test: system-deps $(STAMP)
	$(PY) -m pytest -q

bench: $(STAMP)
	$(PY) bench/records.py

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .hypothesis
