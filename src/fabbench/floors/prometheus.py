"""A verdict in Prometheus' text exposition format (version 0.0.4), for node_exporter's textfile
collector (`fabbench floors verify --prometheus FILE`): what a cluster already scrapes.

Per judged subject (a node's pairs, an operation at a size, a training run) one sample of each
of: the verdict (1 pass, 0 fail; a subject not judged has no figure and is left out, its count
stays in ``fabbench_floor_verdicts``), the figure, and the floor it was held to. Names follow
Prometheus' conventions: the base unit in the name (``_gigabytes_per_second``, ``_seconds``,
``_samples_per_second``; sizes as ``size_bytes``), figures in that unit whatever unit the
floors file wrote. Labels: rule, run (its id), node ("" for a whole run), op, size_bytes, dtype,
primitive, transport, metric; subjects that share a label set (ranks of one run on one host) are
one series, a failing one kept. The file starts with HEADER, a comment line Prometheus ignores:
fabbench replaces a file that starts so (the next check's verdict), written beside it and
renamed over it so that a scrape never reads half of it (node_exporter's advice for the
textfile collector), and refuses any other (results.output_files).
"""

from __future__ import annotations

from fabbench.floors.judge import FAIL, NOT_JUDGED, PASS, Judgement
from fabbench.floors.verify import Verification

# a metric's unit (floors.points.METRICS) -> (the name's unit, the factor to it)
BASE_UNITS = {
    "GB/s": ("gigabytes_per_second", 1.0),
    "µs": ("seconds", 1e-6),
    "ms": ("seconds", 1e-3),
    "samples/s": ("samples_per_second", 1.0),
}
# the first line of every file written: what fabbench may replace (results.output_files)
HEADER = "# fabbench floors verify --prometheus: fabbench replaces this file on each check"
LABELS = ("rule", "run", "node", "op", "size_bytes", "dtype", "primitive", "transport", "metric")


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _labels(v: Judgement) -> str:
    p = v.point
    values = {"rule": v.rule.id, "run": p.run if p else "", "node": v.node or "",
              "op": (p.op if p else None) or "",
              "size_bytes": "" if p is None or p.bytes is None else str(p.bytes),
              "dtype": (p.dtype if p else None) or "",
              "primitive": (p.primitive if p else None) or "",
              "transport": (p.transport if p else None) or "", "metric": v.rule.metric or ""}
    return ",".join(f'{k}="{_escape(values[k])}"' for k in LABELS)


def _number(x: float) -> str:
    return repr(float(x))


def exposition(outcome: Verification) -> str:
    """The text of the file: HELP and TYPE once per metric name, then its samples."""
    families: dict[str, tuple[str, list[str]]] = {}

    def sample(name: str, help_text: str, labels: str, value: float) -> None:
        families.setdefault(name, (help_text, []))[1].append(f"{name}{{{labels}}} "
                                                               f"{_number(value)}")

    # one series per label set: subjects that share one (ranks of a run on one host, each
    # judged as "node <host>") are one series, the failing one kept
    judged: dict[str, tuple[Judgement, float, float]] = {}
    for v in outcome.verdicts:
        if v.status == NOT_JUDGED or v.figure is None or v.floor is None or not v.rule.metric:
            continue
        key = _labels(v)
        if key not in judged or (v.status == FAIL and judged[key][0].status != FAIL):
            judged[key] = (v, v.figure, v.floor)
    for labels, (v, figure, floor) in judged.items():
        unit, factor = BASE_UNITS[v.unit]
        words = unit.replace("_", " ")
        sample("fabbench_floor_verdict", "A floor's verdict on a subject: 1 pass, 0 fail.",
               labels, 1 if v.status == PASS else 0)
        sample(f"fabbench_floor_figure_{unit}", f"The figure judged, in {words}.", labels,
               figure * factor)
        sample(f"fabbench_floor_threshold_{unit}", f"The floor (or limit) the figure was held "
               f"to, in {words}, after the rule's tolerance.", labels, floor * factor)
    name = _escape(outcome.floors.name)
    for status, n in outcome.counts().items():
        sample("fabbench_floor_verdicts", "The verdicts of the check, by status.",
               f'floors="{name}",status="{status.replace(" ", "_")}"', n)
    out = [HEADER]
    for metric, (help_text, lines) in families.items():
        out += [f"# HELP {metric} {help_text}", f"# TYPE {metric} gauge", *lines]
    return "\n".join(out) + "\n"

