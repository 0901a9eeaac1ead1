# ruff: noqa: E501  (the template's markup lines are long by nature)
"""Study against study as one self-contained HTML page (`fabbench compare siteA/ siteB/ --html
F`): the image line first, then the cells (B/A, 95 % interval, p, verdict), the networks and the
provenance that differs; no script, nothing fetched."""

from __future__ import annotations

from datetime import datetime, timezone

import jinja2

from fabbench import __version__
from fabbench.report.html import PAGE_HEAD
from fabbench.report.significance import ALPHA
from fabbench.report.study.study_compare import StudyComparison, image_line, network_lines

_TEMPLATE = PAGE_HEAD + """.image{font-size:15px;border-left:4px solid #0a5ad4;padding:.5em 1em;background:#f6f8fa}
.image.differ{border-left-color:#b3261e;background:#fdecea}
</style></head><body>
<h1>{{ title }}</h1>
<p>fabbench {{ version }}, {{ generated }}. A = <code>{{ c.a }}</code>, B = <code>{{ c.b }}</code>.
A difference is called significant when a Mann-Whitney U test on the recorded samples gives
p &lt; {{ alpha }} and the bootstrap 95 % interval of the ratio of medians B/A excludes 1.</p>
<p id="image" class="image{% if not same %} differ{% endif %}">{{ image }}</p>

<h2>Cells: median B/A (&lt; 1: B is faster)</h2>
<table id="cells"><tr><th class="l">cell</th><th class="l">measure</th><th>A median</th><th>B median</th>
<th>B/A</th><th>95 % CI</th><th>p</th><th class="l">verdict</th></tr>
{% for p in c.pairs %}{% set v = p.verdict %}<tr><td class="l"><b>{{ p.label }}</b> <code>{{ p.a.id }}</code></td>
<td class="l">{{ p.what }}</td><td>{{ "%.4g"|format(p.a_median) }}</td><td>{{ "%.4g"|format(p.b_median) }}</td>
<td>{{ "%.3f"|format(v.ratio) }}</td>
<td>{% if v.ci_low is not none %}{{ "%.3f"|format(v.ci_low) }}–{{ "%.3f"|format(v.ci_high) }}{% else %}-{% endif %}</td>
<td>{% if v.p_value is not none %}{{ "%.3g"|format(v.p_value) }}{% else %}-{% endif %}</td>
<td class="l {{ v.verdict }}">{{ v.verdict }}</td></tr>
{% endfor %}</table>
<ul id="summary">{% for line in summary %}<li>{{ line }}</li>{% endfor %}</ul>

<h2>Networks</h2>
<ul id="network">{% for line in network %}<li>{{ line }}</li>{% endfor %}</ul>

<h2>Provenance that differs</h2>
<table id="provenance"><tr><th class="l">field</th><th class="l">A</th><th class="l">B</th></tr>
{% for key, values in c.provenance %}<tr><td class="l">{{ key }}</td>{% for v in values %}<td class="l">{{ v }}</td>{% endfor %}</tr>
{% else %}<tr><td class="l" colspan="3">(none: same set-up)</td></tr>{% endfor %}</table>
</body></html>
"""


def render(c: StudyComparison, *, title: str | None = None, summary: list[str]) -> str:
    env = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined)
    return env.from_string(_TEMPLATE).render(
        title=title or f"fabbench: {c.b} against {c.a}", version=__version__,
        generated=datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), alpha=ALPHA,
        c=c, image=image_line(c), same=bool(c.sites and c.sites.image.same),
        summary=summary, network=network_lines(c))
