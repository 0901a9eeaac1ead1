# fabbench: two commands do all set-up on a fresh machine (see README.md)
#   make demo   installs what it needs, then runs `fabbench run --fabric ethernet` on local ranks
#   make test   installs, then runs every test
SHELL := /bin/bash
VENV ?= .venv
export FABBENCH_CACHE ?= $(HOME)/.cache/fabbench
STAMP := $(VENV)/.setup-done
SETUP_INPUTS := pyproject.toml .ci/setup.sh .ci/apt-packages.txt containers/versions.env containers/horovod.sh
TEST_TIMEOUT ?= 4800

.PHONY: setup demo test test-fast lint bench clean image-cuda test-image-cuda

setup: $(STAMP)

$(STAMP): $(SETUP_INPUTS)
	VENV=$(VENV) bash .ci/setup.sh
	touch $@

demo: setup
	$(VENV)/bin/fabbench run --fabric ethernet

test: setup
	timeout $(TEST_TIMEOUT) $(VENV)/bin/python -m pytest

test-fast: setup
	$(VENV)/bin/python -m pytest -n auto tests/unit

lint: setup
	$(VENV)/bin/ruff check src tests bench

bench: setup
	$(VENV)/bin/python bench/fidelity.py

# The cuda flavour of the image (long: UCX and Open MPI from source; not part of `make test`),
# then its own checks (tests/integration/test_image_cuda.py). Like the cpu flavour's builds, it
# reuses the Horovod wheel of `make setup` when its record names the image's Horovod, Python,
# torch and MPI (.ci/image-build.sh; its log says whether it did).
image-cuda:
	FLAVOR=cuda nice -n 10 bash .ci/image-build.sh

test-image-cuda: setup image-cuda
	FABBENCH_TEST_CUDA_IMAGE=1 $(VENV)/bin/python -m pytest -p no:cacheprovider tests/integration/test_image_cuda.py

clean:
	rm -rf $(VENV) results .pytest_cache
