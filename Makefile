# fabbench: two commands do all set-up on a fresh machine (see README.md)
#   make demo   installs what it needs, then runs `fabbench run --fabric ethernet` on local ranks
#   make test   installs, then runs every test
SHELL := /bin/bash
VENV ?= .venv
export FABBENCH_CACHE ?= $(HOME)/.cache/fabbench
STAMP := $(VENV)/.setup-done
ALL_STAMP := $(VENV)/.setup-all-done
SETUP_INPUTS := pyproject.toml .ci/setup.sh .ci/apt-packages.txt containers/versions.env containers/torch-wheel.sh
TEST_TIMEOUT ?= 4800

.PHONY: setup setup-all demo test test-fast typecheck lint bench clean image-cuda test-image-cuda \
	test-mpich-cuda

# setup: what the demo needs (its Debian packages, the venv, torch's CPU wheel from
# FABBENCH_TORCH_WHEELS or PyTorch's CPU index, mpi4py); setup-all adds the Debian packages only
# the tests use, Horovod and checkov, the tests' manifest scanner (make test).
setup: $(STAMP)

setup-all: $(ALL_STAMP)

$(STAMP): $(SETUP_INPUTS)
	@start=$$(date +%s); VENV=$(VENV) bash .ci/setup.sh && \
	  echo "[setup] took $$(( $$(date +%s) - start )) s; the venv: $$(du -sh $(VENV) | cut -f1)"
	touch $@

# checkov (.ci/checkov.sh) lives in the cache, not the venv: made again when the cache lost it
CHECKOV := $(FABBENCH_CACHE)/tools/checkov-$(shell sed -n 's/^checkov==//p' .ci/checkov.lock)/bin/checkov

$(ALL_STAMP): $(STAMP) containers/horovod.sh .ci/checkov.sh .ci/checkov.lock | $(CHECKOV)
	VENV=$(VENV) bash .ci/setup.sh --all
	touch $@

$(CHECKOV):
	bash .ci/checkov.sh

demo: setup
	$(VENV)/bin/fabbench run --fabric ethernet

# Both run the type checker too (mypy over src/, [tool.mypy] in pyproject.toml), and fail when it
# or a test fails; test-fast runs it beside the unit tests, its output after theirs (a second run
# reads its cache, .mypy_cache: seconds), and draws a fifth of each property test's examples
# (FABBENCH_TEST_EXAMPLES; make test draws every one).
#
# make test (.ci/test-suite.sh, which says how): the integration tests marked `together` first,
# several at once, with the type checker and the unit tests beside them; then the others one at
# a time, their timings needing the cores. The Kubernetes cluster's binaries build from the
# start, in the background, at the lowest CPU priority (about 20 minutes cold on 2 cores,
# seconds once cached under $(FABBENCH_CACHE)/k8s). Each phase runs under its own deadline.
K8S_BUILD_LOG = $(FABBENCH_CACHE)/logs/k8s-build.log
TOGETHER_TIMEOUT ?= 3600

test: setup-all
	VENV=$(VENV) TEST_TIMEOUT=$(TEST_TIMEOUT) TOGETHER_TIMEOUT=$(TOGETHER_TIMEOUT) \
	  K8S_BUILD_LOG=$(K8S_BUILD_LOG) bash .ci/test-suite.sh

test-fast: setup
	typing=$$(mktemp); $(VENV)/bin/mypy >"$$typing" 2>&1 & checker=$$!; \
	FABBENCH_TEST_EXAMPLES=0.2 $(VENV)/bin/python -m pytest -n auto tests/unit; tested=$$?; \
	wait $$checker; typed=$$?; cat "$$typing"; rm -f "$$typing"; \
	exit $$(( tested ? tested : typed ))

typecheck: setup
	$(VENV)/bin/mypy

lint: setup
	$(VENV)/bin/ruff check src tests bench
	$(VENV)/bin/mypy

bench: setup
	$(VENV)/bin/python bench/fidelity.py

# The cuda flavour of the image (long: UCX and Open MPI from source, torch's CUDA build, Horovod
# with its CUDA kernels; not part of `make test`), then its own checks
# (tests/integration/test_image_cuda.py) and the GPU kit's bundle of its Open MPI and UCX
# (tests/integration/test_gpu_kit_cuda.py). It builds its own Horovod with NCCL: the setup's
# wheel is a CPU build, and .ci/image-build.sh's log says why it is not used.
image-cuda:
	FLAVOR=cuda nice -n 10 bash .ci/image-build.sh

test-image-cuda: setup image-cuda
	FABBENCH_TEST_CUDA_IMAGE=1 $(VENV)/bin/python -m pytest -p no:cacheprovider tests/integration/test_image_cuda.py \
	  tests/integration/test_gpu_kit_cuda.py

# MPICH with CUDA for the GPU kit's cuda-mpich step (bench/gpu/mpich.py; about an hour on 2
# cores, cached under $FABBENCH_CACHE; not part of `make test`, whose rehearsal of the bundle
# runs where the cache has the build), then the bundle's own checks
test-mpich-cuda: setup
	nice -n 10 $(VENV)/bin/python bench/gpu/mpich.py
	$(VENV)/bin/python -m pytest -p no:cacheprovider tests/integration/test_gpu_kit_mpich.py

clean:
	rm -rf $(VENV) results .pytest_cache .mypy_cache
