"""Container runtimes around a rank's command: apptainer, charliecloud, pyxis (srun's options)
and none (fabbench installed on the nodes). A new runtime is one entry of RUNTIMES."""

from __future__ import annotations

import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

from fabbench.errors import UsageError
from fabbench.launch.words import Shell


@dataclass(frozen=True, kw_only=True)
class Container:
    """What a rank's container needs: the image, the host paths bound into it (SRC or SRC:DST),
    the host directory the results are written to, and whether it sees the node's GPUs."""

    image: str
    results: str  # a path, or Shell text naming one ('"$results_dir"')
    binds: tuple[str, ...] = ()
    gpus: bool = False


@dataclass(frozen=True, kw_only=True)
class Wrapped:
    """A runtime's words around a rank command, and what the caller must know of them."""

    words: tuple[str, ...]         # placed before the rank's command (pyxis: srun's options)
    results: str | None = None     # where the results directory is inside; None: same path
    notes: tuple[str, ...] = ()    # what a reader of the launch must know (binds left out)
    gpu_note: str | None = None    # a step the site does once for GPUs (said, not done)


@dataclass(frozen=True, kw_only=True)
class Runtime:
    """A container runtime: how it wraps a rank command. ``launcher_options``: its words are
    options of the launcher (srun's, for pyxis), not a command of their own."""

    name: str
    wrap: Callable[[Container], Wrapped]
    launcher_options: bool = False


def _inner(word: str) -> str:
    """The text of a word as it reads inside double quotes."""
    if isinstance(word, Shell):
        if not (len(word) >= 2 and word[0] == word[-1] == '"'):
            raise ValueError(f"a Shell path must be double-quoted, not {word!r}")
        return word[1:-1]
    return "".join("\\" + c if c in '\\"$`' else c for c in word)


def _pair(src: str, dst: str) -> str:
    """SRC:DST as one word (double-quoted when a part is shell text)."""
    if isinstance(src, Shell) or isinstance(dst, Shell):
        return Shell(f'"{_inner(src)}:{_inner(dst)}"')
    return f"{src}:{dst}"


def _joined(*parts: str) -> Shell:
    """Parts glued into one bash word: literals quoted each, shell text as it is."""
    return Shell("".join(p if isinstance(p, Shell) else shlex.quote(p) for p in parts))


def _apptainer(c: Container) -> Wrapped:
    words = ["apptainer", "exec", *(["--nv"] if c.gpus else []), "--bind", c.results]
    for bind in c.binds:
        words += ["--bind", bind]
    return Wrapped(words=(*words, c.image))


CH_SHARED = ("/dev", "/proc", "/sys")  # ch-run binds these from the host itself
CH_RESULTS = "/mnt/0"  # one of the ten mount points Charliecloud images carry


def _shared_by_ch_run(bind: str) -> bool:
    src, _, dst = bind.partition(":")
    return all(any(p == top or p.startswith(top + "/") for top in CH_SHARED)
               for p in (src, dst or src))


def _charliecloud(c: Container) -> Wrapped:
    """ch-run cannot bind over /dev, /proc or /sys (it shares the host's), and a bind's
    destination must exist in a read-only image: the results go to /mnt/0."""
    words = ["ch-run", "--set-env", "-b", _pair(c.results, CH_RESULTS)]
    for bind in c.binds:
        if not _shared_by_ch_run(bind):
            words += ["-b", bind]
    shared = [b for b in c.binds if _shared_by_ch_run(b)]
    return Wrapped(words=(*words, c.image, "--"), results=CH_RESULTS,
                   notes=(f"No bind for {', '.join(shared)}: ch-run shares the host's /dev, "
                          "/proc and /sys.",) if shared else (),
                   gpu_note="GPUs: inject the host's NVIDIA libraries into the image once first "
                            "(ch-fromhost --nvidia IMAGE)." if c.gpus else None)


def _pyxis(c: Container) -> Wrapped:
    mounts = [b if ":" in b else f"{b}:{b}" for b in c.binds]  # pyxis takes SRC:DST
    return Wrapped(words=(
        _joined("--container-image=", c.image),
        _joined("--container-mounts=", _pair(c.results, c.results),
                *(part for m in mounts for part in (",", m)))))


RUNTIMES: Mapping[str, Runtime] = MappingProxyType({
    "apptainer": Runtime(name="apptainer", wrap=_apptainer),
    "charliecloud": Runtime(name="charliecloud", wrap=_charliecloud),
    "pyxis": Runtime(name="pyxis", wrap=_pyxis, launcher_options=True),
    "none": Runtime(name="none", wrap=lambda c: Wrapped(words=())),  # fabbench on the nodes
})


def runtime(name: str) -> Runtime:
    """The container runtime of this name (UsageError naming the known ones)."""
    if name not in RUNTIMES:
        raise UsageError(f"unknown container runtime {name!r} (known: {', '.join(RUNTIMES)})")
    return RUNTIMES[name]


def in_container(name: str, command: Sequence[str], container: Container) -> list[str]:
    """``command`` run in ``container`` by runtime ``name`` (a runtime of launcher options,
    pyxis, has no command of its own: refused here). The caller maps a results path inside
    the container through ``runtime(name).wrap(container).results``."""
    rt = runtime(name)
    if rt.launcher_options:
        raise UsageError(f"{name} is a launcher's option set (srun), not a command")
    return [*rt.wrap(container).words, *command]
