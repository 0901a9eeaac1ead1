#!/usr/bin/env bash
# make test's tests, once the set-up is done (Makefile: VENV, TEST_TIMEOUT, TOGETHER_TIMEOUT,
# K8S_BUILD_LOG). Exits with the first failure's status: the one-at-a-time phase's, the
# together phase's, its podman lane's, the type checker's or the unit tests'.
#
# First phase, three lanes at once, each in a process group of its own:
#   - the integration tests marked `together` but not `podman` (they time nothing and share no
#     daemon: rendering, refusals, the documents' examples, the GPU kit's rehearsal) on 2
#     pytest-xdist workers, a module on one worker (--dist loadfile); their output as it comes;
#   - those marked `podman` (the image, its runtimes, the registry, the set-up's faults: one
#     podman store), one after another; their output after the phase;
#   - the type checker, then the unit tests on 2 workers; their output after the phase.
# Then every other integration test, one at a time: their ranks, links and timings need the
# cores. Whatever ends this script ends every lane with it.
#
# The Kubernetes cluster's binaries (.ci/k8s/build.sh: about 20 minutes cold on 2 cores, seconds
# once cached) build from the start, in the background, at the lowest CPU priority: they take
# what the tests leave idle. The Kubernetes tests run last (tests/integration/conftest.py); the
# first of them raises the build to normal priority (FABBENCH_K8S_BUILD_PGID) and waits for it
# (build.sh's lock).
set -uo pipefail

venv=${VENV:-.venv}
pytest=("$venv/bin/python" -m pytest)
k8s_log=${K8S_BUILD_LOG:-${FABBENCH_CACHE:-$HOME/.cache/fabbench}/logs/k8s-build.log}
logs=$(mktemp -d)
groups=()
# shellcheck disable=SC2329  # called by the EXIT trap
finish() {
  local g
  for g in "${groups[@]}"; do kill -- "-$g" 2>/dev/null; done
  rm -rf "$logs"
}
trap finish EXIT
trap 'exit 143' TERM
trap 'exit 130' INT

# lane NAME COMMAND...: in the background, in a process group of its own, output to NAME's log
lane() {
  local name=$1
  shift
  setsid "$@" >"$logs/$name.log" 2>&1 </dev/null &
  groups+=("$!")
}

mkdir -p "$(dirname "$k8s_log")"
setsid nice -n 19 bash .ci/k8s/build.sh >"$k8s_log" 2>&1 </dev/null &
k8s=$!
groups+=("$k8s")
echo "[test] the Kubernetes binaries build in the background (pid $k8s, log $k8s_log)"

# shellcheck disable=SC2016  # the inner shell expands them
lane fast bash -c '"$1/bin/mypy"; typed=$?; timeout 900 "$1/bin/python" -m pytest -n 2 tests/unit
                   unit=$?; exit $(( unit ? unit : typed ))' fast "$venv"
fast=$!
lane podman timeout "${TOGETHER_TIMEOUT:-3600}" "${pytest[@]}" -m "together and podman" \
  tests/integration
podman=$!
echo "[test] first phase: the tests marked together (the podman modules and the type checker" \
     "with the unit tests run beside them; their output follows)"
timeout "${TOGETHER_TIMEOUT:-3600}" "${pytest[@]}" -n 2 --dist loadfile \
  -m "together and not podman" tests/integration
together=$?
wait "$podman"
podman_status=$?
echo "[test] the podman modules (exit $podman_status):"
cat "$logs/podman.log"
wait "$fast"
fast_status=$?
echo "[test] the type checker and the unit tests (exit $fast_status):"
cat "$logs/fast.log"

echo "[test] second phase: the other integration tests, one at a time"
FABBENCH_K8S_BUILD_PGID=$k8s timeout "${TEST_TIMEOUT:-4800}" "${pytest[@]}" \
  -m "not together" tests/integration
alone=$?
for status in "$alone" "$together" "$podman_status" "$fast_status"; do
  [ "$status" -eq 0 ] || exit "$status"
done
exit 0
