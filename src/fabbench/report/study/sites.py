"""Two studies as two sites: did both run the same image, and how do their networks differ.

- **The image** comes first: the image id each study's runs name (provenance.image.id: the same
  wherever the image was pulled from). One and the same id on both sides: the comparison is of
  sites. Otherwise it is of sites and images together, and the report says so and names both.
- **The network** from provenance: each node's link (an emulated cluster's tc-shaped links, or
  rank 0's NIC), the ceilings the raw tool measured (or why none was), and the slow node that
  a `pairs` cell names by the rule of workloads/pairs/slow_node.py (docs/methods.md, "Which node
  is slow, which rank is late"; a workload's findings, catalog.findings).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from fabbench import catalog
from fabbench.emulate.site import SITE_ENV, Site
from fabbench.report.study.cells import StudyCell
from fabbench.results.runs import Series

NO_IMAGE = "no image"  # a run outside the fabbench image (a host install)


def _ran(cells: Sequence[StudyCell]) -> list[Series]:
    """Every series of the cells that ran."""
    return [s for c in cells for s in c.series]


@dataclass(frozen=True)
class ImageCheck:
    """The images each side's runs name (ids; NO_IMAGE for a run outside one)."""

    a: tuple[str, ...]
    b: tuple[str, ...]
    a_refs: tuple[str, ...] = ()  # where each side's image was pulled from, where known
    b_refs: tuple[str, ...] = ()

    @property
    def same(self) -> bool:
        return len(self.a) == 1 and self.a == self.b and self.a[0] != NO_IMAGE

    @property
    def line(self) -> str:
        if self.same:
            refs = sorted(set(self.a_refs) | set(self.b_refs))
            return (f"same image: both studies ran {self.a[0]}"
                    + (f" (pulled as {', '.join(refs)})" if refs else "")
                    + "; the comparison is of the sites")
        if self.a == self.b == (NO_IMAGE,):
            return ("no image: neither study ran in the fabbench image (host installs); the "
                    "comparison is of the sites and their installs")
        return (f"DIFFERENT IMAGES: A ran {', '.join(self.a)}; B ran {', '.join(self.b)}; "
                "the comparison is of the sites and the images together")

    def to_json(self) -> dict[str, Any]:
        return {"same": self.same, "a": list(self.a), "b": list(self.b),
                "a_refs": list(self.a_refs), "b_refs": list(self.b_refs), "line": self.line}


