"""The search: one axis at a time (a coordinate search), each value against what is chosen so far,
in alternating launches of `fabbench run`, judged point by point by compare's rule
(docs/tuning.md).

A stage launches the base and every candidate once a round, for ``repeats`` rounds in turned
order; each trial has its own profile and results file, so a stopped tune resumes and decides as
it would have. A candidate is faster at a point when report.significance says so and its median
is below the base's in every round (launches are independent, samples are not); a failed launch
or another transport refuses it. A per-size axis keeps the fastest value per size; another axis
the value faster somewhere and slower nowhere, by geometric-mean speed-up. A last stage runs the
default against the tuned settings; where they are slower somewhere, they are narrowed and
checked again (at most NARROWINGS times), and settings that still do not hold write no profile."""

from __future__ import annotations

import dataclasses
import json
import math
import re
import statistics
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from fabbench import __version__
from fabbench.config import RunConfig
from fabbench.errors import RunError, UsageError
from fabbench.fabrics.profile import Axis, Profile, Settings, load_profile, profile_toml
from fabbench.procs import signals_unwind
from fabbench.report.significance import Verdict, compare_samples, median_ratio
from fabbench.results import output_files
from fabbench.results.reader import read_results
from fabbench.results.records import Ceiling, Run, Summary
from fabbench.study.run import launch_logged, results_ok
from fabbench.tune import STATE, library
from fabbench.tune.outputs import RULES, rules_file
from fabbench.units import format_size
from fabbench.workloads.collectives.record import Collective
from fabbench.workloads.collectives.workload import CollectivesWorkload

TRIAL_DEADLINE_S = 900.0
NARROWINGS = 2  # final stages after the first, each with the tuned settings narrowed


@dataclass(frozen=True)
class Choice:
    """Settings on top of the profile's: MCA parameters, environment, per-size algorithms."""

    mca: Mapping[str, str] = field(default_factory=dict)
    env: Mapping[str, str] = field(default_factory=dict)
    # (op, bytes) -> algorithm number, or "ALGORITHM:SEGMENT", for the coll_tuned rules file
    per_size: Mapping[tuple[str, int], str] = field(default_factory=dict)

    def with_value(self, axis: Axis, value: str) -> Choice:
        mca, env = {**self.mca, **axis.needs_mca}, {**self.env, **axis.needs_env}
        (mca if axis.kind == "mca" else env).update(axis.settings_of(value))
        return Choice(mca, env, self.per_size)

    def to_json(self) -> dict[str, Any]:
        return {"mca": dict(self.mca), "env": dict(self.env),
                "per_size": [[op, size, alg] for (op, size), alg in sorted(self.per_size.items())]}


@dataclass
class TunePoint:
    """One candidate at one (op, size) against the stage's base."""

    op: str
    bytes: int
    base_us: float
    value_us: float
    verdict: Verdict
    # the launch-by-launch medians agree with the pooled verdict in every round: samples of one
    # launch are not independent of each other, launches are (more or less)
    every_round: bool = True

    @property
    def faster(self) -> bool:
        return self.verdict.significant and self.verdict.ratio < 1 and self.every_round

    @property
    def slower(self) -> bool:
        return self.verdict.significant and self.verdict.ratio > 1 and self.every_round

    def to_json(self) -> dict[str, Any]:
        v = self.verdict
        return {"op": self.op, "bytes": self.bytes, "base_us": self.base_us,
                "value_us": self.value_us, "ratio": v.ratio, "ci95": [v.ci_low, v.ci_high],
                "p": v.p_value, "every_round": self.every_round, "faster": self.faster,
                "slower": self.slower}


@dataclass
class Candidate:
    value: str
    points: list[TunePoint] = field(default_factory=list)
    refused: str | None = None  # why it cannot win (a failed launch, another transport)

    @property
    def speedup(self) -> float:
        """Geometric mean of base time / its time over the points."""
        if not self.points:
            return 1.0
        return math.exp(statistics.fmean(-math.log(p.verdict.ratio) for p in self.points))

    def to_json(self) -> dict[str, Any]:
        return {"value": self.value, "refused": self.refused, "speedup": self.speedup,
                "points": [p.to_json() for p in self.points]}


