"""Options shared by several commands, declared once."""

from __future__ import annotations

from typing import Annotated

import typer

Fabric = Annotated[str, typer.Option(
    "--fabric", "-f", help="ethernet, infiniband, omnipath, shm, auto, a site profile's name, "
    "or the path of a profile .toml file.")]
Primitive = Annotated[str | None, typer.Option(
    "--primitive", "-p", help="mpi, gloo, nccl or horovod. Default: nccl when GPUs are "
    "visible, else mpi.")]
Wire = Annotated[str, typer.Option(
    "--wire", help="native (the fabric's hardware) or tcp (its software stack over TCP: UCX "
    "for infiniband, libfabric/OFI for omnipath).")]
Ranks = Annotated[int | None, typer.Option(
    "--ranks", "-n", help="Ranks to start (outside a job). Default: 2 local ranks; under "
    "`fabbench emulate`, nodes x ranks per node.", show_default=False)]
Json = Annotated[bool, typer.Option("--json", help="Machine-readable output.")]
GpuDirect = Annotated[str, typer.Option(
    "--gpudirect", help="GPUDirect RDMA with --device cuda: on or off (the fabric profile's "
    "settings for the primitive; the run fails when the library reports otherwise), or auto "
    "(the library decides; what it did is recorded).")]
