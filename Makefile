# The two commands of the course: `make lab` and `make test`. Each sets up .venv on its own.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# Extra JupyterLab options, e.g. `make lab LAB_ARGS="--port 8890 --no-browser"`.
LAB_ARGS ?=
# JupyterLab refuses to run as root (containers, some cloud machines) unless told it may.
ROOT_FLAG := $(if $(filter 0,$(shell id -u)),--allow-root)

.PHONY: setup git-filter lab test bench gpu-check

# (Re)install when the pins or the package metadata change.
$(STAMP): requirements.txt pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -r requirements.txt
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --no-deps -e .
	@touch $(STAMP)

setup: $(STAMP) git-filter

# The git filter named in .gitattributes: git reads each notebook through scripts/strip_outputs.py
# (standard library only), so the outputs a lesson run leaves in notebooks/ are never committed and
# `git diff` shows none. On checkout the notebook is written as stored (smudge: cat; `required`
# makes a filter that fails an error, never a silent commit of outputs, and wants both commands).
# Written to this clone's .git/config; nothing to do outside a git clone.
FILTER := filter.strip-notebook-outputs
FILTER_CLEAN := "$(PYTHON)" scripts/strip_outputs.py
git-filter:
	@if [ "$$(git rev-parse --show-toplevel 2>/dev/null)" = "$$(pwd -P)" ]; then \
		test "$$(git config --get $(FILTER).clean)" = '$(FILTER_CLEAN)' \
			|| git config $(FILTER).clean '$(FILTER_CLEAN)'; \
		test "$$(git config --get $(FILTER).smudge)" = cat || git config $(FILTER).smudge cat; \
		test "$$(git config --get $(FILTER).required)" = true || git config $(FILTER).required true; \
	fi

# jupyter/ holds the course's JupyterLab defaults (no news prompt, checkpoints/ and runs/ not listed);
# .venv/bin goes first on PATH so that the notebooks' `%tensorboard` finds TensorBoard.
lab: setup
	PATH="$(CURDIR)/$(BIN):$$PATH" JUPYTER_CONFIG_PATH="$(CURDIR)/jupyter$${JUPYTER_CONFIG_PATH:+:$$JUPYTER_CONFIG_PATH}" \
		$(BIN)/jupyter lab --ServerApp.root_dir=notebooks $(ROOT_FLAG) $(LAB_ARGS)

test: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	COURSE_QUICK=1 $(BIN)/python -m pytest tests notebooks \
		--nbval-lax --nbval-current-env --nbval-cell-timeout=600 -p no:cacheprovider

# Training throughput of the seeds' pipeline against the fast path of 06_performance, on this
# machine's device; writes results/bench-<device>.json and .png. `make bench BENCH_ARGS=--quick`
# for a short run (see `.venv/bin/python scripts/bench.py --help`).
bench: setup
	$(BIN)/python scripts/bench.py $(BENCH_ARGS)

# On a machine with a CUDA GPU: the unit tests, every notebook in default mode (executed copies kept),
# and the bench, recorded in results/gpu/<device>/ (see scripts/gpu_check.py). One part at a time:
# `make gpu-check GPU_CHECK_ARGS="--part tests"`, `"--part notebooks 00 01 02 03"`, `"--part bench"`,
# `"--part probe"` (scripts/fastpath_probe.py) and `"--part loaders"` (scripts/loader_probe.py), written
# under the date.
# It uses .venv when there is one, else python3 (a GPU machine with its own torch and no registry).
GPU_PYTHON ?= $(if $(wildcard $(BIN)/python),$(BIN)/python,python3)
gpu-check:
	$(GPU_PYTHON) scripts/gpu_check.py $(GPU_CHECK_ARGS)
