#!/usr/bin/env bash
# Write the image's build manifest, /etc/fabbench/build.json (or $1): every component's version
# as the installed bits report it, next to its pin (versions.env) and its source. `fabbench env`
# and every results file's provenance include it (fabbench.sysinfo.inventory.build_manifest).
# Fails when an installed Python component differs from its pin, so the image cannot silently
# carry other bits than versions.env says.
# Environment: FLAVOR (cpu|cuda), BASE_IMAGE, VCS_REF, IMAGE_VERSION, INPUTS_HASH (the hash of the
# build inputs, .ci/image-build.sh), FABBENCH_VENV, PREFIX.
set -euo pipefail
# shellcheck source=containers/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

out=${1:-/etc/fabbench/build.json}
FLAVOR=${FLAVOR:-cpu}
FABBENCH_VENV=${FABBENCH_VENV:-/opt/fabbench/venv}
mkdir -p "$(dirname "$out")"

first_line() { "$@" 2>/dev/null | head -n1 || true; }
deb_version() { dpkg-query -W -f='${Version}' "$1" 2>/dev/null || true; }

export FLAVOR PREFIX
export MANIFEST_OMPI MANIFEST_UCX MANIFEST_FI MANIFEST_DEBS
MANIFEST_OMPI=$(first_line ompi_info --version)
MANIFEST_UCX=$(ucx_info -v 2>/dev/null | grep -m1 -i 'version' || true)
MANIFEST_FI=$(first_line fi_info --version)
MANIFEST_DEBS=""
for pkg in openmpi-bin libopenmpi3 libfabric1 libucx0 libpsm2-2 libibverbs1 libpmix2 python3 iperf3; do
  MANIFEST_DEBS+="$pkg=$(deb_version "$pkg") "
done
set -a
# shellcheck source=containers/versions.env
. "$containers_dir/versions.env"
set +a

"$FABBENCH_VENV/bin/python" - "$out" <<'PY'
import datetime
import json
import os
import re
import sys
from importlib import metadata

env = os.environ
flavor = env["FLAVOR"]


def dist(name):
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def match(pattern, text):
    m = re.search(pattern, text or "")
    return m.group(1) if m else None


errors = []
debs = dict(item.split("=", 1) for item in env.get("MANIFEST_DEBS", "").split() if "=" in item)
reported = {
    "openmpi": match(r"v?(\d+\.\d+\.\d+)", env.get("MANIFEST_OMPI")),
    "ucx": match(r"(\d+\.\d+\.\d+)", env.get("MANIFEST_UCX")),
    "libfabric": match(r"(\d+\.\d+\.\d+)", env.get("MANIFEST_FI")),
}
components = {}
# cuda flavour: UCX and Open MPI built from pinned source tarballs, CUDA and NCCL from PyPI's
# wheels, the rest from Debian
built = {"openmpi": "OPENMPI", "ucx": "UCX"} if flavor == "cuda" else {}
fabric = {"openmpi": "openmpi-bin", "ucx": "libucx0", "libfabric": "libfabric1",
          "psm2": "libpsm2-2"}
for name, deb in fabric.items():
    pin = built.get(name)
    if pin:
        pinned = env.get(f"{pin}_VERSION")
        components[name] = {"version": reported.get(name), "pinned": pinned,
                            "source": env.get(f"{pin}_URL"), "sha256": env.get(f"{pin}_SHA256"),
                            "prefix": env.get("PREFIX")}
        if reported.get(name) != pinned:
            errors.append(f"{name}: installed {reported.get(name)}, pinned {pinned}")
    else:
        components[name] = {"version": reported.get(name) or debs.get(deb) or None,
                            "source": "debian", "package": f"{deb}={debs.get(deb) or '?'}"}
