"""torch.distributed communicators: Gloo (host or GPU tensors) and NCCL (GPU tensors)."""

from __future__ import annotations

import datetime
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from fabbench.comm.base import GRAPH_OPS, Communicator, page_aligned
from fabbench.comm.nccl_report import NcclReport, parse_nccl_log
from fabbench.errors import RunError, TransportMismatch

if TYPE_CHECKING:
    from fabbench.comm.primitives import Primitive


class TorchComm(Communicator):
    in_place_reduce = True

    @classmethod
    def start(cls, primitive: Primitive, *, rank_env: Mapping[str, int], device: str,
              over: str | None, timeout_s: float) -> TorchComm:
        assert primitive.torch_backend is not None
        return cls(primitive.torch_backend, rank=rank_env["rank"], size=rank_env["size"],
                   local_rank=rank_env["local_rank"],
                   device="cuda" if primitive.gpu_only else device, timeout_s=timeout_s)

    def __init__(self, backend: str, *, rank: int, size: int, local_rank: int, device: str,
                 timeout_s: float) -> None:
        import torch
        import torch.distributed as dist

        self._torch, self._dist = torch, dist
        self.name, self.rank, self.size = backend, rank, size
        if backend == "nccl" or device == "cuda":
            if not torch.cuda.is_available():
                raise RunError(f"{backend} with device cuda needs a GPU and torch sees none")
            torch.cuda.set_device(local_rank % torch.cuda.device_count())
            self.device = f"cuda:{torch.cuda.current_device()}"
        else:
            self.device = "cpu"
        self._nccl_log = Path(os.environ["NCCL_DEBUG_FILE"]) if "NCCL_DEBUG_FILE" in os.environ \
            else None
        store = rendezvous(backend, rank, size, timeout_s)
        try:
            dist.init_process_group(backend, store=store, rank=rank, world_size=size,
                                    timeout=datetime.timedelta(seconds=timeout_s))
        except Exception as exc:  # the rendezvous names what failed (address, port, timeout)
            raise RunError(f"{backend} rendezvous at {os.environ.get('MASTER_ADDR')}:"
                           f"{os.environ.get('MASTER_PORT')} failed: {_first(exc)}") from None
        self._scalar = torch.zeros(1, dtype=torch.float64, device=self.device)
        self._nccl: NcclReport | None = None

    def array(self, host: np.ndarray, dtype: str) -> Any:
        return torch_array(self._torch, host, dtype, self.device)

    def host(self, buf: Any) -> np.ndarray:
        out: np.ndarray = buf.detach().to("cpu", self._torch.float64).numpy()  # a torch tensor
        return out

    def bind(self, op: str, send: Any, recv: Any) -> Callable[[], None]:
        dist = self._dist
        if op == "allreduce":
            return lambda: dist.all_reduce(recv)
        if op == "allgather":
            return lambda: dist.all_gather_into_tensor(recv, send)
        if op == "reduce_scatter":
            return lambda: dist.reduce_scatter_tensor(recv, send)
        if op == "broadcast":
            return lambda: dist.broadcast(recv, src=0)
        if op == "alltoall":
            return lambda: dist.all_to_all_single(recv, send)
        if op == "sendrecv":
            nxt, prv = (self.rank + 1) % self.size, (self.rank - 1) % self.size
            p2p = [dist.P2POp(dist.isend, send, nxt), dist.P2POp(dist.irecv, recv, prv)]

            def sendrecv() -> None:
                for work in dist.batch_isend_irecv(p2p):
                    work.wait()
            return sendrecv
        raise KeyError(op)

    def graphed(self, op: str, send: Any, recv: Any, slots: int = 1) -> Graphed:
        if slots <= 1:
            return Graphed(self._torch, op, [self.bind(op, send, recv)])
        # slots copies of each buffer, side by side (contiguous rows): the operations of a
        # graph cycle through them
        sends, recvs = send.repeat(slots).view(slots, -1), recv.repeat(slots).view(slots, -1)
        return Graphed(self._torch, op, [self.bind(op, sends[i], recvs[i])
                                         for i in range(slots)])

    def exchange(self, peer: int, send: Any, recv: Any) -> Callable[[], None]:
        dist = self._dist

        def swap() -> None:
            for work in (dist.isend(send, peer), dist.irecv(recv, peer)):
                work.wait()
        return swap

    def shift(self, send: Any, dest: int, recv: Any, source: int, tag: str) -> None:
        if dest == self.rank and source == self.rank:  # a dimension of one rank
            recv.copy_(send)
            return
        dist = self._dist
        ops = [dist.P2POp(dist.isend, send, dest), dist.P2POp(dist.irecv, recv, source)]
        for work in dist.batch_isend_irecv(ops):
            work.wait()

    def synchronize(self) -> None:
        if self.device.startswith("cuda"):
            self._torch.cuda.synchronize()

    def barrier(self) -> None:
        # an all-reduce rather than dist.barrier(): NCCL's barrier guesses the device
        self._dist.all_reduce(self._scalar)
        self.synchronize()

    def max_scalar(self, value: float) -> float:
        self._scalar.fill_(value)
        self._dist.all_reduce(self._scalar, op=self._dist.ReduceOp.MAX)
        return float(self._scalar.item())

    def gather_objects(self, obj: Any) -> list[Any]:
        out: list[Any] = [None] * self.size
        self._dist.all_gather_object(out, obj)
        return out

    def transport(self) -> str:
        if self.name == "gloo":
            # Gloo in torch has only its TCP transport on Linux; what can differ is the
            # interface its pairs use: check it against GLOO_SOCKET_IFNAME from the sockets.
            asked = [i for i in os.environ.get("GLOO_SOCKET_IFNAME", "").split(",") if i]
            used = gloo_interfaces(int(os.environ.get("MASTER_PORT", "0") or 0))
            if asked and used and not used <= set(asked):
                raise TransportMismatch(f"Gloo was asked for interface {','.join(asked)} but its "
                                        f"connections run over {','.join(sorted(used))}")
            return "gloo/tcp"
        return self._nccl_report().transport

    def _nccl_report(self) -> NcclReport:
        """Read once, after one all-reduce: NCCL sets up its communicator and connects its
        channels lazily, at the first collective."""
        if self._nccl is None:
            self.barrier()
            self._nccl = nccl_report(self._nccl_log)
        return self._nccl

    def gpudirect(self) -> str | None:
        return self._nccl_report().gpudirect if self.name == "nccl" else None

    def library_report(self) -> dict[str, Any] | None:
        return self._nccl_report().summary() if self.name == "nccl" else None

    def close(self) -> None:
        if self._dist.is_initialized():
            self._dist.destroy_process_group()


