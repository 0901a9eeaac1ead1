"""What `fabbench trace -- COMMAND` runs inside each rank of the job it records, with no change
to the job's script: the folder fabbench puts first on PYTHONPATH holds a ``sitecustomize`` that
calls `install` (and then the job's own ``sitecustomize``, if it has one).

Once the job's default process group is up (``init_process_group`` returns), the rank starts
PyTorch's execution-trace observer and a CPU Kineto profiler; it numbers the process groups the
job creates, in the order every rank creates them (``new_group``, ``new_subgroups``, a device
mesh's groups, ``split_group``), and wraps each ``torch.distributed`` collective and
point-to-point call in a record_function ``## fabbench group N ##`` naming the group it used, so
that the trace says which group each operation went to (gloo's execution trace does not). What
DistributedDataParallel's C++ reducer issues has no Python call to wrap: the rank notes the
groups DDP modules were built with, and the reader gives those operations that group. At
``destroy_process_group``, at ``--steps`` optimizer steps or at exit, whichever comes first, the
rank stops and writes ``et-R.json`` (the execution trace), ``kineto-R.json`` (the chrome trace)
and ``groups-R.json`` (the groups, in order) under $FABBENCH_TRACE_DIR.

Only the standard library and torch: this module runs in the job's interpreter, before the
job's own imports, and must not pull fabbench's in."""

from __future__ import annotations

import atexit
import functools
import inspect
import json
import os
from typing import Any

ENV_DIR = "FABBENCH_TRACE_DIR"
ENV_STEPS = "FABBENCH_TRACE_STEPS"
#: the annotation around a collective call: its group's index and the call's name (the reader
#: parses both: isend, irecv and batch_isend_irecv are async, which the ET does not say)
GROUP_MARK = "## fabbench group {} {} ##"
#: the torch.distributed calls that issue communication, each wrapped with its group's mark
CALLS = ("all_reduce", "all_reduce_coalesced", "all_gather", "all_gather_coalesced",
         "all_gather_into_tensor", "_all_gather_base", "all_gather_single", "all_gather_object",
         "reduce_scatter", "reduce_scatter_tensor", "_reduce_scatter_base",
         "reduce_scatter_single", "broadcast", "broadcast_object_list", "reduce", "all_to_all",
         "all_to_all_single", "barrier", "monitored_barrier", "send", "recv", "isend", "irecv",
         "send_object_list", "recv_object_list", "gather", "gather_object", "scatter",
         "scatter_object_list", "batch_isend_irecv")


class _Recorder:
    """One rank's recording: the groups seen, the profiler, and writing it all once."""

    def __init__(self, directory: str, steps: int) -> None:
        self.directory, self.steps = directory, steps
        self.groups: list[dict[str, Any]] = []  # every group created, in creation order
        self.index: dict[int, int] = {}  # id(ProcessGroup) -> its index, for this rank's groups
        self.ddp_groups: list[int] = []
        self.profiler: Any = None
        self.rank = -1
        self.world = 0
        self.optimizer_steps = 0
        self.done = False

    def start(self) -> None:
        """The default group is up: number it 0 and start recording."""
        import torch
        import torch.distributed as dist

        if self.profiler is not None:  # a second init_process_group: recording already
            return
        self.rank, self.world = dist.get_rank(), dist.get_world_size()
        self.groups = [{"ranks": list(range(self.world)), "name": "default"}]
        self.index = {id(dist.group.WORLD): 0}
        os.makedirs(self.directory, exist_ok=True)
        observer = torch.profiler.ExecutionTraceObserver().register_callback(
            os.path.join(self.directory, f"et-{self.rank}.json"))
        self.profiler = torch.profiler.profile(
            activities=[torch.profiler.ProfilerActivity.CPU], execution_trace_observer=observer)
        self.profiler.start()
        if self.steps > 0:
            from torch.optim.optimizer import register_optimizer_step_post_hook

            register_optimizer_step_post_hook(self._stepped)
        atexit.register(self.finish)

    def _stepped(self, *_: Any) -> None:
        self.optimizer_steps += 1
        if self.optimizer_steps >= self.steps:
            self.finish()

    def created(self, group: Any, ranks: Any, name: str) -> None:
        """A group was created (by every rank, in the same order); ``group`` is this rank's
        handle, or not a group where this rank is no member."""
        import torch.distributed as dist

        world = dist.get_world_size() if dist.is_initialized() else 0
        members = sorted(int(r) for r in ranks) if ranks else list(range(world))
        self.groups.append({"ranks": members, "name": name or ""})
        if isinstance(group, dist.ProcessGroup):
            self.index[id(group)] = len(self.groups) - 1

    def group_of(self, group: Any) -> int:
        return 0 if group is None else self.index.get(id(group), -1)

    def finish(self, stopped: str = "") -> None:
        """Stop and write this rank's files (``stopped``: why before the job's end, if it
        was cut short; the reader refuses such a recording)."""
        if self.done or self.profiler is None:
            return
        self.done = True
        self.profiler.stop()
        self.profiler.execution_trace_observer.cleanup()  # writes the ET's end
        self.profiler.export_chrome_trace(
            os.path.join(self.directory, f"kineto-{self.rank}.json"))
        with open(os.path.join(self.directory, f"groups-{self.rank}.json"), "w") as out:
            json.dump({"rank": self.rank, "world": self.world, "groups": self.groups,
                       "ddp_groups": sorted(set(self.ddp_groups)),
                       "optimizer_steps": self.optimizer_steps, "stopped": stopped}, out)