@dataclass
class Stage:
    name: str                 # the axis ("mca:btl_tcp_links") or "final"
    base: Choice
    candidates: list[Candidate] = field(default_factory=list)
    chosen: str | None = None  # the value taken (global axis); None: the base stays
    chosen_per_size: dict[tuple[str, int], str] = field(default_factory=dict)
    transport: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"axis": self.name, "base": self.base.to_json(), "transport": self.transport,
                "chosen": self.chosen,
                "chosen_per_size": [[op, n, v] for (op, n), v in
                                    sorted(self.chosen_per_size.items())],
                "candidates": [c.to_json() for c in self.candidates]}


@dataclass
class TuneEvent:
    """Progress: a trial starts ("trial") or was found done ("skip")."""

    what: str
    done: int
    total: int | None
    label: str


@dataclass
class TuneOutcome:
    directory: Path
    profile: Profile
    primitive: str
    stages: list[Stage]
    tuned: Choice             # the settings the last final stage ran
    final: Stage | None       # the last final stage
    # the final stages before it, and what each narrowing dropped, in order
    narrowed: list[tuple[Stage, str]] = field(default_factory=list)

    @property
    def holds(self) -> bool:
        """The final stage found the tuned settings faster somewhere and slower nowhere."""
        if self.final is None:
            return False
        cand = self.final.candidates[0]
        return cand.refused is None and any(p.faster for p in cand.points) and \
            not any(p.slower for p in cand.points)


@dataclass(frozen=True, kw_only=True)
class TuneState:
    """A tune directory's tune.json (format FORMAT): the options it ran with, when, and its
    stages and tuned choice so far (each as its to_json wrote it); rewritten after each
    stage."""

    fabbench: str
    argv: tuple[str, ...]
    fabric: str
    profile_source: str
    primitive: str
    repeats: int
    narrowings: int
    started: str
    finished: str | None
    axes: tuple[str, ...]
    stages: tuple[Mapping[str, Any], ...]
    tuned: Mapping[str, Any] | None

    FORMAT = "fabbench-tune/1"

    def to_json(self) -> dict[str, Any]:
        return {"format": self.FORMAT, "fabbench": self.fabbench, "argv": list(self.argv),
                "fabric": self.fabric, "profile_source": self.profile_source,
                "primitive": self.primitive, "repeats": self.repeats,
                "narrowings": self.narrowings, "started": self.started,
                "finished": self.finished, "axes": list(self.axes),
                "stages": [dict(s) for s in self.stages],
                "tuned": None if self.tuned is None else dict(self.tuned)}

    @classmethod
    def read(cls, data: Mapping[str, Any]) -> TuneState:
        """The state of its JSON; a state written before ``narrowings`` was recorded ran
        NARROWINGS. A KeyError, TypeError or ValueError for what is not a tune's state."""
        return cls(fabbench=data.get("fabbench", ""), argv=tuple(data["argv"]),
                   fabric=data.get("fabric", ""), profile_source=data.get("profile_source", ""),
                   primitive=data.get("primitive", ""), repeats=int(data["repeats"]),
                   narrowings=int(data.get("narrowings", NARROWINGS)),
                   started=data.get("started", ""), finished=data.get("finished"),
                   axes=tuple(data.get("axes", ())), stages=tuple(data.get("stages", ())),
                   tuned=data.get("tuned"))


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.=-]+", "_", text)[:80]


