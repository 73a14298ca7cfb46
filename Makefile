# The two commands a newcomer needs: `make run` and `make test`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: run test lint system-deps node-peers bench mutate fuzz clean

# setup.py compiles these modules (mypyc, its COMPILED list): a stale build would shadow an edit.
$(STAMP): pyproject.toml setup.py samsa/broker/log/validator.py samsa/records/record_loops.py samsa/records/builder.py \
		samsa/producer/future.py samsa/producer/record_queue.py
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

# Mutation testing, not in CI (about an hour on 2 cores): mutmut over the core modules, one group
# at a time with its own tests; prints killed/survived per module, survivors in mutants-report.txt.
# `make mutate MODULES=records,log MUTATE_MINUTES=20`; groups in scripts/mutate.py.
MODULES ?= all
MUTATE_MINUTES ?= 60
MUTATE_CHILDREN ?=  # empty: per group, from the cores (scripts/mutate.py)
MUTATE_ARGS ?=
MUTATE_STAMP := $(VENV)/.installed-mutate

$(MUTATE_STAMP): $(STAMP)
	$(PY) -m pip install -q -e '.[test,mutate]'
	touch $@

mutate: $(MUTATE_STAMP)
	$(PY) scripts/mutate.py --modules $(MODULES) --minutes $(MUTATE_MINUTES) \
		$(if $(strip $(MUTATE_CHILDREN)),--max-children $(MUTATE_CHILDREN)) $(MUTATE_ARGS)

# The broker fuzzer (tests/broker/fuzz/) for longer than the 50 s the suite gives it:
# `make fuzz FUZZ_SECONDS=3600`; FUZZ_SEED=N repeats a run's mutations.  Inputs that hurt the
# broker are written to fuzz-findings/ (see tests/broker/fuzz/test_regressions.py).
FUZZ_SECONDS ?= 600

fuzz: $(STAMP)
	FUZZ_SECONDS=$(FUZZ_SECONDS) FUZZ_FINDINGS=fuzz-findings $(PY) -m pytest -q -s \
		-p no:cacheprovider --timeout=$$(( $(FUZZ_SECONDS) + 300 )) tests/broker/fuzz/test_fuzz.py

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .hypothesis mutants mutants-report.txt
