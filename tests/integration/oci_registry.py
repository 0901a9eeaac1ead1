"""A real OCI registry for the tests: Debian's docker-registry (distribution 2.8) serving TLS on
loopback, with a self-signed certificate made for this test session in a temporary folder, on a
free port. `tls_registry(folder)` starts it, waits (with a deadline) until `/v2/` answers over
verified TLS, and always stops it: on exit, also after a failure inside, the process is gone and
its port is free again.

Clients get the certificate the way each one takes it: podman/skopeo a cert dir holding `ca.crt`,
Charliecloud's `ch-image` REQUESTS_CA_BUNDLE, Apptainer (Go) SSL_CERT_FILE.

The faults of a pull (test_setup_faults.py): `cutting_proxy` forwards a registry's bytes and cuts
(or stalls) every connection after so many; `push_image` pushes an image no runtime here has (so a
pull really downloads its layer); `tampered` changes a stored blob's bytes and puts them back.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import select
import shutil
import socket
import ssl
import struct
import subprocess
import tarfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
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


# ---- faults of a pull: a connection cut mid-transfer, a blob whose bytes were changed ---------

@dataclass
class CutProxy:
    """A TCP forwarder on loopback in front of a registry that cuts (RST) every connection once
    ``cut_after`` bytes went from the registry to the client: TLS passes through untouched (the
    certificate names 127.0.0.1, whatever the port), small requests (the manifest, the config)
    get through, a layer's download is cut, and so is every retry. With ``stall`` the connection
    is not cut but goes silent (held open, nothing more forwarded), as a registry that hangs."""

    host: str                  # "127.0.0.1:PORT", what an image reference starts with
    port: int
    cut_after: int
    stall: bool = False
    connections: int = 0
    cuts: list[float] = field(default_factory=list)  # time.monotonic() of each cut (or stall)


@contextlib.contextmanager
def cutting_proxy(target_port: int, cut_after: int, stall: bool = False) -> Iterator[CutProxy]:
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    listener.settimeout(0.2)
    port = listener.getsockname()[1]
    proxy = CutProxy(host=f"127.0.0.1:{port}", port=port, cut_after=cut_after, stall=stall)
    stopping = threading.Event()
    workers: list[threading.Thread] = []

    def reset(*socks: socket.socket) -> None:  # close with RST, as a dropped link looks
        for s in socks:
            with contextlib.suppress(OSError):
                s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            s.close()

    def forward(client: socket.socket) -> None:
        try:
            upstream = socket.create_connection(("127.0.0.1", target_port), timeout=5)
        except OSError:
            reset(client)
            return
        sent = 0
        try:
            while not stopping.is_set():
                ready, _, _ = select.select([client, upstream], [], [], 0.2)
                for s in ready:
                    data = s.recv(65536)
                    if not data:
                        return
                    if s is client:
                        upstream.sendall(data)
                        continue
                    room = proxy.cut_after - sent
                    client.sendall(data[:room])
                    sent += min(room, len(data))
                    if sent >= proxy.cut_after:
                        proxy.cuts.append(time.monotonic())
                        while proxy.stall and not stopping.wait(0.2):
                            pass
                        return
        except OSError:
            return
        finally:
            reset(client, upstream)

    def accept() -> None:
        while not stopping.is_set():
            try:
                client, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            client.setblocking(True)
            proxy.connections += 1
            worker = threading.Thread(target=forward, args=(client,), daemon=True)
            workers.append(worker)
            worker.start()

    acceptor = threading.Thread(target=accept, daemon=True)
    acceptor.start()
    try:
        yield proxy
    finally:
        stopping.set()
        acceptor.join(timeout=STOP_DEADLINE_S)
        listener.close()
        for worker in workers:
            worker.join(timeout=STOP_DEADLINE_S)
        if acceptor.is_alive() or any(w.is_alive() for w in workers):
            raise RuntimeError("the cutting proxy's threads did not stop")


def _request(url: str, ca: Path, method: str, body: bytes = b"",
             headers: dict[str, str] | None = None) -> tuple[int, dict[str, str]]:
    req = urllib.request.Request(url, data=body if method in ("PUT", "POST") else None,
                                 method=method, headers=headers or {})
    context = ssl.create_default_context(cafile=str(ca))
    with urllib.request.urlopen(req, timeout=60, context=context) as r:
        return r.status, dict(r.headers)


def push_blob(registry: Registry, name: str, data: bytes) -> str:
    """Upload DATA as a blob of repository NAME (monolithic upload); its digest."""
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    _, headers = _request(registry.url(f"/v2/{name}/blobs/uploads/"), registry.ca, "POST")
    location = headers["Location"]
    if location.startswith("/"):
        location = registry.url(location)
    sep = "&" if "?" in location else "?"
    status, _ = _request(f"{location}{sep}digest={digest}", registry.ca, "PUT", data,
                         {"Content-Type": "application/octet-stream"})
    assert status == 201, status
    return digest


def push_image(registry: Registry, name: str, tag: str, files: dict[str, bytes]) -> tuple[str, str]:
    """Push a one-layer OCI image of FILES, its layer an *uncompressed* tar (the registry stores
    and serves its bytes as they are, and a client finds a changed byte by the digest alone, not
    by a gzip error first). Returns (the manifest's digest, the layer's digest)."""
    layer = io.BytesIO()
    with tarfile.open(fileobj=layer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for path, data in files.items():
            info = tarfile.TarInfo(path)
            info.size, info.mode, info.mtime = len(data), 0o644, 0
            tar.addfile(info, io.BytesIO(data))
    layer_bytes = layer.getvalue()
    layer_digest = push_blob(registry, name, layer_bytes)
    config = json.dumps({"architecture": "amd64", "os": "linux",
                         "created": "2026-01-01T00:00:00Z",
                         "config": {"Env": ["PATH=/usr/bin:/bin"]},
                         "rootfs": {"type": "layers", "diff_ids": [layer_digest]},
                         "history": [{"created": "2026-01-01T00:00:00Z",
                                      "created_by": "oci_registry.push_image"}]}).encode()
    config_digest = push_blob(registry, name, config)
    manifest = json.dumps({
        "schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                   "digest": config_digest, "size": len(config)},
        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar",
                    "digest": layer_digest, "size": len(layer_bytes)}]}).encode()
    status, _ = _request(registry.url(f"/v2/{name}/manifests/{tag}"), registry.ca, "PUT",
                         manifest, {"Content-Type": "application/vnd.oci.image.manifest.v1+json"})
    assert status == 201, status
    return "sha256:" + hashlib.sha256(manifest).hexdigest(), layer_digest


def blob_path(registry: Registry, digest: str) -> Path:
    """Where the registry (distribution's filesystem driver) keeps a blob's bytes."""
    hexa = digest.removeprefix("sha256:")
    return registry.storage / "docker/registry/v2/blobs/sha256" / hexa[:2] / hexa / "data"


@contextlib.contextmanager
def tampered(path: Path, offset: int, length: int = 16) -> Iterator[None]:
    """LENGTH bytes at OFFSET of a stored blob inverted (same size, so the registry serves it
    with the same Content-Length); the original bytes are always put back."""
    with path.open("r+b") as f:
        f.seek(offset)
        original = f.read(length)
        f.seek(offset)
        f.write(bytes(b ^ 0xFF for b in original))
    try:
        yield
    finally:
        with path.open("r+b") as f:
            f.seek(offset)
            f.write(original)