class Tuner:
    """One tune in one directory (see the module's doc)."""

    def __init__(self, config: RunConfig, directory: Path, *, repeats: int = 3,
                 deadline_s: float = 3600.0, resume: bool = False, replay: bool = False,
                 narrowings: int = NARROWINGS,
                 progress: Callable[[TuneEvent], None] | None = None) -> None:
        # replay: decide again from the files of a finished tune, launching and writing nothing
        self.replay = replay
        if repeats < 2:
            raise UsageError("--repeats must be at least 2 (a verdict needs launches that "
                             "alternate)")
        if not 0 < deadline_s < math.inf:
            raise UsageError(f"--deadline must be a number of seconds above 0, not "
                             f"{deadline_s:g}")
        if directory.exists() and not directory.is_dir():
            raise UsageError(f"{directory} is not a directory: tune writes its launches and "
                             "what it finds into a directory (a new one, or an empty one)")
        output_files.check_name("DIRECTORY", directory)
        if config.out is not None:
            raise UsageError("--out: tune writes its launches' results under its directory "
                             "(give the directory as the argument)")
        if config.primitive is None:
            raise UsageError("tune needs --primitive (the library whose settings it tunes)")
        self.primitive: str = config.primitive
        if config.fabric == "auto":
            raise UsageError("tune needs --fabric: the profile whose settings it tunes")
        if config.workload != CollectivesWorkload.name:
            raise UsageError("tune measures collectives: leave --workload out")
        self.profile = load_profile(config.fabric)
        section = self.profile.primitives.get("mpi" if self.primitive == "horovod"
                                              else self.primitive)
        if section is None:
            raise UsageError(f"fabric {self.profile.name!r} has no settings for "
                             f"{self.primitive}")
        self.section: Settings = section
        ops = set(config.collectives.ops or ())
        self.axes = [a for a in section.tune if not a.ops or not ops or set(a.ops) & ops]
        if not self.axes:
            raise UsageError(f"{self.profile.source}: [primitive.{self.primitive}] declares "
                             "nothing to tune ([[primitive."
                             f"{self.primitive}.tune]]) for these ops")
        params = library.ompi_params() if any(a.kind == "mca" for a in self.axes) else None
        library.check_space(self.axes, self.primitive, self.profile.source, params)
        self.library_default = {a.key: params[a.key].default for a in self.axes
                                if params is not None and a.kind == "mca"}
        self.config = config
        self.directory = directory
        self.repeats = repeats
        self.narrowings = narrowings
        self.deadline_s = deadline_s
        self.tell = progress or (lambda _e: None)
        self.argv = config.to_argv()
        self._prepare(resume)
        self.done = 0
        self.started = time.monotonic()

    # ---- the directory ----

    def _prepare(self, resume: bool) -> None:
        state = self.directory / STATE
        if self.replay:
            return  # the files are read as they are (replayed() checked them)
        if resume:
            if not state.is_file():
                raise UsageError(f"cannot resume {self.directory}: it holds no tune ({STATE})")
            old = json.loads(state.read_text())
            narrowings = old.get("narrowings", NARROWINGS)
            if old.get("argv") != self.argv or old.get("repeats") != self.repeats or \
                    narrowings != self.narrowings:
                quick = " --quick" if narrowings == 0 else ""
                raise UsageError(f"{self.directory} holds a tune of other options "
                                 f"({' '.join(old.get('argv', []))}, --repeats "
                                 f"{old.get('repeats')}{quick}): resume it with those")
        elif self.directory.exists() and any(self.directory.iterdir()):
            raise UsageError(f"{self.directory} is not empty; choose another directory, or "
                             "add --resume to continue the tune in it")
        for sub in ("trials", "logs", "profiles"):
            try:
                (self.directory / sub).mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise UsageError(f"cannot create {self.directory / sub}: "
                                 f"{exc.strerror}") from None
        self._write_state([], None, finished=None)

    def _write_state(self, stages: list[Stage], tuned: Choice | None, *,
                     finished: str | None) -> None:
        if self.replay:
            return
        state = TuneState(
            fabbench=__version__, argv=tuple(self.argv), fabric=self.profile.name,
            profile_source=self.profile.source, primitive=self.primitive,
            repeats=self.repeats, narrowings=self.narrowings, started=_now(),
            finished=finished, axes=tuple(a.name for a in self.axes),
            stages=tuple(s.to_json() for s in stages),
            tuned=tuned.to_json() if tuned else None)
        path = self.directory / STATE
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(state.to_json(), indent=1) + "\n")
        tmp.replace(path)

    # ---- trials ----

    def _profile_for(self, choice: Choice, label: str) -> Path:
        """The fabric's profile with ``choice`` applied, as a file a launch names."""
        section = dataclasses.replace(self.section, mca={**self.section.mca, **choice.mca},
                                      env={**self.section.env, **choice.env}, tune=())
        name = re.sub(r"[^a-z0-9_-]+", "-", f"{self.profile.name}-{label}".lower())[:60]
        key = "mpi" if self.primitive == "horovod" else self.primitive
        profile = dataclasses.replace(self.profile, name=name,
                                      primitives={**self.profile.primitives, key: section})
        path = self.directory / "profiles" / f"{name}.toml"
        path.write_text(profile_toml(profile, [f"fabbench tune: {self.profile.name} with "
                                               f"{json.dumps(choice.to_json())}"]))
        return path

    def _rules_for(self, choice: Choice, label: str) -> Choice:
        """``choice`` with its per-size algorithms in a rules file, named in its MCA."""
        if not choice.per_size:
            return choice
        path = self.directory / "profiles" / f"{_slug(label)}.{RULES}"
        path.write_text(rules_file(choice.per_size, self.ranks_hint()))
        return Choice({**choice.mca, "coll_tuned_use_dynamic_rules": "1",
                       "coll_tuned_dynamic_rules_filename": str(path.resolve())},
                      choice.env, choice.per_size)

    def ranks_hint(self) -> int:
        """The communicator size the rules are for: the ranks of the trials' runs (read from
        a trial's run record once one ran, else --ranks, else 2)."""
        for path in sorted((self.directory / "trials").glob("*.jsonl")):
            try:
                runs = read_results(path).of_kind(Run)
            except UsageError:
                continue
            if runs:
                return runs[0].ranks
        return self.config.ranks or 2

    def _trial(self, label: str, choice: Choice, *, ceiling: bool = False) -> Path:
        """Run one launch (or find it done); its results file."""
        out = self.directory / "trials" / f"{_slug(label)}.jsonl"
        self.done += 1
        if results_ok(out):
            self.tell(TuneEvent("skip", self.done, None, label))
            return out
        if out.exists():  # a launch that was stopped: kept beside, never overwritten
            n = 1
            while out.with_name(f"{out.name}.attempt-{n}").exists():
                n += 1
            out.rename(out.with_name(f"{out.name}.attempt-{n}"))
        left = self.deadline_s - (time.monotonic() - self.started)
        if left <= 0:
            raise RunError(f"the tune passed its deadline of {self.deadline_s:g} s "
                           f"(continue with --resume {self.directory})")
        if self.replay:
            raise UsageError(f"{self.directory}: the tune has no complete launch {out.name}; "
                             f"finish it with fabbench tune {self.directory} ... --resume")
        choice = self._rules_for(choice, label)
        profile = self._profile_for(choice, _slug(label))
        config = self.config.replace(fabric=str(profile), out=str(out),
                                     ceiling=self.config.ceiling if ceiling else False)
        argv = [sys.executable, "-m", "fabbench", "run", *config.to_argv()]
        self.tell(TuneEvent("trial", self.done, None, label))
        launch_logged(argv, {}, self.directory / "logs" / f"{_slug(label)}.log",
                      min(left, TRIAL_DEADLINE_S))
        return out

    # ---- the search ----

    def run(self) -> TuneOutcome:
        """The whole search; SIGTERM/SIGHUP stop the launch that runs (resumable)."""
        with signals_unwind():
            return self._run()

    def _run(self) -> TuneOutcome:
        stages: list[Stage] = []
        current = Choice()
        for index, axis in enumerate(self.axes, 1):
            stage = self._stage(index, axis, current)
            stages.append(stage)
            if axis.per_size and stage.chosen_per_size:  # sizes not chosen: the fixed rules
                measured = {(p.op, p.bytes) for c in stage.candidates for p in c.points}
                per_size = {**current.per_size, **{k: stage.chosen_per_size.get(k, "0")
                                                   for k in measured}}
                current = Choice({**current.mca, **axis.needs_mca},
                                 {**current.env, **axis.needs_env}, per_size)
            elif stage.chosen is not None:
                current = current.with_value(axis, stage.chosen)
            self._write_state(stages, current, finished=None)
        if current == Choice():
            self._write_state(stages, current, finished=_now())
            return TuneOutcome(self.directory, self.profile, self.primitive, stages, current, None)
        index = len(self.axes) + 1
        final = self._final(index, current)
        before: list[tuple[Stage, str]] = []
        for _ in range(self.narrowings):
            step = narrowed(current, final, stages, self.axes)
            if step is None:
                break
            before.append((final, step[1]))
            current = step[0]
            self._write_state([*stages, *(s for s, _ in before)], current, finished=None)
            index += 1
            final = self._final(index, current)
        self._write_state([*stages, *(s for s, _ in before), final], current, finished=_now())
        return TuneOutcome(self.directory, self.profile, self.primitive, stages, current, final,
                           before)

    def _current_value(self, axis: Axis, current: Choice) -> str:
        held = current.mca if axis.kind == "mca" else current.env
        mine = self.section.mca if axis.kind == "mca" else self.section.env
        return held.get(axis.key, mine.get(axis.key, self.library_default.get(axis.key, "")))

    def _stage(self, index: int, axis: Axis, current: Choice) -> Stage:
        now = self._current_value(axis, current)
        values = [v for v in axis.values if v != now]
        if not values:  # every value is the one in use: nothing to try
            return Stage(name=axis.name, base=current)
        labels = ["base", *values]
        files: dict[str, list[Path]] = {label: [] for label in labels}
        for r in range(self.repeats):
            turn = r % len(labels)
            for label in labels[turn:] + labels[:turn]:
                choice = current if label == "base" else current.with_value(axis, label)
                name = f"{index:02d}-{axis.key}-{label}-r{r + 1}"
                files[label].append(self._trial(name, choice))
        base = _load(files["base"])
        if base.error:
            raise RunError(f"tune {axis.name}: the base launch failed: {base.error} "
                           f"(see {self.directory / 'logs'})")
        return judge(axis, current, base, {v: _load(files[v]) for v in values})

    def _final(self, index: int, tuned: Choice) -> Stage:
        """The profile as it is against the tuned settings, alternating."""
        files: dict[str, list[Path]] = {"default": [], "tuned": []}
        for r in range(self.repeats):
            order = ("default", "tuned") if r % 2 == 0 else ("tuned", "default")
            for label in order:
                files[label].append(self._trial(
                    f"{index:02d}-final-{label}-r{r + 1}",
                    Choice() if label == "default" else tuned,
                    ceiling=label == "default" and r == 0))
        stage = Stage(name="final", base=Choice())
        default, got = _load(files["default"]), _load(files["tuned"])
        if default.error or got.error:
            raise RunError(f"tune: the final comparison failed: {default.error or got.error}")
        stage.transport = default.transport
        cand = Candidate("tuned", points=_points(default, got))
        if got.transport != default.transport:
            cand.refused = (f"the transport changed from {default.transport} to "
                            f"{got.transport}")
        stage.candidates.append(cand)
        return stage


