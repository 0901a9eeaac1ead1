"""Emulated multi-node clusters on one Linux host: a network namespace per node (its own
interface, address in 198.18.0.0/15 and hostname), veth links to a bridge, tc shaping each link's
rate and delay in both directions, and each node's firewall losing its links' share of packets."""

from fabbench.emulate.cluster import ENV, Cluster, Node, current
from fabbench.emulate.cluster_spec import Emulation, Link, make_emulation

__all__ = ["ENV", "Cluster", "Emulation", "Link", "Node", "current", "make_emulation"]
