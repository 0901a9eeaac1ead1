# ruff: noqa: E501  (the template's markup lines are long by nature)
"""One self-contained HTML file: tables, warnings, provenance and the figures embedded as SVG
data URIs (each figure isolated, no external fetch, no script)."""

from __future__ import annotations

import base64
from collections.abc import Sequence
from datetime import datetime, timezone
from typing import TYPE_CHECKING

import jinja2

from fabbench import __version__
from fabbench.report.compare import Comparison
from fabbench.report.drift import ALPHA as TREND_ALPHA
from fabbench.report.significance import ALPHA
from fabbench.report.tables import (
    busbw_text,
    count_of,
    efficiency_lines,
    link_pct,
    ops_of,
    unstable,
    warnings_of,
)
from fabbench.results.link import format_gbit_s, link_of
from fabbench.results.runs import Series
from fabbench.timing.stats import STABLE_REL
from fabbench.workloads.train.record import Train

if TYPE_CHECKING:
    from fabbench.report.plots import Plot  # matplotlib: imported where figures are drawn
    from fabbench.report.trend import Trend

# The head and style every fabbench page shares (a template adds its own rules, then
# "</style></head><body>").
PAGE_HEAD = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="generator" content="fabbench {{ version }}">
<title>{{ title }}</title>
<style>
body{font:14px/1.45 system-ui,sans-serif;margin:1.5em auto;max-width:1300px;color:#222;padding:0 1em}
h1{font-size:1.6em}h2{border-bottom:1px solid #ccc;padding-bottom:.2em;margin-top:1.6em}
table{border-collapse:collapse;margin:.6em 0;font-size:12.5px}
th,td{border:1px solid #ddd;padding:2px 7px;text-align:right}th{background:#f3f3f3}
td.l,th.l{text-align:left}
.faster{color:#0a7a2b;font-weight:600}.slower{color:#b3261e;font-weight:600}.same{color:#666}
.warn{background:#fff6e0;border-left:4px solid #e0a000;padding:.4em .8em;margin:.5em 0}
figure{margin:1em 0}figure img{max-width:100%;border:1px solid #eee}
figcaption{color:#555;font-size:12.5px}details{margin:.4em 0}code{font-size:12px}
"""

_TEMPLATE = PAGE_HEAD + """tr.unstable td{background:#fff6e0}
</style></head><body>
<h1>{{ title }}</h1>
<p>fabbench {{ version }}, {{ generated }}. A point is flagged unstable unless the 95% confidence
interval of its median lies within &plusmn;{{ stable_pct }}% of the median.
{% if comparison %}Differences are called real when a Mann-Whitney U test gives p &lt; {{ alpha }}
and the bootstrap 95% interval of the median ratio excludes 1.{% endif %}</p>

<h2>Runs</h2>
<table><tr><th class="l">series</th><th class="l">file</th><th class="l">host</th>
<th class="l">fabric / primitive</th><th class="l">transport</th><th>ranks</th><th>nodes</th>
<th class="l">link</th><th class="l">status</th></tr>
{% for s in series %}<tr><td class="l"><b>{{ s.label }}</b></td><td class="l"><code>{{ s.path }}</code></td>
<td class="l">{{ s.host }}</td><td class="l">{{ s.run.fabric }} / {{ s.run.primitive }}</td>
<td class="l">{{ s.transport }}</td><td>{{ s.run.ranks }}</td><td>{{ s.run.nodes }}</td>
<td class="l">{{ links[loop.index0] }}</td>
<td class="l">{{ "ok" if s.summary and s.summary.ok else ("failed: " ~ s.summary.error if s.summary else "no summary") }}</td></tr>
{% endfor %}</table>
{% for w in warnings %}<div class="warn">{{ w }}</div>
{% endfor %}
{% if efficiency %}<h2>Efficiency against the link</h2><ul>
{% for e in efficiency %}<li>{{ e }}</li>{% endfor %}</ul>{% endif %}
{% if floors %}<h2>Floors</h2><p>{{ floors[0] }}</p><ul>
{% for line in floors[1] %}<li{% if line.startswith("FAIL") or line.endswith(": fail") or ": fail [" in line %} class="warn"{% endif %}>{{ line }}</li>{% endfor %}</ul>{% endif %}

{% if figures %}<h2>Figures</h2>
{% for f in figures %}<figure id="fig-{{ f.name }}"><img alt="{{ f.title }}: {{ f.series|join(', ') }}"
 src="data:image/svg+xml;base64,{{ f.data }}">
<figcaption>{{ f.title }} — series: {{ f.series|join(', ') }}</figcaption></figure>
{% endfor %}{% endif %}

{% if comparison %}<h2>Comparison against {{ comparison.baseline.label }}</h2>
{% for other in comparison.others %}<p><b>{{ other.label }}</b>: {% for k, v in comparison.counts(other).items() %}{{ v }} {{ k }}{{ ", " if not loop.last }}{% endfor %}
(time ratio = {{ other.label }} / {{ comparison.baseline.label }}, p50).</p>{% endfor %}
{% for u in comparison.unmatched %}<div class="warn">{{ u }}</div>{% endfor %}
{% for op in comparison.ops() %}<h3>{{ op }}</h3>
<table><tr><th class="l">B</th><th>size (B)</th><th class="l">type</th><th>A p50 (µs)</th><th>B p50 (µs)</th>
<th>ratio B/A</th><th>95% CI</th><th>p</th><th class="l">verdict</th><th class="l">notes</th></tr>
{% for r in comparison.rows if r.op == op %}<tr{% if r.notes %} class="unstable"{% endif %}>
<td class="l">{{ r.other.label }}</td><td>{{ r.bytes }}</td><td class="l">{{ r.dtype }}</td>
<td>{{ "%.2f"|format(r.a.time_us.p50) }}</td><td>{{ "%.2f"|format(r.b.time_us.p50) }}</td>
<td>{{ "%.3f"|format(r.verdict.ratio) }}</td>
<td>{% if r.verdict.ci_low is not none %}{{ "%.3f"|format(r.verdict.ci_low) }}–{{ "%.3f"|format(r.verdict.ci_high) }}{% else %}-{% endif %}</td>
<td>{% if r.verdict.p_value is not none %}{{ "%.3g"|format(r.verdict.p_value) }}{% else %}-{% endif %}</td>
<td class="l {{ r.verdict.verdict }}">{{ r.verdict.verdict }}</td><td class="l">{{ r.notes }}</td></tr>
{% endfor %}</table>{% endfor %}
{% if comparison.train %}<h3>Training</h3><table><tr><th class="l">B</th><th class="l">model</th><th>ranks</th>
<th>A samples/s</th><th>B samples/s</th><th>ratio B/A</th><th>A scaling</th><th>B scaling</th></tr>
{% for t in comparison.train %}<tr><td class="l">{{ t.other.label }}</td><td class="l">{{ t.model }}</td><td>{{ t.ranks }}</td>
<td>{{ fmt_sps(t.a) }}</td><td>{{ fmt_sps(t.b) }}</td>
<td>{% if t.a and t.b %}{{ "%.3f"|format(t.b.samples_per_s.p50 / t.a.samples_per_s.p50) }}{% else %}-{% endif %}</td>
<td>{{ fmt_eff(t.a) }}</td><td>{{ fmt_eff(t.b) }}</td></tr>{% endfor %}</table>{% endif %}
<h3>Provenance that differs</h3>
{% if comparison.provenance %}<table><tr><th class="l">field</th>{% for s in series %}<th class="l">{{ s.label }}</th>{% endfor %}</tr>
{% for key, values in comparison.provenance %}<tr><td class="l"><code>{{ key }}</code></td>{% for v in values %}<td class="l">{{ v }}</td>{% endfor %}</tr>
{% endfor %}</table>{% else %}<p>None: the runs were made on the same set-up.</p>{% endif %}
{% endif %}


{% if train %}<h2>Training</h2><table><tr><th class="l">series</th><th class="l">model</th><th>ranks</th>
<th>batch/rank</th><th>samples/s p50</th><th>± ci95</th><th>step ms</th><th>comm ms</th><th>scaling</th></tr>
{% for s, t in train %}<tr><td class="l">{{ s.label }}</td><td class="l">{{ t.model }}</td><td>{{ t.ranks }}</td>
<td>{{ t.batch_per_rank }}</td><td>{{ "%.1f"|format(t.samples_per_s.p50) }}</td><td>{{ "%.1f"|format(t.samples_per_s.ci95) }}</td>
<td>{{ "%.1f"|format(t.step_ms) }}</td><td>{{ "%.1f"|format(t.comm_ms) }}</td><td>{{ fmt_eff(t) }}</td></tr>
{% endfor %}</table>{% endif %}

{% if tables %}<h2>Collectives</h2>
{% for s, op, rows in tables %}<details{% if loop.index <= 2 %} open{% endif %}><summary><b>{{ s.label }}</b> — {{ op }}</summary>
<table><tr><th>size (B)</th><th>count</th><th class="l">type</th><th>time p50 (µs)</th><th>p99 (µs)</th>
<th>algbw (GB/s)</th><th>busbw (GB/s)</th><th>#wrong</th><th>median &plusmn;CI95 %</th><th>samples</th><th>link %</th><th class="l">transport</th></tr>
{% for r in rows %}<tr{% if r.unstable %} class="unstable" title="{{ r.unstable }}"{% endif %}><td>{{ r.bytes }}</td><td>{{ r.count }}</td>
<td class="l">{{ r.dtype }}</td><td>{{ "%.2f"|format(r.p50) }}</td><td>{{ "%.2f"|format(r.p99) }}</td>
<td>{{ "%.3f"|format(r.algbw) }}</td><td>{{ r.busbw }}</td><td>{{ r.wrong }}</td>
<td>{{ r.ci }}</td><td>{{ r.samples }}</td><td>{{ r.link }}</td><td class="l">{{ r.transport }}</td></tr>
{% endfor %}</table></details>
{% endfor %}{% endif %}

<h2>Provenance</h2>
{% for s in series %}<details><summary>{{ s.label }} — {{ s.host }}, run {{ s.run.run_id }}</summary>
<pre>{{ provenance[loop.index0] }}</pre></details>{% endfor %}
</body></html>
"""


def _fmt_sps(t: Train | None) -> str:
    return "-" if t is None else f"{t.samples_per_s['p50']:.1f}"


def _fmt_eff(t: Train | None) -> str:
    if t is None or t.scaling_efficiency is None:
        return "-"
    return f"{100 * t.scaling_efficiency:.0f}%"


def _table_rows(s: Series, op: str) -> list[dict[str, object]]:
    link = link_of(s.run)
    rows = []
    for r in (c for c in s.collectives if c.op == op):
        rel = r.median_ci95_rel
        rows.append({"bytes": r.bytes, "count": count_of(r), "dtype": r.dtype,
                     "p50": r.time_us.p50, "p99": r.time_us.p99,
                     "algbw": r.algbw_gbyte_s, "busbw": busbw_text(r),
                     "wrong": "N/A" if r.wrong is None else r.wrong,
                     "ci": "-" if rel is None else f"{100 * rel:.1f}",
                     "samples": r.samples or len(r.samples_us or []),
                     "link": link_pct(link, r),
                     "transport": r.transport, "unstable": unstable(r) or ""})
    return rows


def render(series: Sequence[Series], plots: Sequence[Plot], *, title: str,
           comparison: Comparison | None = None,
           floors: tuple[str, list[str]] | None = None) -> str:
    import json

    env = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined)
    template = env.from_string(_TEMPLATE)
    links = []
    for s in series:
        link = link_of(s.run)
        links.append("n/a" if link is None else f"{format_gbit_s(link.speed_gbit_s)} ({link.what})")
    figures = [{"name": p.name, "title": p.title, "series": p.series,
                "data": base64.b64encode(p.svg().encode()).decode()} for p in plots]
    return template.render(
        title=title, version=__version__,
        generated=datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        stable_pct=round(100 * STABLE_REL), alpha=ALPHA,
        series=list(series), links=links, warnings=warnings_of(series),
        efficiency=efficiency_lines(series), comparison=comparison, figures=figures,
        train=[(s, t) for s in series for t in s.of_kind(Train)],
        tables=[(s, op, _table_rows(s, op)) for s in series for op in ops_of([s])],
        provenance=[json.dumps(s.run.provenance.to_json(), indent=1, sort_keys=True)
                    for s in series],
        fmt_sps=_fmt_sps, fmt_eff=_fmt_eff, floors=floors)


_TREND_TEMPLATE = PAGE_HEAD + """tr.flagged td{background:#fdecea}
</style></head><body>
{% macro row(n) %}<tr{% if n.flagged %} class="flagged"{% endif %}><td class="l">{{ n.subject }}</td><td>{{ n.runs }}</td>
<td>{{ num(n.first) }}</td><td>{{ num(n.last) }}</td><td>{{ num(n.fit.slope, "+.3g") }}</td>
<td>{{ num(n.fit.projected) }}</td><td>{{ num(n.floor) }}</td><td>{{ num(n.fit.p_value, ".2g") }}</td>
<td class="l">{{ n.judged.verdict }}</td><td class="l">{{ n.judged.why }}</td></tr>
{% endmacro %}
<h1>{{ title }}</h1>
<p>fabbench {{ version }}, {{ generated }}. {{ runs|length }} runs in the order they started
({{ runs[0].started }} to {{ runs[-1].started }}), judged against the floors of
<b>{{ floors.name }}</b> (<code>{{ floors.path }}</code>) as <code>fabbench floors verify</code>
judges one run. A series is <b>drifting</b> when its Theil-Sen slope over the last {{ window }} runs
points toward the floor, a one-sided Mann-Kendall test gives p &le; {{ alpha }}, and the fit
projected {{ ahead }} run(s) ahead crosses the floor while the latest figure still passes it;
<b>below floor</b> when the latest figure fails it (docs/methods.md).</p>
{% for w in warnings %}<div class="warn">{{ w }}</div>
{% endfor %}
{% for r in rules %}<h2>Rule {{ r.rule.id }}: {{ r.rule.workload }} {{ r.rule.metric }} ({{ r.unit }})</h2>
<table><tr><th class="l">node</th><th>runs</th><th>first</th><th>last</th><th>slope/run</th>
<th>projected</th><th>floor</th><th>p</th><th class="l">verdict</th><th class="l">why</th></tr>
{% for n in r.nodes %}{{ row(n) }}{% endfor %}</table>
{% if r.links %}<p>The links of the flagged node(s), of the {{ r.links_latest }} of the latest run:</p>{% endif %}
{% if r.links %}<table><tr><th class="l">link</th><th>runs</th><th>first</th><th>last</th><th>slope/run</th>
<th>projected</th><th>floor</th><th>p</th><th class="l">verdict</th><th class="l">why</th></tr>
{% for n in r.links %}{{ row(n) }}{% endfor %}</table>{% endif %}
{% endfor %}
{% if figures %}<h2>Figures</h2>
{% for f in figures %}<figure id="fig-{{ f.name }}"><img alt="{{ f.title }}"
 src="data:image/svg+xml;base64,{{ f.data }}"><figcaption>{{ f.title }}</figcaption></figure>
{% endfor %}{% endif %}
<h2>Runs</h2>
<table><tr><th>#</th><th class="l">run</th><th class="l">started</th><th class="l">file</th></tr>
{% for r in runs %}<tr><td>{{ loop.index }}</td><td class="l">{{ r.run_id }}</td><td class="l">{{ r.started }}</td>
<td class="l"><code>{{ r.file }}</code></td></tr>{% endfor %}</table>
</body></html>
"""


def render_trend(found: Trend, plots: Sequence[Plot], *, title: str) -> str:
    """The page of `fabbench report DIR --trend`: per rule its nodes' and links' series and
    verdicts, the figures, the runs."""
    env = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined)

    def num(v: float | None, fmt: str = ".4g") -> str:
        return "-" if v is None else format(v, fmt)

    return env.from_string(_TREND_TEMPLATE).render(
        title=title, version=__version__,
        generated=datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        runs=found.runs, floors=found.floors, window=found.window, ahead=found.ahead,
        alpha=TREND_ALPHA, warnings=found.warnings, rules=found.rules, num=num,
        figures=[{"name": p.name, "title": p.title,
                  "data": base64.b64encode(p.svg().encode()).decode()} for p in plots])