if flavor == "cuda":
    with open("/usr/local/cuda/version.json") as f:
        cuda = json.load(f)
    components["cuda"] = {"version": cuda["cuda"], "source": "pypi", "wheels": cuda["wheels"],
                          "driver": "the host's (libcuda.so.1 is not in the image)"}
    nccl = dist(env["NCCL_WHEEL"].split("==")[0])
    components["nccl"] = {"version": nccl, "pinned": env.get("NCCL_VERSION"), "source": "pypi",
                          "wheel": env.get("NCCL_WHEEL")}
    if nccl != env.get("NCCL_VERSION"):
        errors.append(f"nccl: installed {nccl}, pinned {env.get('NCCL_VERSION')}")
    for name in ("gdrcopy", "aws-ofi-nccl"):
        components[name] = {"version": None, "source": "not in this build (sources on GitHub only)"}
else:
    for name in ("cuda", "nccl", "gdrcopy", "aws-ofi-nccl"):
        components[name] = {"version": None, "source": "not in the cpu flavour"}

for name, pin in (("torch", "TORCH"), ("mpi4py", "MPI4PY"), ("horovod", "HOROVOD")):
    installed = dist(name)
    pinned = env.get(f"{pin}_VERSION")
    components[name] = {"version": installed, "pinned": pinned, "source": "pypi"}
    if installed is None or installed.split("+")[0] != pinned:
        errors.append(f"{name}: installed {installed}, pinned {pinned}")
# What torch and Horovod were built for, as they say it themselves: the cuda flavour's torch is a
# CUDA build of the flavour's CUDA minor loading the pinned NCCL, and its Horovod has NCCL
# operations; the cpu flavour's are CPU builds.
import horovod.torch as hvd  # noqa: E402  (imports torch)
import torch  # noqa: E402

torch_cuda = torch.version.cuda
components["torch"]["cuda"] = torch_cuda
components["horovod"]["operations"] = [op for op, built in (
    ("mpi", hvd.mpi_built()), ("gloo", hvd.gloo_built()), ("nccl", hvd.nccl_built())) if built]
if flavor == "cuda":
    want = ".".join(env["CUDA_VERSION"].split(".")[:2])
    if torch_cuda != want:
        errors.append(f"torch: a build for CUDA {torch_cuda} (None: the CPU wheel), not CUDA {want}")
    else:
        loaded = ".".join(map(str, torch.cuda.nccl.version()))
        components["torch"]["nccl"] = loaded
        if loaded != env.get("NCCL_VERSION"):
            errors.append(f"torch: loads NCCL {loaded}, pinned {env.get('NCCL_VERSION')}")
    if "nccl" not in components["horovod"]["operations"]:
        errors.append("horovod: built without NCCL operations")
elif torch_cuda is not None:
    errors.append(f"torch: a CUDA {torch_cuda} build in the cpu flavour")
components["iperf3"] = {"version": debs.get("iperf3") or None, "source": "debian",
                        "package": f"iperf3={debs.get('iperf3') or '?'}"}  # the Ethernet ceiling
if not debs.get("iperf3"):
    errors.append("iperf3: not installed (the Ethernet ceiling needs it)")
components["python"] = {"version": ".".join(map(str, sys.version_info[:3])),
                        "source": "distribution"}
components["fabbench"] = {"version": dist("fabbench"), "source": "this repository"}
if errors:
    sys.exit("[manifest] ERROR: the image does not carry its pinned versions: " + "; ".join(errors))

created = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0).isoformat()
manifest = {
    "schema": "fabbench-build/1",
    "image": {"flavor": flavor, "version": env.get("IMAGE_VERSION") or dist("fabbench"),
              "base_image": env.get("BASE_IMAGE"), "vcs_ref": env.get("VCS_REF") or None,
              "inputs": env.get("INPUTS_HASH") or None, "created": created},
    "components": components,
}
with open(sys.argv[1], "w") as f:
    json.dump(manifest, f, indent=2, sort_keys=True)
    f.write("\n")
print(json.dumps(manifest, sort_keys=True))
PY
chmod 0644 "$out"
log "wrote $out"