class Graphed:
    """One operation whose batches run as CUDA graphs (--cuda-graph on): ``ready(n)`` captures
    graphs for n back-to-back calls once, before the timing engine's clock starts; ``batch(n)``
    replays them, so that the host issues a launch per ``GRAPH_OPS`` operations and the time is
    what the library does on the GPU (nccl-tests' -G captures its timed iterations likewise).
    ``calls`` are the operation bound to each of its buffer slots: a graph's calls cycle
    through them (as nccl-tests shifts its buffers at each iteration), so that a message that
    fits the GPU's L2 cache is not timed from it. A plain call is the eager call on the first
    slot: the engine's first call, which also has NCCL set up its communicator and connect
    before anything is captured. A capture that fails fails the run with torch's own message:
    there is no eager fallback under a graph's name."""

    def __init__(self, torch: Any, op: str, calls: list[Callable[[], None]]) -> None:
        self._torch, self._op, self._calls = torch, op, calls
        self._graphs: dict[int, Any] = {}  # operations -> its captured graph

    def __call__(self) -> None:
        self._calls[0]()

    @staticmethod
    def split(n: int) -> tuple[int, int]:
        """n operations as (full graphs of GRAPH_OPS, the rest's operations)."""
        return divmod(n, GRAPH_OPS)

    def ready(self, n: int) -> None:
        full, rest = self.split(n)
        for k in (GRAPH_OPS if full else 0, rest):
            if not k or k in self._graphs:
                continue
            rests = [j for j in self._graphs if j != GRAPH_OPS]
            if k != GRAPH_OPS and len(rests) >= 2:  # the warm-up's and the samples' are kept
                del self._graphs[rests[0]]
            self._graphs[k] = self._capture(k)

    def _capture(self, n: int) -> Any:
        torch = self._torch
        graph = torch.cuda.CUDAGraph()
        try:
            with torch.cuda.graph(graph):
                for i in range(n):
                    self._calls[i % len(self._calls)]()
        except Exception as exc:
            raise RunError(f"capturing {self._op} in a CUDA graph failed: {_first(exc)} "
                           "(--cuda-graph off times it with eager calls)") from None
        return graph

    def batch(self, n: int) -> None:
        full, rest = self.split(n)
        for _ in range(full):
            self._graphs[GRAPH_OPS].replay()
        if rest:
            self._graphs[rest].replay()


