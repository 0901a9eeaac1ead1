# fabbench image, two flavours from one recipe (build argument FLAVOR):
#   cpu   Debian bookworm; the fabric stack (Open MPI, UCX, libfabric, PSM2) from Debian;
#         Python wheels from the context's wheels/ folder when there (builds here, offline from
#         Docker Hub and GitHub: .ci/image-build.sh)
#   cuda  the same Debian base; CUDA 13.0's runtime, headers and nvcc from PyPI's nvidia-*
#         wheels (containers/cuda-toolkit.sh), UCX and Open MPI built --with-cuda from Debian's
#         checksummed source tarballs; torch's CUDA build with the NCCL and CUDA libraries it
#         requires (containers/torch-cuda.lock), Horovod with NCCL operations (its kernels
#         compiled by that nvcc); the host's driver gives libcuda.so.1 at run time (builds here:
#         .ci/image-build.sh with FLAVOR=cuda, make image-cuda; no GPU is needed to build, only
#         to run)
# Every version is pinned in containers/versions.env; each component has its own script in
# containers/; the stages below only compose them and copy what the runtime needs.
#
# Build context: a folder with Dockerfile, containers/, src/, pyproject.toml, README.md,
# requirements.txt (fabbench's run-time dependencies, from pyproject.toml, so that a change to
# pyproject.toml's other tables does not rebuild the Python stack) and wheels/ (may be empty);
# .ci/image-build.sh assembles it. Pass FLAVOR explicitly:
#   podman build --build-arg FLAVOR=cpu ...   (buildah resolves FROM ${FLAVOR}-... stage names
#   only for arguments given on the command line, not for their defaults)
# Two engines build it: podman/buildah and Docker with BuildKit (DOCKER_BUILDKIT=1; Docker 20.10's
# default, the classic builder, has no RUN --mount). The steps that reach PyPI or download
# sources take the build host's trust store as the secret build-ca where it has one (hosts whose
# TLS is intercepted), never into a layer:
#   --secret id=build-ca,src=/etc/ssl/certs/ca-certificates.crt   (podman build and docker build)

ARG FLAVOR=cpu
ARG DEBIAN_IMAGE=localhost/debian:bookworm

# ---- cpu: build stage: Debian's fabric stack with headers and compilers ---------------------
FROM ${DEBIAN_IMAGE} AS cpu-build
COPY containers/versions.env containers/lib.sh containers/distro-fabric.sh /opt/fabbench/containers/
RUN /opt/fabbench/containers/distro-fabric.sh cpu-build

# ---- cuda: build stage: CUDA from PyPI's wheels, the fabric stack from sources into /opt/fabric
FROM ${DEBIAN_IMAGE} AS cuda-build
ENV PREFIX=/opt/fabric CUDA_HOME=/usr/local/cuda
COPY containers/versions.env containers/lib.sh containers/distro-fabric.sh /opt/fabbench/containers/
RUN /opt/fabbench/containers/distro-fabric.sh cuda-build
COPY containers/cuda-toolkit.sh /opt/fabbench/containers/
RUN --mount=type=secret,id=build-ca,target=/usr/local/share/fabbench/build-ca.crt \
    /opt/fabbench/containers/cuda-toolkit.sh
COPY containers/ucx.sh containers/openmpi.sh /opt/fabbench/containers/
RUN --mount=type=secret,id=build-ca,target=/usr/local/share/fabbench/build-ca.crt \
    /opt/fabbench/containers/ucx.sh \
    && /opt/fabbench/containers/openmpi.sh \
    && rm -rf /tmp/fabbench-src
ENV PATH=/opt/fabric/bin:/usr/local/cuda/bin:${PATH} LD_LIBRARY_PATH=/opt/fabric/lib:/usr/local/cuda/lib64

# ---- the Python stack, on the flavour's build stage -----------------------------------------
# torch, mpi4py against the image's MPI, Horovod (containers/horovod.sh), then fabbench in its
# own layer so that a source change rebuilds only that layer.
FROM ${FLAVOR}-build AS python-build
ARG FLAVOR
COPY containers/versions.env containers/lib.sh containers/python-stack.sh containers/horovod.sh \
     containers/mpi4py.sh containers/wheel-record.sh containers/torch-cuda.lock /opt/fabbench/containers/
