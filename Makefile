# Two commands from a fresh clone: `make demo` and `make test` (see README).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint typecheck unit bench docs clean

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

typecheck: $(STAMP)
	$(BIN)/mypy

# The documentation site: docs/ -> site/ (open site/index.html). --strict turns a broken
# link or anchor, or a page missing from mkdocs.yml's nav, into a failure.
MKDOCS := NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet --site-dir site

docs: $(STAMP)
	$(MKDOCS)

test: $(STAMP)
	$(BIN)/ruff check src tests benchmarks tools
	$(BIN)/python -m tools.unasync --check
	$(BIN)/mypy
	$(MKDOCS)
	$(BIN)/pytest -q -rs -p no:cacheprovider --durations=10

BENCH_STAMP := $(VENV)/.installed-bench

$(BENCH_STAMP): $(STAMP) pyproject.toml
	$(BIN)/python -m pip install --quiet -e '.[dev,local,bench]'
	touch $(BENCH_STAMP)

bench: $(BENCH_STAMP)
	$(BIN)/python -m benchmarks

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache site