def torch_array(torch: Any, host: np.ndarray, dtype: str, device: str) -> Any:
    """``host`` as a tensor of ``dtype`` on ``device``; on the CPU in page-aligned memory of its
    own (comm.base.page_aligned: where torch's allocator places it depends on the process's
    history, and the time of a collective depends on where it is)."""
    values = torch.from_numpy(np.ascontiguousarray(host, dtype=np.float64))
    kind = getattr(torch, dtype)
    if device != "cpu":
        return values.to(device=device, dtype=kind)
    nbytes = host.size * torch.empty((), dtype=kind).element_size()
    return torch.frombuffer(page_aligned(nbytes), dtype=kind, count=host.size).copy_(values)


def _first(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]


def rendezvous(backend: str, rank: int, size: int, timeout_s: float) -> Any:
    """The TCP store at MASTER_ADDR:MASTER_PORT (hosted by rank 0), with every process's claim
    of its rank counted there before the process group forms: two processes that claim one rank
    (launcher variables inherited or set by hand) fail on every rank with one line, instead of a
    hang or two interleaved worlds. A second claimant of rank 0 finds the port taken and joins as
    a client, so that its claim is counted too."""
    import time

    from torch.distributed import TCPStore

    addr, port = os.environ.get("MASTER_ADDR"), os.environ.get("MASTER_PORT")
    if not addr or not port or not port.isdigit():
        raise RunError(f"{backend}'s rendezvous needs MASTER_ADDR and MASTER_PORT (torchrun and "
                       "fabbench's own launcher set them; under another launcher export the "
                       "first node's address and a free port)")
    where = f"{addr}:{port}"
    timeout = datetime.timedelta(seconds=timeout_s)

    def client() -> Any:
        return TCPStore(addr, int(port), None, False, timeout)

    hosting = rank == 0
    try:
        store = TCPStore(addr, int(port), None, True, timeout, wait_for_workers=False) \
            if hosting else client()
    except Exception as exc:
        if rank != 0 or "ADDRINUSE" not in str(exc).upper().replace(" ", ""):
            raise RunError(f"{backend} rendezvous at {where} failed: {_first(exc)}") from None
        try:  # another process hosts rank 0's store already: count this claim there
            store, hosting = client(), False
        except Exception:
            raise RunError(f"{backend} rendezvous: port {where} is taken by something that is "
                           "not a rendezvous") from None
    store.add(f"fabbench/claim/{rank}", 1)
    arrived = store.add("fabbench/arrived", 1)
    end = time.monotonic() + timeout_s
    while arrived < size:
        if time.monotonic() > end:
            raise RunError(f"{backend} rendezvous at {where}: {arrived} of {size} ranks "
                           f"arrived within {timeout_s:g} s")
        time.sleep(0.05)
        arrived = store.add("fabbench/arrived", 0)
    claims = [store.add(f"fabbench/claim/{r}", 0) for r in range(size)]
    store.add("fabbench/checked", 1)
    twice = [r for r, n in enumerate(claims) if n > 1]
    if twice or arrived > size:
        if hosting:  # the others read the claims from this store: let them finish
            while store.add("fabbench/checked", 0) < arrived and time.monotonic() < end:
                time.sleep(0.05)
        missing = [r for r, n in enumerate(claims) if n == 0]
        r = twice[0] if twice else rank
        raise RunError(f"{claims[r] if twice else arrived} processes claim "
                       + (f"rank {r} of {size}" if twice else f"a world of {size}")
                       + (f" and none claims rank {missing[0]}" if missing else "")
                       + ": the launcher's rank variables are not this job's (inherited from "
                       "an outer job, or set by hand)")
    return store


def gloo_interfaces(store_port: int) -> set[str]:
    """The interfaces of this process's established TCP connections other than those of the
    rendezvous store: Gloo's pairs (connected to every peer at start-up)."""
    import psutil

    owner: dict[str, str] = {}
    for name, addrs in psutil.net_if_addrs().items():
        for a in addrs:
            owner.setdefault(a.address.split("%")[0], name)
    used = set()
    for c in psutil.Process().net_connections(kind="tcp"):
        if c.status != "ESTABLISHED" or not c.raddr or store_port in (c.laddr.port,
                                                                       c.raddr.port):
            continue
        ip = c.laddr.ip.removeprefix("::ffff:")
        used.add(owner.get(ip, ip))
    return used


def nccl_report(log: Path | None) -> NcclReport:
    """NCCL's own report (NCCL_DEBUG=INFO, NCCL_DEBUG_SUBSYS=INIT,NET written to a file per
    process, NCCL_DEBUG_FILE=<dir>/nccl.%h.%p), read by fabbench.comm.nccl_report."""
    if log is None:
        raise RunError("NCCL_DEBUG_FILE is not set: cannot tell which transport NCCL used")
    texts = [p.read_text(errors="replace") for p in log.parent.glob(log.name.split("%")[0] + "*")]
    return parse_nccl_log("\n".join(texts))