COPY wheels/ /tmp/wheels/
COPY requirements.txt /opt/fabbench/build/requirements.txt
RUN --mount=type=secret,id=build-ca,target=/usr/local/share/fabbench/build-ca.crt \
    FLAVOR=${FLAVOR} /opt/fabbench/containers/python-stack.sh deps /opt/fabbench/build/requirements.txt \
    && rm -rf /tmp/wheels
COPY pyproject.toml README.md /opt/fabbench/build/
COPY src/ /opt/fabbench/build/src/
RUN --mount=type=secret,id=build-ca,target=/usr/local/share/fabbench/build-ca.crt \
    FLAVOR=${FLAVOR} /opt/fabbench/containers/python-stack.sh fabbench /opt/fabbench/build
# the stage an engine keeps untagged after the build: named, so that .ci/image-build.sh removes
# the ones an earlier tree left (never another project's untagged images)
ARG INPUTS_HASH=unknown
LABEL io.fabbench.stage="python-build" io.fabbench.flavor="${FLAVOR}" \
      io.fabbench.inputs="${INPUTS_HASH}"

# ---- runtime bases: run-time libraries only -------------------------------------------------
FROM ${DEBIAN_IMAGE} AS cpu-runtime
COPY containers/versions.env containers/lib.sh containers/distro-fabric.sh /opt/fabbench/containers/
RUN /opt/fabbench/containers/distro-fabric.sh cpu-runtime
# sshd for the MPI Operator's workers (its own layer: the build stages never see it)
COPY containers/sshd.sh /opt/fabbench/containers/
RUN /opt/fabbench/containers/sshd.sh install

# the CUDA runtime library and the fabric stack; never the link-time stubs (lib64/stubs): the
# host's driver gives libcuda.so.1 and libnvidia-ml.so.1
FROM ${DEBIAN_IMAGE} AS cuda-runtime
COPY containers/versions.env containers/lib.sh containers/distro-fabric.sh /opt/fabbench/containers/
RUN /opt/fabbench/containers/distro-fabric.sh cuda-runtime
COPY containers/sshd.sh /opt/fabbench/containers/
RUN /opt/fabbench/containers/sshd.sh install
COPY --from=cuda-build /usr/local/cuda/lib64/libcudart.so.13 /usr/local/cuda/lib64/
COPY --from=cuda-build /usr/local/cuda/version.json /usr/local/cuda/
COPY --from=cuda-build /opt/fabric /opt/fabric
ENV PREFIX=/opt/fabric CUDA_HOME=/usr/local/cuda PATH=/opt/fabric/bin:${PATH} \
    LD_LIBRARY_PATH=/opt/fabric/lib:/usr/local/cuda/lib64

# ---- the image ------------------------------------------------------------------------------
FROM ${FLAVOR}-runtime AS runtime
ARG FLAVOR
ARG VERSION=0.1.0
ARG VCS_REF=unknown
ARG BASE_IMAGE=unknown
# the hash of the build inputs (.ci/image-build.sh: Dockerfile, containers/, src/, ...), the
# content part of the local tag; recorded in the build manifest and a label
ARG INPUTS_HASH=unknown
LABEL org.opencontainers.image.title="fabbench" \
      org.opencontainers.image.description="What a network fabric and communication primitive cost data-parallel training (${FLAVOR} flavour)" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${VCS_REF}" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.base.name="${BASE_IMAGE}" \
      io.fabbench.flavor="${FLAVOR}" \
      io.fabbench.inputs="${INPUTS_HASH}" \
      io.fabbench.build-manifest="/etc/fabbench/build.json"
COPY containers/ /opt/fabbench/containers/
COPY --from=python-build /opt/fabbench/venv /opt/fabbench/venv
ENV PATH=/opt/fabbench/venv/bin:${PATH} \
    FABBENCH_BUILD_MANIFEST=/etc/fabbench/build.json \
    LANG=C.UTF-8 PYTHONDONTWRITEBYTECODE=1
RUN FLAVOR=${FLAVOR} BASE_IMAGE=${BASE_IMAGE} VCS_REF=${VCS_REF} IMAGE_VERSION=${VERSION} \
      INPUTS_HASH=${INPUTS_HASH} \
      /opt/fabbench/containers/manifest.sh /etc/fabbench/build.json \
    && useradd --create-home --uid 1000 --user-group --shell /bin/bash fabbench \
    && install -d -o fabbench -g fabbench /work
USER 1000:1000
WORKDIR /work
ENTRYPOINT ["fabbench"]
CMD ["--help"]
