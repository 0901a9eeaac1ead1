"""A real OCI registry for the tests: Debian's docker-registry (distribution 2.8) serving TLS on
loopback, with a self-signed certificate made for this test session in a temporary folder, on a
free port. `tls_registry(folder)` starts it, waits (with a deadline) until `/v2/` answers over
verified TLS, and always stops it: on exit, also after a failure inside, the process is gone and
its port is free again.

Clients get the certificate the way each one takes it: podman/skopeo a cert dir holding `ca.crt`,
Charliecloud's `ch-image` REQUESTS_CA_BUNDLE, Apptainer (Go) SSL_CERT_FILE.
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

REGISTRY_BIN = "/usr/bin/docker-registry"
START_DEADLINE_S = 30
STOP_DEADLINE_S = 15


@dataclass(frozen=True)
class Registry:
    host: str         # "127.0.0.1:PORT", what an image reference starts with
    port: int
    ca: Path          # the self-signed certificate (it is its own CA)
    cert_dir: Path    # a folder holding ca.crt (podman --cert-dir, skopeo --*-cert-dir)
    storage: Path

    def url(self, path: str = "/v2/") -> str:
        return f"https://{self.host}{path}"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def port_is_free(port: int) -> bool:
    """No process listens on (or holds) the port; connections the registry closed may still be
    in TIME_WAIT, which does not keep a server from binding it (SO_REUSEADDR)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def self_signed(folder: Path, name: str = "registry") -> tuple[Path, Path]:
    """A key and a certificate for 127.0.0.1 (subjectAltName IP, as Go's TLS requires)."""
    key, crt = folder / f"{name}.key", folder / f"{name}.crt"
    res = subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
         "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
         "-keyout", str(key), "-out", str(crt)],
        capture_output=True, text=True, timeout=60, check=False)
    if res.returncode != 0:
        raise RuntimeError(f"openssl req failed: {res.stderr.strip()}")
    return key, crt


def answers(url: str, ca: Path | None, timeout: float = 2.0) -> bool:
    """True when URL answers HTTP (any status) over TLS verified against CA."""
    context = ssl.create_default_context(cafile=str(ca) if ca else None)
    try:
        with urllib.request.urlopen(url, timeout=timeout, context=context):
            return True
    except urllib.error.HTTPError:
        return True
    except (urllib.error.URLError, OSError):
        return False


@contextlib.contextmanager
def tls_registry(folder: Path) -> Iterator[Registry]:
    """Run docker-registry on 127.0.0.1:<free port> with TLS, storage and certificate in FOLDER."""
    if not Path(REGISTRY_BIN).exists():
        raise RuntimeError(f"{REGISTRY_BIN} not found (.ci/apt-packages.txt: docker-registry)")
    folder.mkdir(parents=True, exist_ok=True)
    key, crt = self_signed(folder)
    cert_dir = folder / "certs.d"
    cert_dir.mkdir(exist_ok=True)
    shutil.copy(crt, cert_dir / "ca.crt")
    storage = folder / "storage"
    storage.mkdir(exist_ok=True)
    port = free_port()
    config = folder / "config.yml"
    config.write_text(
        "version: 0.1\n"
        "log: {level: warn}\n"
        f"storage: {{filesystem: {{rootdirectory: {storage}}}, delete: {{enabled: true}}}}\n"
        f"http: {{addr: '127.0.0.1:{port}', tls: {{certificate: {crt}, key: {key}}}}}\n")
    log = (folder / "registry.log").open("w")
    proc = subprocess.Popen([REGISTRY_BIN, "serve", str(config)], stdout=log,
                            stderr=subprocess.STDOUT, start_new_session=True)
    registry = Registry(host=f"127.0.0.1:{port}", port=port, ca=crt, cert_dir=cert_dir,
                        storage=storage)
    try:
        deadline = time.monotonic() + START_DEADLINE_S
        while not answers(registry.url(), crt):
            if proc.poll() is not None:
                raise RuntimeError(f"docker-registry exited ({proc.returncode}): "
                                   + (folder / "registry.log").read_text()[-2000:])
            if time.monotonic() > deadline:
                raise RuntimeError(f"docker-registry did not answer on {registry.url()} in "
                                   f"{START_DEADLINE_S}s")
            time.sleep(0.2)
        yield registry
    finally:
        stop(proc, port)
        log.close()


def stop(proc: subprocess.Popen, port: int) -> None:
    """Stop the registry (SIGTERM, then SIGKILL) and wait until its port is free."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=STOP_DEADLINE_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=STOP_DEADLINE_S)
    deadline = time.monotonic() + STOP_DEADLINE_S
    while not port_is_free(port):
        if time.monotonic() > deadline:
            raise RuntimeError(f"port {port} still taken {STOP_DEADLINE_S}s after the registry "
                               "stopped")
        time.sleep(0.2)
