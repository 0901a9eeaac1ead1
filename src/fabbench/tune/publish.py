"""A finished tune's files and its account: the tuned site profile (`fabbench run --fabric
FILE`), Open MPI's coll_tuned rules file, NCCL's tuner CSV, and the table of gains.
"""

from __future__ import annotations

import dataclasses
from datetime import date
from pathlib import Path

from fabbench.errors import UsageError
from fabbench.fabrics.profile import profile_toml, split_pair
from fabbench.results.link import link_of
from fabbench.tune.outputs import NCCL_CSV, RULES, nccl_csv, rules_file
from fabbench.tune.search import Loaded, Stage, TuneOutcome, load_final
from fabbench.units import format_size


def shown(value: str) -> str:
    """A per-size choice for people: "5:1048576" as "5 (1 MiB segments)"."""
    algorithm, segment = split_pair(value)
    return f"{algorithm} ({format_size(int(segment))} segments)" if segment else value


def _evidence(stage: Stage, value: str, op: str | None = None, size: int | None = None) -> str:
    cand = next(c for c in stage.candidates if c.value == value)
    points = [p for p in cand.points if (op is None or p.op == op)
              and (size is None or p.bytes == size) and p.faster]
    parts = [f"{p.op} {format_size(p.bytes)} time x{p.verdict.ratio:.3f} (95% CI "
             f"{p.verdict.ci_low:.3f}-{p.verdict.ci_high:.3f}, p={p.verdict.p_value:.2g})"
             for p in points if p.verdict.ci_low is not None and p.verdict.ci_high is not None
             and p.verdict.p_value is not None]
    return "; ".join(parts) or "faster"


def write(outcome: TuneOutcome) -> list[Path]:
    """The tuned profile, and the rules file or tuner CSV where the tune chose what they hold;
    nothing when the tuned settings did not hold against the default (TuneOutcome.holds)."""
    d, tuned = outcome.directory, outcome.tuned
    written: list[Path] = []
    if not outcome.holds:
        return written
    default, _ = load_final(d)  # the final stage's default launches: their world and image
    first = default.runs[0] if default.runs else None
    ranks, nodes = (first.ranks, first.nodes) if first else (2, 1)
    mca = dict(tuned.mca)
    if tuned.per_size:
        rules = d / RULES
        rules.write_text(rules_file(tuned.per_size, ranks))
        mca.update(coll_tuned_use_dynamic_rules="1",
                   coll_tuned_dynamic_rules_filename=str(rules.resolve()))
        written.append(rules)
    key = "mpi" if outcome.primitive == "horovod" else outcome.primitive
    section = outcome.profile.primitives[key]
    section = dataclasses.replace(section, mca={**section.mca, **mca},
                                  env={**section.env, **tuned.env}, tune=())
    name = f"{outcome.profile.name}-tuned"
    profile = dataclasses.replace(outcome.profile, name=name,
                                  description=f"{outcome.profile.description}, tuned by "
                                              f"fabbench tune",
                                  primitives={**outcome.profile.primitives, key: section})
    header = [f"written by fabbench tune on {date.today().isoformat()} from "
              f"{outcome.profile.source} ({_image(default)})",
              f"use: fabbench run --fabric {d.resolve() / (name + '.toml')} --primitive "
              f"{outcome.primitive}", "what the tune chose, with its evidence against the "
              "settings before it (time ratio, < 1: faster):"]
    for stage in outcome.stages:
        if stage.chosen is not None and _kept(outcome, stage):
            header.append(f"  {stage.name} = {stage.chosen}: "
                          f"{_evidence(stage, stage.chosen)}")
        for (op, size), value in sorted(stage.chosen_per_size.items()):
            if tuned.per_size.get((op, size)) == value:
                header.append(f"  {stage.name} = {shown(value)} at {op} {format_size(size)}: "
                              f"{_evidence(stage, value, op, size)}")
        for cand in stage.candidates:
            if cand.refused:
                header.append(f"  refused {stage.name} = {cand.value}: {cand.refused}")
    for final, what in outcome.narrowed:
        header.append(f"  dropped {what}: together the settings were slower at "
                      f"{_slower(final)}")
    path = d / f"{name}.toml"
    path.write_text(profile_toml(profile, header))
    written.insert(0, path)
    if outcome.primitive == "nccl":
        csv = nccl_csv(sorted({op for op, _ in default.samples}), tuned.env, nodes, ranks)
        if csv is not None:
            (d / NCCL_CSV).write_text(csv)
            written.append(d / NCCL_CSV)
    return written


def _slower(final: Stage) -> str:
    return ", ".join(f"{p.op} {format_size(p.bytes)}" for p in final.candidates[0].points
                     if p.slower)


def _kept(outcome: TuneOutcome, stage: Stage) -> bool:
    """Whether a stage's chosen value is in the settings the tune ends with (a narrowing may
    have dropped it)."""
    section = outcome.profile.primitives["mpi" if outcome.primitive == "horovod"
                                         else outcome.primitive]
    axis = next((a for a in section.tune if a.name == stage.name), None)
    if axis is None or stage.chosen is None:
        return False
    held = outcome.tuned.mca if axis.kind == "mca" else outcome.tuned.env
    return all(held.get(k) == v for k, v in axis.settings_of(stage.chosen).items())