def narrowed(tuned: Choice, final: Stage, stages: Sequence[Stage],
             axes: Sequence[Axis]) -> tuple[Choice, str] | None:
    """The tuned settings with what a final stage found slower taken out, and what was taken,
    in words; None when there is nothing to narrow (the settings hold, were refused, were
    faster nowhere, or nothing is left to take). At each (op, size) found slower, a per-size
    choice goes back to the fixed rules ("0"); where no size found slower had one, the settings
    of the axes that are not per size go, the per-size choices and what they need staying."""
    cand = final.candidates[0]
    slower = {(p.op, p.bytes) for p in cand.points if p.slower}
    if cand.refused or not slower:
        return None
    blamed = sorted(k for k in slower if tuned.per_size.get(k, "0") != "0")
    if blamed:
        per_size = {**tuned.per_size, **{k: "0" for k in blamed}}
        what = ("the per-size choices at " + ", ".join(f"{op} {format_size(n)}"
                                                       for op, n in blamed))
        return Choice(tuned.mca, tuned.env, per_size), what
    mca: dict[str, str] = {}
    env: dict[str, str] = {}
    dropped = []
    for axis, stage in zip(axes, stages, strict=False):
        if axis.per_size and stage.chosen_per_size:  # kept, with what it needs
            mca.update(axis.needs_mca)
            env.update(axis.needs_env)
        elif not axis.per_size and stage.chosen is not None:
            dropped.append(f"{axis.name} = {stage.chosen}")
    if not dropped or all(v == "0" for v in tuned.per_size.values()):
        return None  # nothing to drop, or nothing left but the fixed rules: the default
    return Choice(mca, env, dict(tuned.per_size)), ", ".join(dropped)


