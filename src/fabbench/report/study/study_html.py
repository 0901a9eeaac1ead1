# ruff: noqa: E501  (the template's markup lines are long by nature)
"""A study's answer as one self-contained HTML file: the headline, every cell and why it did not
run, a table per group with the difference to the best cell, the collectives against the link,
the forecast, and the figures as SVG data URIs (no script, no external fetch)."""

from __future__ import annotations

import base64
from collections.abc import Sequence
from datetime import datetime, timezone

import jinja2

from fabbench import __version__
from fabbench.report.html import PAGE_HEAD
from fabbench.report.plots import Plot
from fabbench.report.significance import ALPHA
from fabbench.report.study.answer import StudyAnswer
from fabbench.report.study.groups import METRIC, SCALING, THROUGHPUT, UNIT
from fabbench.report.tables import efficiency_lines
from fabbench.workloads.collectives.workload import CollectivesWorkload

_TEMPLATE = PAGE_HEAD + """.best{background:#eaf7ee}.failed{color:#b3261e;font-weight:600}
.ok{color:#0a7a2b;font-weight:600}.skipped{color:#666}
.headline{font-size:15px;background:#f6f8fa;border-left:4px solid #0a5ad4;padding:.5em 1em}
</style></head><body>
<h1>{{ title }}</h1>
<p>fabbench {{ version }}, {{ generated }}. Study <b>{{ m.study }}</b> ({{ m.description }}) from
<code>{{ m.source }}</code>, run on {{ m.host }} ({{ m.place.scheduler }}, {{ m.place.nodes }} node(s)), started {{ m.started }}.
A difference is called significant when a Mann-Whitney U test on the recorded samples gives
p &lt; {{ alpha }} and the bootstrap 95 % interval of the ratio of medians excludes 1.</p>

<h2>Answer</h2>
<div class="headline"><ul>{% for line in headline %}<li>{{ line }}</li>{% endfor %}</ul></div>
{% for w in warnings %}<div class="warn">{{ w }}</div>
{% endfor %}

{% for g in groups %}<h2>{{ g.title }}: {{ metric[g.kind] }}</h2>
<table><tr><th class="l">cell</th><th class="l">transport</th><th>{{ metric[g.kind] }} ({{ unit[g.kind] }}, median)</th><th>samples</th>
<th>{{ through[g.kind] }}</th>{% if g.kind != sweep %}<th>exposed comm. share</th>{% endif %}
{% if scaling[g.kind] %}<th>scaling efficiency</th>{% endif %}{% if g.kind == sweep %}<th>link %</th>{% endif %}
<th>vs best</th><th>95 % CI</th><th>p</th><th class="l">verdict</th></tr>
{% for r in g.rows %}{% set d = r.diff() %}<tr{% if r.best %} class="best"{% endif %}><td class="l"><b>{{ r.cell.label }}</b> <code>{{ r.cell.id }}</code></td>
<td class="l">{{ r.transport }}</td><td>{{ "%.2f"|format(r.median) }}</td><td>{{ r.samples|length }}</td>
<td>{{ num(r.throughput) }}</td>{% if g.kind != sweep %}<td>{{ pct(r.comm_share) }}</td>{% endif %}
{% if scaling[g.kind] %}<td>{{ pct(r.scaling) }}</td>{% endif %}{% if g.kind == sweep %}<td>{{ num(r.link_pct) }}</td>{% endif %}
<td>{% if r.best %}best{% else %}{{ "%+.1f"|format(d[0]) }} %{% endif %}</td>
<td>{% if d[1] is not none %}{{ "%+.1f"|format(d[1]) }} … {{ "%+.1f"|format(d[2]) }} %{% else %}-{% endif %}</td>
<td>{% if r.verdict and r.verdict.p_value is not none %}{{ "%.3g"|format(r.verdict.p_value) }}{% else %}-{% endif %}</td>
<td class="l {{ r.verdict.verdict if r.verdict else '' }}">{{ r.verdict.verdict if r.verdict else "best" }}</td></tr>
{% endfor %}</table>{% endfor %}

{% if figures %}<h2>Figures</h2>
{% for f in figures %}<figure id="fig-{{ f.name }}"><img alt="{{ f.title }}" src="data:image/svg+xml;base64,{{ f.data }}">
<figcaption>{{ f.title }}</figcaption></figure>
{% endfor %}{% endif %}

{% for w in whatif %}<h2>{{ w.title }}: measured against the forecast</h2>
<p>{{ w.agreement }}</p>
<table><tr><th class="l">link</th><th>measured step (ms)</th><th>vs best</th><th>95 % CI</th><th class="l">verdict</th>
<th>forecast step (ms)</th><th>forecast exposed comm. (ms)</th><th>forecast vs fastest link</th></tr>
{% for r in w.rows %}<tr><td class="l">{{ r.link }}</td><td>{{ "%.1f"|format(r.measured_ms) }}</td><td>{{ "%+.1f"|format(r.diff_pct) }} %</td>
<td>{% if r.ci_low_pct is not none %}{{ "%+.1f"|format(r.ci_low_pct) }} … {{ "%+.1f"|format(r.ci_high_pct) }} %{% else %}-{% endif %}</td>
<td class="l {{ r.verdict }}">{{ r.verdict }}</td><td>{{ "%.1f"|format(r.forecast_ms) }}</td><td>{{ "%.1f"|format(r.forecast_overhead_ms) }}</td>
<td>{{ "%+.1f"|format(r.forecast_slowdown_pct) }} %</td></tr>{% endfor %}</table>
<p>{{ w.notes|join("; ") }}</p>
{% endfor %}

{% if wire %}<h2>Collectives against the wire</h2><ul>
{% for line in wire %}<li>{{ line }}</li>{% endfor %}</ul>{% endif %}

<h2>Forecast (fabbench model)</h2>
{% if forecast %}<p>{{ forecast.model }}: predictions from this study's records, not measurements.</p>
{% for t in forecast.train %}<h3>{{ t.model }} (batch {{ t.batch_per_rank }}, measured on {{ t.measured_ranks }} rank(s))</h3>
<table><tr><th>nodes</th>{% for p in t.by_nodes %}<th>{{ p.nodes }}</th>{% endfor %}</tr>
<tr><td class="l">scaling factor</td>{% for p in t.by_nodes %}<td>{{ "%.2f"|format(p.scaling) }}</td>{% endfor %}</tr></table>
<table><tr><th>link (Gbit/s) at {{ forecast.nodes }} nodes</th>{% for p in t.by_bandwidth %}<th>{{ "%.4g"|format(p.bandwidth_gbit_s) }}</th>{% endfor %}</tr>
<tr><td class="l">scaling factor</td>{% for p in t.by_bandwidth %}<td>{{ "%.2f"|format(p.scaling) }}</td>{% endfor %}</tr>
<tr><td class="l">exposed comm. (ms)</td>{% for p in t.by_bandwidth %}<td>{{ "%.1f"|format(p.overhead_ms) }}</td>{% endfor %}</tr></table>
{% endfor %}
<h3>Allreduce at {{ forecast.ranks }} ranks</h3><table><tr><th>size (B)</th><th class="l">best algorithm</th><th>time (µs)</th><th>busbw (GB/s)</th><th>lower bound (µs)</th></tr>
{% for r in forecast.allreduce %}<tr><td>{{ r.bytes }}</td><td class="l">{{ r.best }}</td><td>{{ "%.1f"|format(r.best_us) }}</td><td>{{ "%.3f"|format(r.busbw_gbyte_s) }}</td><td>{{ "%.1f"|format(r.lower_bound_us) }}</td></tr>{% endfor %}</table>
<p>Assumptions:</p><ul>{% for a in forecast.assumptions %}<li>{{ a }}</li>{% endfor %}</ul>
{% else %}<p>No forecast: {{ forecast_error }}</p>{% endif %}

<h2>Cells</h2>
<table><tr><th class="l">cell</th><th class="l">workload</th><th class="l">fabric</th><th class="l">primitive</th><th class="l">GPUDirect</th><th>nodes</th><th class="l">link</th>
<th class="l">status</th><th>wall (s)</th><th class="l">why</th></tr>
{% for c in cells %}<tr><td class="l"><code>{{ c.id }}</code></td><td class="l">{{ c.axes.workload }}</td><td class="l">{{ c.axes.fabric }}</td>
<td class="l">{{ c.axes.primitive }}</td><td class="l">{{ c.axes.gpudirect }}</td><td>{{ c.axes.nodes }}</td><td class="l">{{ c.axes.link or "-" }}</td>
<td class="l {{ c.entry.status }}">{{ c.entry.status }}</td><td>{{ num(c.entry.wall_s) }}</td>
<td class="l">{{ c.entry.reason or c.entry.error or "" }}</td></tr>
{% endfor %}</table>
</body></html>
"""