def install() -> None:
    """Patch torch.distributed in this interpreter when fabbench is recording it."""
    directory = os.environ.get(ENV_DIR)
    if not directory:
        return
    try:
        import torch.distributed as dist
        import torch.distributed.distributed_c10d as c10d
    except ImportError:
        return
    if not dist.is_available():
        return
    recorder = _Recorder(directory, int(os.environ.get(ENV_STEPS) or 0))
    modules = [dist, c10d]
    try:
        import torch.distributed.device_mesh as mesh
        modules.append(mesh)
    except ImportError:
        pass

    def patch(name: str, wrapper: Any) -> None:
        original = getattr(c10d, name, None)
        if original is None:
            return
        wrapped = functools.wraps(original)(wrapper(original))
        for module in modules:
            if getattr(module, name, None) is original:
                setattr(module, name, wrapped)

    def init_wrapper(original: Any) -> Any:
        def init_process_group(*args: Any, **kwargs: Any) -> Any:
            result = original(*args, **kwargs)
            recorder.start()
            return result
        return init_process_group

    def destroy_wrapper(original: Any) -> Any:
        def destroy_process_group(*args: Any, **kwargs: Any) -> Any:
            if not args and kwargs.get("group") is None:
                recorder.finish()
            return original(*args, **kwargs)
        return destroy_process_group

    def new_group_wrapper(original: Any) -> Any:
        def _new_group_with_tag(*args: Any, **kwargs: Any) -> Any:
            group = original(*args, **kwargs)
            ranks = kwargs.get("ranks", args[0] if args else None)
            recorder.created(group, ranks, kwargs.get("group_desc") or "")
            return group
        return _new_group_with_tag

    def split_wrapper(original: Any) -> Any:
        def split_group(*args: Any, **kwargs: Any) -> Any:
            group = original(*args, **kwargs)
            # every rank passes every split; this rank's group is the one holding it
            splits = kwargs.get("split_ranks", args[1] if len(args) > 1 else None) or []
            for ranks in splits:
                mine = group is not None and dist.get_rank() in ranks
                recorder.created(group if mine else None, ranks,
                                 kwargs.get("group_desc") or "")
            return group
        return split_group

    def call_wrapper(original: Any) -> Any:
        parameters = list(inspect.signature(original).parameters)
        at = parameters.index("group") if "group" in parameters else -1

        def call(*args: Any, **kwargs: Any) -> Any:
            if recorder.profiler is None or recorder.done:
                return original(*args, **kwargs)
            if at < 0:  # batch_isend_irecv: the group of its first operation
                ops = kwargs.get("p2p_op_list", args[0] if args else [])
                group = getattr(ops[0], "group", None) if ops else None
            else:
                group = kwargs.get("group", args[at] if len(args) > at else None)
            import torch

            mark = GROUP_MARK.format(recorder.group_of(group), original.__name__)
            with torch.profiler.record_function(mark):
                return original(*args, **kwargs)
        return call

    patch("init_process_group", init_wrapper)
    patch("destroy_process_group", destroy_wrapper)
    patch("_new_group_with_tag", new_group_wrapper)
    patch("split_group", split_wrapper)
    for name in CALLS:
        patch(name, call_wrapper)
    _note_ddp(recorder)
    _yield_to_the_jobs_profiler(recorder)


def _yield_to_the_jobs_profiler(recorder: _Recorder) -> None:
    """Two profilers cannot run at once (the execution-trace observer is one per process): when
    the job starts its own torch.profiler, this rank's recording stops there, so that the job
    runs on, and says why (the reader refuses the recording, pointing at --read)."""
    import torch.profiler

    def yielding(original: Any) -> Any:
        @functools.wraps(original)
        def method(self: Any, *args: Any, **kwargs: Any) -> Any:
            if recorder.profiler is not None and self is not recorder.profiler and \
                    self is not recorder.profiler.execution_trace_observer:
                recorder.finish(stopped="the job started its own torch.profiler")
            return original(self, *args, **kwargs)
        return method

    profile, observer = torch.profiler.profile, torch.profiler.ExecutionTraceObserver
    profile.start = yielding(profile.start)  # type: ignore[method-assign]
    observer.register_callback = yielding(  # type: ignore[method-assign]
        observer.register_callback)


def _note_ddp(recorder: _Recorder) -> None:
    """Note the group of each DistributedDataParallel module (its reducer's operations)."""
    try:
        from torch.nn.parallel import DistributedDataParallel
    except ImportError:
        return
    original = DistributedDataParallel.__init__

    @functools.wraps(original)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        recorder.ddp_groups.append(recorder.group_of(getattr(self, "process_group", None)))

    DistributedDataParallel.__init__ = __init__  # type: ignore[method-assign]