def replayed(directory: Path) -> TuneOutcome:
    """A finished tune's outcome, decided again from its files as `--resume` would, without
    launching or writing anything (what `fabbench report DIR` shows)."""
    try:
        state = TuneState.read(json.loads((directory / STATE).read_text()))
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise UsageError(f"{directory / STATE}: not a tune's state file ({exc})") from None
    if not state.finished:
        raise UsageError(f"{directory}: the tune did not finish; continue it with fabbench "
                         f"tune {directory} {' '.join(state.argv)} --resume")
    tuner = Tuner(RunConfig.from_argv(state.argv), directory, repeats=state.repeats,
                  replay=True, narrowings=state.narrowings)
    return tuner.run()


def judge(axis: Axis, current: Choice, base: Loaded, got: Mapping[str, Loaded]) -> Stage:
    """One axis' stage from its launches: each value's points against the base, refused when
    its launch failed or its transport is not the base's, and the choice (module doc)."""
    stage = Stage(name=axis.name, base=current, transport=base.transport)
    ops = set(axis.ops)
    for value, loaded in got.items():
        cand = Candidate(value)
        if loaded.error:
            cand.refused = f"its launch failed: {loaded.error}"
        elif loaded.transport != base.transport:
            cand.refused = f"the transport changed from {base.transport} to {loaded.transport}"
        cand.points = [p for p in _points(base, loaded) if not ops or p.op in ops]
        stage.candidates.append(cand)
    ok = [c for c in stage.candidates if c.refused is None]
    if axis.per_size:
        for key in sorted({(p.op, p.bytes) for c in ok for p in c.points}):
            faster = [(p.value_us, c.value) for c in ok for p in c.points
                      if (p.op, p.bytes) == key and p.faster]
            if faster:
                stage.chosen_per_size[key] = min(faster)[1]
    else:
        winners = [c for c in ok if any(p.faster for p in c.points)
                   and not any(p.slower for p in c.points)]
        if winners:
            stage.chosen = max(winners, key=lambda c: c.speedup).value
    return stage


