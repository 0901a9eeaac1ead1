"""The port rule: which TCP port a launch's rendezvous takes.

A job on a shared first node gets its own ten ports; its benchmarks (or the study's cells,
which run one after the other) take them in turn. A Kubernetes job's pods have a network of
their own: its one launch rendezvous at torch's usual port (`fabbench render k8s`, and the
chart's masterPort, generated from it). A local launch takes a port free now."""

from __future__ import annotations

import socket

from fabbench.launch.words import Shell

PORT_BASE, PORT_JOBS, PORTS_PER_JOB = 20000, 4000, 10
RENDEZVOUS_PORT = 29500


def rendezvous_port(job_id: int, index: int) -> int:
    """The rendezvous port of the ``index``-th launch of scheduler job ``job_id``."""
    return PORT_BASE + (job_id % PORT_JOBS) * PORTS_PER_JOB + index % PORTS_PER_JOB


def rendezvous_port_shell(job_var: str) -> Shell:
    """rendezvous_port(job, 0) as bash arithmetic on the variable ``job_var`` (a rendered
    script adds the launch's index)."""
    return Shell(f"{PORT_BASE} + ({job_var} % {PORT_JOBS}) * {PORTS_PER_JOB}")


def free_port() -> int:
    """A port free now on this host (a local launch's rendezvous)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]  # typeshed's address is Any: (host, port) for AF_INET
        return port