def _num(x: float | None) -> str:
    return "-" if x is None else f"{x:.3g}"


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f} %"


def wire_lines(a: StudyAnswer) -> list[str]:
    """Each collectives cell against its link: peak busbw as a share of the link the
    provenance names, or for an emulated link the busbw at the largest size as a share of the
    link's rate; and as a share of the wire's measured ceiling when the cell's file holds ceiling
    records (iperf3 and the like, per direction)."""
    from fabbench.emulate.cluster_spec import parse_rate

    lines = []
    for c in a.cells:
        points = [r for s in c.series for r in s.collectives]
        if not points:
            continue
        largest = max(points, key=lambda r: r.bytes)
        busbw = largest.busbw_gbyte_s
        at = f"busbw {busbw:.3g} GB/s at {largest.bytes} B ({largest.op})"
        if c.axes.get("link"):
            rate = parse_rate(c.axes["link"]) / 1e9
            lines.append(f"{c.id}: {at} is {100 * busbw * 8 / rate:.0f}% of the emulated "
                         f"{c.axes['link']} link")
        else:
            lines += [f"{c.id}: {line}" for line in efficiency_lines(c.series)]
        ceilings = [r for s in c.series for r in s.ceilings if r.per_direction_gbit_s]
        if ceilings:
            top = max(r.per_direction_gbit_s or 0.0 for r in ceilings)
            tools = ", ".join(sorted({f"{r.tool} {r.mode}" for r in ceilings}))
            lines.append(f"{c.id}: {at} is {100 * busbw * 8 / top:.0f}% of the wire's measured "
                         f"ceiling, {top:.3g} Gbit/s per direction ({tools})")
    return lines


def render(a: StudyAnswer, plots: Sequence[Plot], *, title: str) -> str:
    env = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined)
    figures = [{"name": p.name, "title": p.title,
                "data": base64.b64encode(p.svg().encode()).decode()} for p in plots]
    return env.from_string(_TEMPLATE).render(
        title=title, version=__version__,
        generated=datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), alpha=ALPHA,
        m=a.manifest, headline=a.headline, warnings=a.warnings, groups=a.groups,
        metric=METRIC, unit=UNIT, through=THROUGHPUT, scaling=SCALING, sweep=CollectivesWorkload.name,
        figures=figures, wire=wire_lines(a),
        forecast=a.forecast, forecast_error=a.forecast_error, cells=a.cells, num=_num,
        whatif=a.whatif,
        pct=_pct)
