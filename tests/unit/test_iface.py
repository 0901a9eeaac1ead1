"""Each rank's interface when none is given (launch/iface.py): the route to its rendezvous
peer, the default route, the only interface up; in a pod (eth0, with or without a default
route), on an emulated node (fbnet0, none), and refused in one line when nothing answers."""

from __future__ import annotations

from pathlib import Path

import pytest

from fabbench.errors import UsageError
from fabbench.launch import iface
from fabbench.launch.iface import hnp_address, pick_interface

ROUTE_HEAD = "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n"
POD_ADDRS = {"lo": ["127.0.0.1", "::1"], "eth0": ["198.19.0.7", "fe80::1%eth0"]}


def host(tmp_path: Path, devices: dict[str, tuple[str, str]], routes: list[str]) -> Path:
    """A recorded tree: each device (type, operstate), /proc/net/route with these lines."""
    for name, (kind, state) in devices.items():
        d = tmp_path / "sys/class/net" / name
        d.mkdir(parents=True)
        (d / "type").write_text(kind + "\n")
        (d / "operstate").write_text(state + "\n")
    (tmp_path / "proc/net").mkdir(parents=True)
    (tmp_path / "proc/net/route").write_text(ROUTE_HEAD + "".join(r + "\n" for r in routes))
    return tmp_path


def pod(tmp_path: Path, default: bool = True) -> Path:
    routes = ["eth0\t00001FC6\t00000000\t0001\t0\t0\t0\t0000FFFF\t0\t0\t0"]
    if default:
        routes.insert(0, "eth0\t00000000\t010013C6\t0003\t0\t0\t0\t00000000\t0\t0\t0")
    return host(tmp_path, {"lo": ("772", "unknown"), "eth0": ("1", "up")}, routes)


class Network:
    """A host's names, routes and addresses, as the rules ask for them."""

    def __init__(self, names: dict[str, list[str]], routes: dict[str, str],
                 addresses: dict[str, list[str]], resolves_after: int = 0) -> None:
        self.names, self.routes, self.addresses = names, routes, addresses
        self.resolves_after, self.lookups = resolves_after, 0
        self.now = 0.0

    def resolve(self, name: str) -> list[str]:
        self.lookups += 1
        return self.names.get(name, []) if self.lookups > self.resolves_after else []

    def sleep(self, seconds: float) -> None:
        self.now += seconds

    def rules(self, root: Path) -> dict:
        return {"root": root, "resolve": self.resolve, "source_of": self.routes.get,
                "addresses": lambda: self.addresses, "sleep": self.sleep,
                "clock": lambda: self.now}


def test_a_pod_takes_the_interface_of_its_route_to_master_addr(tmp_path):
    net = Network({"fb-0.fb": ["198.19.1.5"]}, {"198.19.1.5": "198.19.0.7"}, POD_ADDRS)
    picked = pick_interface({"MASTER_ADDR": "fb-0.fb"}, **net.rules(pod(tmp_path, False)))
    assert picked.name == "eth0"
    assert picked.note() == ("iface=eth0 (holds 198.19.0.7, the source address of the route "
                             "to MASTER_ADDR fb-0.fb = 198.19.1.5)")


def test_a_name_that_resolves_late_is_waited_for(tmp_path):
    """Index 0's pod may have no address yet when another pod starts: its name is waited for."""
    net = Network({"fb-0.fb": ["198.19.1.5"]}, {"198.19.1.5": "198.19.0.7"}, POD_ADDRS,
                  resolves_after=4)
    picked = pick_interface({"MASTER_ADDR": "fb-0.fb"}, wait_s=10, **net.rules(pod(tmp_path)))
    assert picked.name == "eth0" and "route to MASTER_ADDR" in picked.why
    assert net.lookups == 5 and net.now == pytest.approx(4 * iface.RETRY_S)


def test_a_name_that_never_resolves_falls_to_the_default_route_and_says_so(tmp_path):
    net = Network({}, {}, POD_ADDRS)
    picked = pick_interface({"MASTER_ADDR": "fb-0.fb"}, wait_s=3, **net.rules(pod(tmp_path)))
    assert picked.name == "eth0"
    assert picked.why == ("the default route's; MASTER_ADDR fb-0.fb did not resolve within "
                          "3 s")
    assert net.now >= 3


