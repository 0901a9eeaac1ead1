"""Study against study (site A against site B, or one study at two link speeds): first whether
both ran the same image (report/study/sites.py), then cell by cell with the same statistics as
the report, the cells that differ significantly named with their 95 % intervals, the networks
(links, measured ceilings, the slow node) and the provenance that differs (fabric, NICs,
libraries, image, place).

Cells are matched by their place in the matrix: workload, fabric, primitive, GPUDirect, nodes,
and the link when both studies have the same links (otherwise the link is what is compared).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fabbench.errors import UsageError
from fabbench.report.compare import provenance_diff
from fabbench.report.significance import Verdict
from fabbench.report.study.cells import StudyCell, load_cells
from fabbench.report.study.groups import CellResult, all_groups, verdict_of
from fabbench.report.study.sites import Sites, compare_sites
from fabbench.scaling.predict import jsonable
from fabbench.study.manifest import StudyManifest


@dataclass
class MatchedCells:
    key: tuple[object, ...]  # _key's: the axes that match a cell of A to one of B
    what: str       # a network ("gpt-tiny"), a study workload's name, "allreduce 1M"
    a: StudyCell
    b: StudyCell
    a_median: float
    b_median: float
    verdict: Verdict

    @property
    def label(self) -> str:
        return self.a.label if self.a.label == self.b.label else f"{self.a.label} | {self.b.label}"


@dataclass
class StudyComparison:
    a: Path
    b: Path
    pairs: list[MatchedCells] = field(default_factory=list)
    only_a: list[str] = field(default_factory=list)
    only_b: list[str] = field(default_factory=list)
    provenance: list[tuple[str, list[str]]] = field(default_factory=list)
    sites: Sites | None = None

    @property
    def different(self) -> list[MatchedCells]:
        return [p for p in self.pairs if p.verdict.significant]

    def to_json(self) -> dict[str, Any]:
        comparison: dict[str, Any] = jsonable({  # jsonable keeps an object an object
            "a": str(self.a), "b": str(self.b),
            "rows": [{"what": p.what, "a_cell": p.a.id, "b_cell": p.b.id, "label": p.label,
                      "a_median": p.a_median, "b_median": p.b_median, "ratio": p.verdict.ratio,
                      "ci_low": p.verdict.ci_low, "ci_high": p.verdict.ci_high,
                      "p_value": p.verdict.p_value, "verdict": p.verdict.verdict}
                     for p in self.pairs],
            "different": [f"{p.a.id}: {p.what}" for p in self.different],
            "only_a": self.only_a, "only_b": self.only_b,
            "provenance_diff": dict(self.provenance),
            **({"image": self.sites.image.to_json(), "network": {"a": self.sites.a.to_json(),
                                                              "b": self.sites.b.to_json(),
                                                              "lines": self.sites.lines()}}
               if self.sites else {})})
        return comparison


def _key(c: StudyCell, with_link: bool) -> tuple[object, ...]:
    a = c.axes
    key = (a["workload"], a["fabric"], a["primitive"], a["gpudirect"], a["nodes"])
    return (*key, a["link"]) if with_link else key


def _rows(cells: list[StudyCell]) -> dict[tuple[str, str], CellResult]:
    """(cell id, what) -> CellResult, from the report's own grouping."""
    out = {}
    for g in all_groups(cells):
        for r in g.rows:
            out[(r.cell.id, g.what)] = r
    return out


def _flat_place(doc: StudyManifest) -> dict[str, str]:
    p = doc.place
    return {"study.host": doc.host, "study.scheduler": p.scheduler,
            "study.nodes": str(p.nodes), "study.fabbench": doc.fabbench,
            "study.source_sha256": doc.source_sha256[:12]}


def compare_studies(dir_a: str | Path, dir_b: str | Path) -> StudyComparison:
    dir_a, dir_b = Path(dir_a), Path(dir_b)
    doc_a, cells_a, _ = load_cells(dir_a)
    doc_b, cells_b, _ = load_cells(dir_b)
    with_link = sorted(map(str, doc_a.axes.get("link", []))) == sorted(
        map(str, doc_b.axes.get("link", [])))
    ran_a = [c for c in cells_a if c.series]
    ran_b = [c for c in cells_b if c.series]
    by_b = {_key(c, with_link): c for c in ran_b}
    rows_a, rows_b = _rows(ran_a), _rows(ran_b)
    out = StudyComparison(dir_a, dir_b, sites=compare_sites(cells_a, cells_b))
    matched_b = set()
    for ca in ran_a:
        cb = by_b.get(_key(ca, with_link))
        if cb is None:
            out.only_a.append(ca.id)
            continue
        matched_b.add(cb.id)
        for (cid, what), ra in rows_a.items():
            if cid != ca.id or (cb.id, what) not in rows_b:
                continue
            rb = rows_b[(cb.id, what)]
            v = verdict_of(ra, rb)
            out.pairs.append(MatchedCells(_key(ca, with_link), what, ca, cb, ra.median,
                                          rb.median, v))
    out.only_b = [c.id for c in ran_b if c.id not in matched_b]
    if not out.pairs:
        raise UsageError(f"nothing to compare: {dir_a} and {dir_b} have no cell in common that "
                         "ran in both")
    # provenance: the run records of the first matched pair, and the studies' own places
    first = out.pairs[0]
    diff = provenance_diff([first.a.series[-1], first.b.series[-1]])
    fa, fb = _flat_place(doc_a), _flat_place(doc_b)
    diff += [(k, [fa[k], fb[k]]) for k in fa if fa[k] != fb[k]]
    options: dict[str, list[str]] = {}  # the cells' own options (a study file that changed)
    for p in out.pairs:
        oa, ob = p.a.entry.options, p.b.entry.options
        for k in sorted(oa.keys() | ob.keys()):
            if oa.get(k) != ob.get(k):
                options.setdefault(f"options.{k}", [str(oa.get(k, "—")), str(ob.get(k, "—"))])
    diff += list(options.items())
    out.provenance = diff
    return out


def image_line(c: StudyComparison) -> str:
    """What is compared: one image at two sites, or sites and images together."""
    return c.sites.image.line if c.sites else "images not looked at"


def summary_lines(c: StudyComparison) -> list[str]:
    lines = [f"{len(c.pairs)} matched measurements, {len(c.different)} differ significantly "
             f"(B = {c.b} against A = {c.a})"]
    for p in c.different:
        v = p.verdict
        ci = ("?" if v.ci_low is None or v.ci_high is None  # a significant verdict has both
              else f"{(v.ci_low - 1) * 100:+.1f} … {(v.ci_high - 1) * 100:+.1f}")
        lines.append(f"  {p.a.id} ({p.what}): B is {abs(v.ratio - 1) * 100:.1f} % "
                     f"{'slower' if v.ratio > 1 else 'faster'} (95 % CI {ci} %, "
                     f"p = {v.p_value:.3g})")
    if c.only_a:
        lines.append(f"only in A: {', '.join(c.only_a)}")
    if c.only_b:
        lines.append(f"only in B: {', '.join(c.only_b)}")
    return lines


def network_lines(c: StudyComparison) -> list[str]:
    """Links, measured ceilings and the slow node of each side."""
    return c.sites.lines() if c.sites else []
