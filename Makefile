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

.PHONY: setup setup-all demo test test-fast typecheck lint bench clean image-cuda test-image-cuda

# setup: what the demo needs (its Debian packages, the venv, torch's CPU wheel from
# FABBENCH_TORCH_WHEELS or PyTorch's CPU index, mpi4py); setup-all adds the Debian packages only
# the tests use and Horovod (make test).
setup: $(STAMP)

setup-all: $(ALL_STAMP)

$(STAMP): $(SETUP_INPUTS)
	@start=$$(date +%s); VENV=$(VENV) bash .ci/setup.sh && \
	  echo "[setup] took $$(( $$(date +%s) - start )) s; the venv: $$(du -sh $(VENV) | cut -f1)"
	touch $@

$(ALL_STAMP): $(STAMP) containers/horovod.sh
	VENV=$(VENV) bash .ci/setup.sh --all
	touch $@

demo: setup
	$(VENV)/bin/fabbench run --fabric ethernet

# Both run the type checker too (mypy over src/, [tool.mypy] in pyproject.toml), and fail when it
# or a test fails; test-fast runs it beside the unit tests, its output after theirs (a second run
# reads its cache, .mypy_cache: seconds). make test runs the integration tests one at a time
# (their ranks, links and timings need the cores), then the unit tests spread over 2 workers.
#
# The Kubernetes cluster's binaries (.ci/k8s/build.sh: about 20 minutes cold on 2 cores, seconds
# once cached) build from the start, in the background, at the lowest CPU priority and in a
# process group of their own: they take what the integration tests leave idle. The Kubernetes
# tests run last (tests/integration/conftest.py); the first of them raises the build to normal
# priority (FABBENCH_K8S_BUILD_PGID) and waits for it (build.sh's lock). Whatever ends the
# recipe ends the build with it.
K8S_BUILD_LOG = $(FABBENCH_CACHE)/logs/k8s-build.log

test: setup-all
	@mkdir -p $(dir $(K8S_BUILD_LOG)); \
	setsid nice -n 19 bash .ci/k8s/build.sh >$(K8S_BUILD_LOG) 2>&1 </dev/null & k8s=$$!; \
	trap 'kill -- -'$$k8s' 2>/dev/null' EXIT; \
	echo "[test] the Kubernetes binaries build in the background (pid $$k8s, log $(K8S_BUILD_LOG))"; \
	$(VENV)/bin/mypy; typed=$$?; \
	FABBENCH_K8S_BUILD_PGID=$$k8s timeout $(TEST_TIMEOUT) $(VENV)/bin/python -m pytest tests/integration; integrated=$$?; \
	timeout 900 $(VENV)/bin/python -m pytest -n 2 tests/unit; unit=$$?; \
	exit $$(( integrated ? integrated : unit ? unit : typed ))

test-fast: setup
	typing=$$(mktemp); $(VENV)/bin/mypy >"$$typing" 2>&1 & checker=$$!; \
	$(VENV)/bin/python -m pytest -n auto tests/unit; tested=$$?; \
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

clean:
	rm -rf $(VENV) results .pytest_cache .mypy_cache
