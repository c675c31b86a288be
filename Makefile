# scopeflow developer tasks.  `make help` lists them.
VENV        ?= .venv
PY          := $(VENV)/bin/python
SCOPEFLOW   := $(VENV)/bin/scopeflow
PYTEST_ARGS ?=
# pytest-xdist workers for `make test`: the suite keeps 2 cores ~75 % busy when run serially
TEST_WORKERS ?= 2
DEMO        := examples/connected_components.flow

# Keep local Spark on the loopback interface.
export SPARK_LOCAL_IP ?= 127.0.0.1

.DEFAULT_GOAL := help
.PHONY: help setup venv system-deps test test-cluster demo data clean distclean

help:
	@echo "make venv         Java 17 + graphviz (apt, if missing), .venv, pip install -e '.[dev]'"
	@echo "make test         run the test suite in 2 workers (TEST_WORKERS=0: one process; PYTEST_ARGS='-k foo -x' to pass options)"
	@echo "make test-cluster the standalone-cluster and Spark Connect tests (real master and workers)"
	@echo "make demo         run $(DEMO) and draw its graph into examples/out/"
	@echo "make system-deps  only install Java 17 and graphviz if missing"
	@echo "make data         regenerate examples/data/long_path.csv"
	@echo "make clean        remove outputs, checkpoints and caches (keeps .venv)"
	@echo "make distclean    clean + remove .venv"

setup venv:
	@bash scripts/setup.sh all

system-deps:
	@bash scripts/setup.sh system

test: venv
	$(PY) -m pytest -q -n $(TEST_WORKERS) --durations=20 $(PYTEST_ARGS)

test-cluster: venv
	$(PY) -m pytest -q -m cluster tests/cluster $(PYTEST_ARGS)

demo: venv
	$(SCOPEFLOW) run $(DEMO)
	@mkdir -p examples/out
	$(SCOPEFLOW) graph $(DEMO) -o examples/out/connected_components.svg
	@echo
	@echo "demo output:"
	@echo "  components (csv): examples/out/components/"
	@echo "  dataflow graph:   examples/out/connected_components.svg"

data:
	python3 examples/data/make_long_path.py

clean:
	rm -rf examples/out examples/ckpt out .scopeflow examples/.scopeflow spark-warehouse metastore_db derby.log .pytest_cache
	rm -f examples/data/stream/*.csv examples/data/stream/.*.csv
	find . -path ./$(VENV) -prune -o -name __pycache__ -type d -prune -exec rm -rf {} +

distclean: clean
	rm -rf $(VENV)
