# shellcheck shell=bash
# A prebuilt wheel's record (sourced by horovod.sh and mpi4py.sh, never run): beside each wheel
# they build they write WHEEL.abi, the environment it was built for (one key=value a line) and
# the wheel's sha256; a wheel is used again only when its record names that file and every field
# equals the environment at hand (the image build reuses `make setup`'s wheels this way).

sha_of() { sha256sum "$1" | cut -d' ' -f1; }

# mismatch WHEEL KEY=VALUE...: print why WHEEL's record does not name this file and these values
# and return 1; return 0 (printing nothing) when it does.
mismatch() {
  local wheel=$1 record=$1.abi kv have why=()
  shift
  [ -f "$record" ] \
    || { printf 'it has no record of what it was built for (%s)\n' "${record##*/}"; return 1; }
  [ "$(sed -n 's/^sha256=//p' "$record")" = "$(sha_of "$wheel")" ] \
    || { printf 'its record %s describes another file (sha256)\n' "${record##*/}"; return 1; }
  for kv in "$@"; do
    have=$(sed -n "s/^${kv%%=*}=//p" "$record")
    [ "$have" = "${kv#*=}" ] || why+=("${kv%%=*} ${have:-(none)}, not ${kv#*=}")
  done
  [ "${#why[@]}" -eq 0 ] \
    || { printf 'it was built for %s\n' "$(printf '%s; ' "${why[@]}" | sed 's/; $//')"; return 1; }
}

# find_wheel DIR GLOB FIELD...: set `wheel` to the wheel in DIR matching GLOB whose record names
# these fields; any other wheel matching GLOB is removed (so that a pip install after the caller
# cannot pick it), saying why through the caller's log.
find_wheel() {
  local dir=$1 glob=$2 w why
  shift 2
  wheel=""
  for w in "$dir"/$glob; do
    [ -f "$w" ] || continue
    if why=$(mismatch "$w" "$@"); then
      wheel=$w
      return 0
    fi
    log "not using $w: $why"
    rm -f "$w" "$w.abi"
  done
  return 1
}

# mpi_package MPICC: the Debian package (and version) that installed this MPI's compiler wrapper,
# or "none: PATH" for one built from source (the cuda flavour's Open MPI)
mpi_package() {
  local real pkg
  real=$(readlink -f "$1")
  pkg=$(dpkg -S "$real" 2>/dev/null | cut -d: -f1 | head -n1)
  if [ -n "$pkg" ]; then
    dpkg-query -W -f '${Package} ${Version}' "$pkg" 2>/dev/null || printf '%s' "$pkg"
  else
    printf 'none: %s' "$real"
  fi
}