def test_mpirun_ranks_route_to_mpiruns_host(tmp_path):
    uri = "1275723776.0;tcp://198.19.2.9,198.18.5.4:52145;tcp6://[2001:2::2]:42673"
    net = Network({"198.19.2.9": ["198.19.2.9"]}, {"198.19.2.9": "198.19.0.7"}, POD_ADDRS)
    picked = pick_interface({"OMPI_MCA_orte_hnp_uri": uri}, **net.rules(pod(tmp_path)))
    assert picked.name == "eth0"
    assert picked.why.endswith("route to mpirun's host (OMPI_MCA_orte_hnp_uri)")


@pytest.mark.parametrize("uri,address", [
    ("1.0;tcp://198.18.6.2:52145;tcp6://[2001:2::2]:42673", "198.18.6.2"),
    ("1.0;tcp://198.18.6.2,198.18.5.1:52145", "198.18.6.2"),
    ("1.0;tcp6://[2001:2::2]:42673", "2001:2::2"),
    ("1.0;usock://x", None), ("", None), ("garbage", None)])
def test_hnp_address(uri, address):
    assert hnp_address(uri) == address


def test_an_emulated_node_has_no_default_route_and_one_interface_up(tmp_path):
    root = host(tmp_path, {"lo": ("772", "unknown"), "fbnet0": ("1", "up")},
                ["fbnet0\t000012C6\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0"])
    picked = pick_interface({}, **Network({}, {}, {}).rules(root))
    assert picked.name == "fbnet0"
    assert picked.why == ("the only interface up besides loopback; no rendezvous peer named "
                          "(MASTER_ADDR, OMPI_MCA_orte_hnp_uri); no default route")


def test_a_route_held_by_another_interface_is_that_interface(tmp_path):
    """Two NICs (a pod with a second network): the peer's route decides, not the default."""
    root = host(tmp_path, {"lo": ("772", "unknown"), "eth0": ("1", "up"), "net1": ("1", "up")},
                ["eth0\t00000000\t010013C6\t0003\t0\t0\t0\t00000000\t0\t0\t0"])
    net = Network({"peer": ["198.18.7.2"]}, {"198.18.7.2": "198.18.7.1"},
                  {**POD_ADDRS, "net1": ["198.18.7.1"]})
    assert pick_interface({"MASTER_ADDR": "peer"}, **net.rules(root)).name == "net1"


def test_nothing_answers(tmp_path):
    root = host(tmp_path, {"lo": ("772", "unknown"), "a": ("1", "up"), "b": ("1", "up")}, [])
    net = Network({"peer": ["198.18.6.1"]}, {}, POD_ADDRS)
    picked = pick_interface({"MASTER_ADDR": "peer"}, **net.rules(root))
    assert picked.name is None
    assert picked.why == ("no route to MASTER_ADDR peer (198.18.6.1); no default route; "
                          "interfaces up besides loopback: a, b")


def test_the_kernel_picks_loopback_towards_localhost():
    """The real host's rules: a peer on this host is reached over loopback."""
    assert iface.source_address("127.0.0.1") == "127.0.0.1"
    assert iface.holder("127.0.0.1", iface.host_addresses()) == "lo"
    picked = pick_interface({"MASTER_ADDR": "localhost"}, wait_s=0)
    assert picked.name == "lo" and "MASTER_ADDR localhost" in picked.why


def test_resolve_fills_the_profile_with_the_interface_found(monkeypatch, tmp_path):
    """A gloo rank without --iface in a pod: GLOO_SOCKET_IFNAME from the route to MASTER_ADDR,
    and the interface found kept beside the settings; a profile that needs one when none is
    found is refused in one line saying what was tried."""
    from fabbench import config
    from fabbench.launch import settings
    from fabbench.plan import Plan

    def plan_of(given: str | None) -> Plan:
        return Plan.of(config.RunConfig(fabric="ethernet", primitive="gloo"),
                       fabric="ethernet", primitive="gloo", device="cpu", ranks=2, iface=given,
                       out="x.jsonl", run_id="r")

    plan = plan_of(None)
    monkeypatch.setenv("MASTER_ADDR", "localhost")
    resolved = settings.resolve(plan)
    assert resolved.settings.env["GLOO_SOCKET_IFNAME"] == "lo"
    assert resolved.iface is not None and resolved.iface.name == "lo"
    monkeypatch.setattr(settings, "pick_interface",
                        lambda **_: iface.Picked(None, "no default route"))
    with pytest.raises(UsageError, match=r"needs a network interface \(\{iface\}\) and none was "
                       r"found \(no default route\): give --iface"):
        settings.resolve(plan)
    given = settings.resolve(plan_of("eth9"))
    assert given.iface is None and given.settings.env["GLOO_SOCKET_IFNAME"] == "eth9"
