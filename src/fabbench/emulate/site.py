"""A site for a study: `fabbench emulate --nodes 4 --link 1gbit --slow-node 3:250mbit [--image
IMG --runtime R] -- study run STUDY --out DIR` runs the study as a site of that shape would.

The study runs on this host as usual; each of its cells is launched as `fabbench emulate` with
the site's links for the cell's nodes (a fresh cluster per cell, as a cell with a `link` axis
gets one; the first N nodes of the site for an N-node cell, so a slow node 3 is in the 4-node
cells only), its ranks in the site's image when one is given. The site travels from `emulate`
to `study run` in FABBENCH_EMULATE_SITE (JSON); every cell's manifest entry keeps the full
launch, so the study directory says what the site was.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

from fabbench.emulate.cluster_spec import Emulation, Link, format_rate
from fabbench.errors import UsageError

SITE_ENV = "FABBENCH_EMULATE_SITE"


@dataclass(frozen=True, kw_only=True)
class Site:
    """The emulated site: its nodes and links, and the image its ranks run in (or none)."""

    emulation: Emulation
    image: str | None = None
    runtime: str | None = None

    def __post_init__(self) -> None:
        if (self.image is None) != (self.runtime is None):
            raise UsageError("--image and --runtime go together")

    @property
    def nodes(self) -> int:
        return self.emulation.nodes

    def why_not(self, nodes: int, link: str | None) -> str | None:
        """Why this site cannot run a cell of ``nodes`` nodes (with its own ``link`` axis)."""
        if link is not None:
            return (f"the cell has its own link ({link}); the emulated site sets the links "
                    "(run the study without `emulate`, or drop its link axis)")
        if nodes > self.nodes:
            return f"needs {nodes} nodes; the emulated site has {self.nodes}"
        return None

    def cell_argv(self, *, nodes: int, ranks_per_node: int, max_time_s: float,
                  run: list[str]) -> list[str]:
        """`fabbench` words that launch `run` (a `run ...` command) on the site's first
        ``nodes`` nodes."""
        if nodes > self.nodes:
            raise UsageError(f"a {nodes}-node cell on an emulated site of {self.nodes} nodes")
        e = self.emulation
        argv = ["emulate", "run", "--nodes", str(nodes), "--link", format_rate(e.link.rate_bit_s)]
        if e.link.delay_us:
            argv += ["--delay", f"{e.link.delay_us:g}us"]
        if e.link.loss_pct:
            argv += ["--loss", f"{e.link.loss_pct:g}%"]
        for node, link in sorted(e.overrides.items()):
            if node >= nodes:
                continue
            if link.rate_bit_s != e.link.rate_bit_s:
                argv += ["--slow-node", f"{node}:{format_rate(link.rate_bit_s)}"]
            if link.loss_pct != e.link.loss_pct:
                argv += ["--lossy-node", f"{node}:{link.loss_pct:g}%"]
        argv += ["--ranks-per-node", str(ranks_per_node), "--max-time", f"{max_time_s:g}"]
        if self.image is not None:
            argv += ["--image", self.image, "--runtime", str(self.runtime)]
        return [*argv, "--", *run]

    def to_json(self) -> str:
        e = self.emulation
        return json.dumps({"nodes": e.nodes, "link": e.link.__dict__,
                           "overrides": {str(k): v.__dict__ for k, v in e.overrides.items()},
                           "image": self.image, "runtime": self.runtime})

    @classmethod
    def from_json(cls, text: str) -> Site:
        try:
            data = json.loads(text)
            emulation = Emulation(nodes=data["nodes"], link=Link(**data["link"]),
                                  overrides={int(k): Link(**v)
                                             for k, v in data["overrides"].items()})
            return cls(emulation=emulation, image=data["image"], runtime=data["runtime"])
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            raise UsageError(f"{SITE_ENV} is not an emulated site ({exc}); it is set by "
                             "`fabbench emulate ... -- study run`") from None


def current() -> Site | None:
    """The site this process runs a study for (FABBENCH_EMULATE_SITE), if any."""
    text = os.environ.get(SITE_ENV)
    return Site.from_json(text) if text else None