def _images(series: Sequence[Series]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    ids, refs = set(), set()
    for s in series:
        image = s.run.provenance.image
        ids.add(image.id if image and image.id else NO_IMAGE)
        if image and image.ref:
            refs.add(image.ref)
    return tuple(sorted(ids)), tuple(sorted(refs))


def image_check(cells_a: Sequence[StudyCell], cells_b: Sequence[StudyCell]) -> ImageCheck:
    (a, a_refs), (b, b_refs) = _images(_ran(cells_a)), _images(_ran(cells_b))
    return ImageCheck(a or (NO_IMAGE,), b or (NO_IMAGE,), a_refs, b_refs)


@dataclass(frozen=True)
class SiteNetwork:
    """One side's network as its runs recorded it."""

    links: tuple[tuple[str, float], ...]  # (node, Gbit/s), the run with the most nodes
    links_from: str                       # "emulated (tc)", "rank 0's NIC ...", "unknown"
    ceilings: tuple[str, ...]             # what the raw tool measured, or why it did not
    slow: tuple[str, ...]                 # hosts the pairs rule names slow
    slow_text: tuple[str, ...]            # the rule's account (or why it was not applied)

    @property
    def links_text(self) -> str:
        if not self.links:
            return self.links_from
        parts, start = [], 0
        for i in range(1, len(self.links) + 1):
            if i == len(self.links) or self.links[i][1] != self.links[start][1]:
                names = self.links[start][0] if i - 1 == start else \
                    f"{self.links[start][0]}-{self.links[i - 1][0]}"
                parts.append(f"{names} {self.links[start][1]:g} Gbit/s")
                start = i
        return f"{', '.join(parts)} ({self.links_from})"

    def to_json(self) -> dict[str, Any]:
        return {"links": [{"node": n, "gbit_s": g} for n, g in self.links],
                "links_from": self.links_from, "links_text": self.links_text,
                "ceilings": list(self.ceilings), "slow": list(self.slow),
                "slow_text": list(self.slow_text)}


def _links(series: Sequence[Series]) -> tuple[tuple[tuple[str, float], ...], str]:
    runs = sorted((s.run for s in series), key=lambda r: r.nodes or 0, reverse=True)
    for run in runs:
        emulated = run.emulation
        if emulated:
            return (tuple((x.node or "?", x.speed_gbit_s or 0.0) for x in emulated.links or ()),
                    "emulated links, tc")
    for run in runs:  # ranks in an image do not see the cluster; the site's launch says
        site = run.provenance.env.get(SITE_ENV)
        if site:
            e = Site.from_json(site).emulation
            nodes = min(run.nodes or e.nodes, e.nodes)
            return (tuple((f"node{i}", e.link_of(i).rate_bit_s / 1e9) for i in range(nodes)),
                    f"emulated links, tc, as the run's {SITE_ENV} set them")
    for run in runs:
        nics = [(n.speed_mbit_s, n.name) for n in run.provenance.nics
                if n.speed_mbit_s and n.kind != "loopback"]
        if nics:
            speed, name = max(nics, key=lambda n: n[0])
            return ((run.provenance.host, speed / 1000),), f"rank 0's fastest NIC, {name}"
    return (), "link rates unknown (no emulation, no NIC speed recorded)"


def _ceilings(series: Sequence[Series]) -> tuple[str, ...]:
    measured, failed = [], set()
    for s in series:
        for c in s.ceilings:
            client, server = c.client.host, c.server.host
            if c.error or c.per_direction_gbit_s is None:
                failed.add(f"{c.tool} {client}→{server}: not measured "
                           f"({c.error or 'no result'})")
            else:
                measured.append(f"{c.tool} {c.mode} {client}→{server} "
                                f"{c.per_direction_gbit_s:.3g} Gbit/s per direction")
    if not measured and not failed:
        return ("no ceiling measured (no run spanned two hosts with --ceiling)",)
    return (*dict.fromkeys(measured), *sorted(failed))


def _slow(series: Sequence[Series]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    slow: list[str] = []
    text: list[str] = []
    for s in series:
        for found in catalog.findings(s.of_kind).values():
            if found is not None:
                slow += found.slow
                text += found.text
    if not text:
        return (), ("no pairs cell: the slow node was not looked for",)
    return tuple(dict.fromkeys(slow)), tuple(dict.fromkeys(text))


def site_network(cells: Sequence[StudyCell]) -> SiteNetwork:
    series = _ran(cells)
    links, links_from = _links(series)
    slow, slow_text = _slow(series)
    return SiteNetwork(links, links_from, _ceilings(series), slow, slow_text)


@dataclass(frozen=True)
class Sites:
    """The image check and both sides' networks."""

    image: ImageCheck
    a: SiteNetwork
    b: SiteNetwork
    notes: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        """The network differences, for people."""
        out = []
        if [g for _, g in self.a.links] != [g for _, g in self.b.links]:
            out.append(f"links differ: A {self.a.links_text}; B {self.b.links_text}")
        else:
            out.append(f"links the same: {self.a.links_text}")
        out.append("measured ceilings: A " + "; ".join(self.a.ceilings) + " | B "
                   + "; ".join(self.b.ceilings))
        for side, net in (("A", self.a), ("B", self.b)):
            if net.slow:
                out.append(f"slow node at {side}: {', '.join(net.slow)} ("
                           + " ".join(net.slow_text) + ")")
            else:
                out.append(f"no slow node at {side}: " + " ".join(net.slow_text))
        return out

    def to_json(self) -> dict[str, Any]:
        return {"image": self.image.to_json(), "a": self.a.to_json(), "b": self.b.to_json(),
                "lines": self.lines()}


def compare_sites(cells_a: Sequence[StudyCell], cells_b: Sequence[StudyCell]) -> Sites:
    return Sites(image_check(cells_a, cells_b), site_network(cells_a), site_network(cells_b))