def _image(default: Loaded) -> str:
    image = default.runs[0].provenance.image if default.runs else None
    return f"image {image.id}" if image and image.id else "no image"


def _nominal_gbit_s(loaded: Loaded) -> float | None:
    for run in loaded.runs:
        try:
            link = link_of(run)
        except UsageError:
            return None
        return link.speed_gbit_s if link else None
    return None


def summary(outcome: TuneOutcome) -> str:
    """What was chosen, what was refused, and the gain of each (op, size) against the default,
    as a share of the wire's measured ceiling and of its nominal rate."""
    lines = [f"tune of {outcome.profile.name} / {outcome.primitive} in {outcome.directory}"]
    for stage in outcome.stages:
        chosen = stage.chosen if stage.chosen is not None else (
            ", ".join(f"{shown(v)} at {op} {format_size(n)}"
                      for (op, n), v in sorted(stage.chosen_per_size.items())) or "kept")
        lines.append(f"  {stage.name}: {chosen}")
        lines += [f"    refused {c.value}: {c.refused}" for c in stage.candidates if c.refused]
    if outcome.final is None:
        lines.append("nothing was faster than the profile as it is: no tuned settings")
        return "\n".join(lines) + "\n"
    for final, what in outcome.narrowed:
        lines.append(f"  against the default the settings were slower at {_slower(final)}: "
                     f"dropped {what}, and compared again")
    cand = outcome.final.candidates[0]
    gains = final_gains(outcome)
    assert gains is not None  # a final stage
    measured = ", ".join(f"{what} {rate:.3g}" for what, rate in gains.measured)
    ceiling = f"{gains.ceiling_gbit_s:.3g} Gbit/s per direction (measured: {measured})" \
        if gains.ceiling_gbit_s else "not measured"
    nominal = gains.nominal_gbit_s
    lines.append(f"default against tuned, {gains.launches} launches each, alternating; "
                 f"ceiling {ceiling}, nominal {f'{nominal:g} Gbit/s' if nominal else 'unknown'}")
    lines.append(f"{'op':<10} {'size':>8} {'default GB/s':>12} {'tuned GB/s':>10} "
                 f"{'gain':>7} {'95% CI':>15} {'verdict':>8} {'/ceiling':>8} {'/nominal':>8}")
    for g, p in zip(gains.rows, cand.points, strict=True):
        v = p.verdict
        ci = (f"{1 / v.ci_high - 1:+.0%}…{1 / v.ci_low - 1:+.0%}"
              if v.ci_low and v.ci_high else "-")
        lines.append(f"{g.op:<10} {format_size(g.bytes):>8} {g.default_gbyte_s:>12.4g} "
                     f"{g.tuned_gbyte_s:>10.4g} {1 / v.ratio - 1:>+7.0%} {ci:>15} "
                     f"{v.verdict:>8} {_share(g.tuned_gbyte_s, gains.ceiling_gbit_s):>8} "
                     f"{_share(g.tuned_gbyte_s, nominal):>8}")
    if cand.refused:
        lines.append(f"the tuned settings are refused: {cand.refused}")
    elif not outcome.holds:
        slower = _slower(outcome.final)
        lines.append("the tuned settings do not hold against the default ("
                     + (f"slower at {slower}" if slower else "faster nowhere")
                     + "): no profile written; the choices, one axis at a time, did not add up "
                     "(more --repeats, or fewer axes)")
    return "\n".join(lines) + "\n"


@dataclasses.dataclass(frozen=True)
class Gain:
    """One (op, size) of the final stage: the default's and the tuned busbw (from the pooled
    medians) and the verdict on the time ratio."""

    op: str
    bytes: int
    default_gbyte_s: float
    tuned_gbyte_s: float
    verdict: str


@dataclasses.dataclass(frozen=True)
class Gains:
    """The final stage's rows and the wire they ran on: the fastest the ceiling measured
    (iperf3 one way, usually: on a host whose CPUs bind iperf3's bidirectional streams a
    collective can pass those), every ceiling measured, the link's nominal rate, and the
    default's launches."""

    rows: list[Gain]
    ceiling_gbit_s: float | None
    nominal_gbit_s: float | None
    measured: tuple[tuple[str, float], ...]
    launches: int


def final_gains(outcome: TuneOutcome) -> Gains | None:
    """The final stage's gains; None when no setting was faster (no final stage)."""
    if outcome.final is None:
        return None
    default, _ = load_final(outcome.directory)
    rows = []
    for p in outcome.final.candidates[0].points:
        factor = default.factor.get((p.op, p.bytes), 0.0)  # busbw from the pooled medians
        rows.append(Gain(op=p.op, bytes=p.bytes, default_gbyte_s=factor / p.base_us,
                         tuned_gbyte_s=factor / p.value_us, verdict=p.verdict.verdict))
    return Gains(rows=rows, ceiling_gbit_s=max((rate for _, rate in default.ceilings),
                                               default=None),
                 nominal_gbit_s=_nominal_gbit_s(default), measured=tuple(default.ceilings),
                 launches=len(default.runs))


def _share(busbw_gbyte_s: float, gbit_s: float | None) -> str:
    return f"{busbw_gbyte_s * 8 / gbit_s:.2f}" if gbit_s else "-"