@dataclass
class Loaded:
    """The launches of one setting in one stage, pooled."""

    samples: dict[tuple[str, int], list[float]] = field(default_factory=dict)
    medians: dict[tuple[str, int], list[float]] = field(default_factory=dict)  # per launch
    # busbw GB/s per µs of time: busbw = factor / time (the op's bus factor x bytes / 1e3)
    factor: dict[tuple[str, int], float] = field(default_factory=dict)
    transport: str | None = None
    error: str | None = None
    # the wire's measured ceilings: (tool and mode, Gbit/s per direction, the slower direction)
    ceilings: list[tuple[str, float]] = field(default_factory=list)
    runs: list[Run] = field(default_factory=list)


def _load(paths: Sequence[Path]) -> Loaded:
    out = Loaded()
    for path in paths:
        if not path.is_file():
            out.error = f"{path.name}: no results"
            continue
        try:
            results = read_results(path)
        except UsageError as exc:
            out.error = str(exc)
            continue
        summaries = results.of_kind(Summary)
        if not summaries or not summaries[-1].ok:
            why = summaries[-1].error if summaries else "it did not finish"
            out.error = f"{path.name}: {why}"
            continue
        for run in results.of_kind(Run):
            out.runs.append(run)
            out.transport = out.transport or run.transport
            if run.transport != out.transport:
                out.error = (f"{path.name}: transport {run.transport}, another launch of the "
                             f"same setting {out.transport}")
        for c in results.of_kind(Collective):
            key = (c.op, c.bytes)
            out.samples.setdefault(key, []).extend(c.samples_us or [c.time_us.p50])
            out.medians.setdefault(key, []).append(c.time_us.p50)
            out.factor[key] = c.busbw_gbyte_s * c.time_us.p50
        for ceiling in results.of_kind(Ceiling):
            rates = [d.gbit_s for d in ceiling.directions or () if d.gbit_s]
            if rates and not ceiling.error:
                out.ceilings.append((f"{ceiling.tool} {ceiling.mode}", min(rates)))
    return out


def _points(base: Loaded, other: Loaded) -> list[TunePoint]:
    points = []
    for key in sorted(set(base.samples) & set(other.samples)):
        a, b = base.samples[key], other.samples[key]
        ma, mb = statistics.median(a), statistics.median(b)
        if ma <= 0 or mb <= 0:
            continue
        verdict = compare_samples(a, b, ratio=median_ratio(ma, mb))
        rounds = list(zip(base.medians[key], other.medians[key], strict=False))
        points.append(TunePoint(op=key[0], bytes=key[1], base_us=ma, value_us=mb, verdict=verdict,
                            every_round=(all(y < x for x, y in rounds) if mb < ma else
                                         all(y > x for x, y in rounds))))
    return points


def final_launches(trials: Path, label: str, *, last: bool = True) -> list[Path]:
    """The results files of the final stages' ``label`` ("default" or "tuned") launches in a
    tune's trials folder: the last final stage's (one more per narrowing), or every one's."""
    paths = sorted(trials.glob(f"*-final-{label}-r*.jsonl"))
    if not last or not paths:
        return paths
    stage = paths[-1].name.split("-", 1)[0]
    return [p for p in paths if p.name.startswith(f"{stage}-")]


def load_final(directory: Path) -> tuple[Loaded, Loaded]:
    """The last final stage's launches (default, tuned), for the report; the default's
    ceilings are those every final stage measured (the first one's first launch, as a rule)."""
    trials = directory / "trials"
    default = _load(final_launches(trials, "default"))
    default.ceilings = _load(final_launches(trials, "default", last=False)).ceilings
    return default, _load(final_launches(trials, "tuned"))
