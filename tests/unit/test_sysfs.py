"""Detection over recorded sysfs trees of four kinds of host (tests/fixtures/sysfs)."""

from __future__ import annotations

from pathlib import Path

import pytest

from fabbench.errors import UsageError
from fabbench.fabrics.detect import detect_fabric, first_active_rdma_device, require_hardware
from fabbench.fabrics.profile import load_profile
from fabbench.sysinfo import sysfs

TREES = Path(__file__).parents[1] / "fixtures" / "sysfs"
IB, ROCE, OPA, ETH = (str(TREES / h) for h in ("ib-mlx5", "roce", "opa-hfi1", "eth-only"))


@pytest.mark.parametrize(("root", "fabric"), [(IB, "infiniband"), (ROCE, "infiniband"),
                                              (OPA, "omnipath"), (ETH, "ethernet")])
def test_detect_fabric(root, fabric):
    assert detect_fabric(root) == fabric


def test_mellanox_infiniband_port():
    (port,) = sysfs.rdma_ports(IB)
    assert (port.device, port.port, port.state, port.link_layer, port.driver) == (
        "mlx5_0", 1, "ACTIVE", "InfiniBand", "mlx5_core")
    assert port.active and port.rate_gbit_s == 100.0 and not sysfs.is_omnipath(port)
    assert sysfs.gpudirect_rdma(IB) and first_active_rdma_device(IB) == "mlx5_0"


def test_roce_ports_have_an_ethernet_link_layer_and_a_down_port_is_not_active():
    active, down = sysfs.rdma_ports(ROCE)
    assert active.link_layer == "Ethernet" and active.active and active.rate_gbit_s == 100
    assert down.device == "mlx5_1" and down.state == "DOWN" and not down.active
    assert not sysfs.gpudirect_rdma(ROCE)


def test_omnipath_hfi1():
    (port,) = sysfs.rdma_ports(OPA)
    assert sysfs.is_omnipath(port) and port.driver == "hfi1" and port.active
    assert sysfs.hfi_devices(OPA) == ["hfi1_0"]
    assert first_active_rdma_device(OPA) is None  # hfi1 is not a verbs device for UCX


def test_ethernet_only_host():
    assert sysfs.rdma_ports(ETH) == [] and sysfs.hfi_devices(ETH) == []
    nics = {d.name: d for d in sysfs.net_devices(ETH)}
    assert nics["enp65s0f0"].speed_mbit_s == 25000 and nics["enp65s0f0"].pci
    assert nics["docker0"].speed_mbit_s is None and not nics["docker0"].pci
    assert nics["lo"].kind == "loopback"
    assert sysfs.default_route_interface(ETH) == "enp65s0f0"


def test_ipoib_interfaces_are_typed_infiniband():
    kinds = {d.name: d.kind for d in sysfs.net_devices(OPA)}
    assert kinds == {"eno1": "ether", "ib0": "infiniband", "lo": "loopback"}


def test_require_hardware_over_recorded_trees():
    ib, opa = load_profile("infiniband"), load_profile("omnipath")
    require_hardware(ib, "native", IB)
    require_hardware(ib, "native", ROCE)
    require_hardware(opa, "native", OPA)
    with pytest.raises(UsageError, match="--wire tcp"):
        require_hardware(ib, "native", ETH)
    with pytest.raises(UsageError, match="OmniPath"):
        require_hardware(opa, "native", IB)
    require_hardware(ib, "tcp", ETH)


def test_a_missing_tree_is_an_empty_host(tmp_path):
    assert sysfs.net_devices(tmp_path) == [] and sysfs.rdma_ports(tmp_path) == []
    assert sysfs.default_route_interface(tmp_path) is None
