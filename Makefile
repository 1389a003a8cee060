# Two commands from a fresh clone: `make demo` and `make test` (see README).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test check lint typecheck unit bench docs clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev,local]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/python -m zae_limiter.demo

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks tools
	$(BIN)/python -m tools.unasync --check
	$(BIN)/python -m tools.deadcode
	$(BIN)/python -m tools.docnames

typecheck: $(STAMP)
	$(BIN)/mypy

# The documentation site: docs/ -> site/ (open site/index.html). --strict turns a broken
# link or anchor, or a page missing from mkdocs.yml's nav, into a failure.
MKDOCS := NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet --site-dir site

docs: $(STAMP)
	$(MKDOCS)

# pytest for both tiers: skips listed (-rs), the closing "N passed" line, and where the
# time went (--durations). Two worker processes (pytest-xdist), the cores of a developer's
# or CI's machine; each worker starts its own local engines on free ports. --dist loadfile
# keeps a file's tests on one worker, so a module's fixtures (a demo run, a contention
# server) start once. TEST_WORKERS=0 runs in one process.
TEST_WORKERS ?= 2
PYTEST := $(BIN)/pytest -q -rs -p no:cacheprovider -n $(TEST_WORKERS) --dist loadfile
# How many of the slowest tests `make test` lists (DURATIONS=0: all of them).
DURATIONS ?= 25

# Everything: lint, types, the docs site, and the whole suite (CI runs this, .ci/run).
test: $(STAMP)
	$(BIN)/ruff check src tests benchmarks tools
	$(BIN)/python -m tools.unasync --check
	$(BIN)/python -m tools.deadcode
	$(BIN)/python -m tools.docnames
	$(BIN)/mypy
	$(MKDOCS)
	$(PYTEST) --durations=$(DURATIONS)

# The edit-test loop, under 3 minutes: lint, types, the unit tests and the mutant checks
# that need no engine (DynamoDB Local) and are not marked slow. Not a substitute for
# `make test`: the engine tier, the integration tests and the docs site run only there.
CHECK_PATHS := tests/unit tests/mutants $(wildcard tests/sim)

check: $(STAMP)
	$(BIN)/ruff check src tests benchmarks tools
	$(BIN)/python -m tools.unasync --check
	$(BIN)/python -m tools.deadcode
	$(BIN)/python -m tools.docnames
	$(BIN)/mypy
	$(PYTEST) -m "not engine and not slow" --durations=10 $(CHECK_PATHS)

BENCH_STAMP := $(VENV)/.installed-bench

$(BENCH_STAMP): $(STAMP) pyproject.toml
	$(BIN)/python -m pip install --quiet -e '.[dev,local,bench]'
	touch $(BENCH_STAMP)

bench: $(BENCH_STAMP)
	$(BIN)/python -m benchmarks
	$(BIN)/python -m benchmarks regions

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache site
