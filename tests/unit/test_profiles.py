import pytest

from fabbench.errors import UsageError
from fabbench.fabrics import available_profiles, detect_fabric, load_profile, require_hardware
from fabbench.fabrics.profile import parse_profile

BUILTIN = ("ethernet", "infiniband", "omnipath", "shm")


@pytest.mark.parametrize("name", BUILTIN)
def test_builtin_profiles_load_with_every_primitive(name):
    p = load_profile(name)
    for primitive in ("mpi", "gloo", "nccl"):
        s = p.settings(primitive, "native")
        assert s.transport
        if p.hardware != "none":
            assert p.settings(primitive, "tcp").transport


def test_profiles_set_what_docs_fabrics_md_says():
    """The MCA parameters and environment of docs/fabrics.md's table and --wire tcp section."""
    eth = load_profile("ethernet").settings("mpi").resolve({"iface": "lo"})
    assert dict(eth.mca) == {"pml": "ob1", "btl": "self,tcp", "btl_tcp_if_include": "lo"}
    ib = load_profile("infiniband").settings("mpi", "tcp").resolve({})
    assert ib.mca["pml_ucx_tls"] == "any" and ib.env["UCX_TLS"] == "tcp,self"
    opa = load_profile("omnipath").settings("mpi", "tcp")
    assert opa.mca["mtl_ofi_provider_include"] == "tcp;ofi_rxm"
    assert load_profile("omnipath").settings("mpi").env["FI_PROVIDER"] == "psm2"


def test_missing_placeholder_value_names_the_option():
    with pytest.raises(UsageError, match="--iface"):
        load_profile("ethernet").settings("gloo").resolve({"iface": None})


def test_no_tcp_wire_on_ethernet():
    with pytest.raises(UsageError, match="no --wire tcp"):
        load_profile("ethernet").settings("mpi", "tcp")


def test_site_profile_on_search_path(tmp_path, monkeypatch):
    (tmp_path / "roce.toml").write_text(
        'name = "roce"\nhardware = "infiniband"\n'
        '[primitive.mpi]\nmca = { pml = "ucx" }\nenv = { UCX_NET_DEVICES = "mlx5_1:1" }\n'
        'transport = ["ucx/*rc*"]\n')
    monkeypatch.setenv("FABBENCH_PROFILE_PATH", str(tmp_path))
    assert "roce" in available_profiles()
    assert load_profile("roce").settings("mpi").env["UCX_NET_DEVICES"] == "mlx5_1:1"
    assert load_profile(str(tmp_path / "roce.toml")).name == "roce"


@pytest.mark.parametrize("text,message", [
    ('name = "x"\n[primitive.mpi]\nmca = { pml = "ob1" }\ntransprot = ["ob1/tcp"]\n',
     "unknown key 'transprot'"),
    ('name = "x"\n[primitive.mpii]\ntransport = ["a"]\n', "unknown primitive 'mpii'"),
    ('name = "x"\n[primitive.mpi]\nmca = { pml = "ob1" }\n', "transport"),
    ('name = "x"\nhardware = "token-ring"\n[primitive.mpi]\ntransport = ["a"]\n', "hardware"),
    ('name = "x"\n[primitive.mpi\ntransport = ["a"]\n', "not valid TOML"),
    ('[primitive.mpi]\ntransport = ["a"]\n', "missing key 'name'"),
    ('name = "x"\n[primitive.mpi]\nenv = { "BAD NAME" = "1" }\ntransport = ["a"]\n',
     "bad name"),
])
def test_profile_typos_are_one_clear_error(tmp_path, text, message):
    path = tmp_path / "x.toml"
    path.write_text(text)
    with pytest.raises(UsageError, match=message):
        load_profile(str(path))


def test_parse_profile_name_mismatch(tmp_path, monkeypatch):
    (tmp_path / "mine.toml").write_text('name = "other"\n[primitive.mpi]\ntransport = ["a"]\n')
    monkeypatch.setenv("FABBENCH_PROFILE_PATH", str(tmp_path))
    with pytest.raises(UsageError, match="says name"):
        load_profile("mine")
    assert parse_profile({"name": "ok", "primitive": {"mpi": {"transport": ["x"]}}}, "t").name


def _write(root, rel, text):
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_detection_and_hardware_refusal(tmp_path):
    eth = tmp_path / "eth"
    _write(eth, "sys/class/net/eth0/type", "1\n")
    assert detect_fabric(eth) == "ethernet"
    with pytest.raises(UsageError, match="--wire tcp"):
        require_hardware(load_profile("infiniband"), "native", eth)
    with pytest.raises(UsageError, match="OmniPath"):
        require_hardware(load_profile("omnipath"), "native", eth)
    require_hardware(load_profile("infiniband"), "tcp", eth)  # the software stack over TCP

    ib = tmp_path / "ib"
    _write(ib, "sys/class/infiniband/mlx5_0/ports/1/state", "4: ACTIVE\n")
    _write(ib, "sys/class/infiniband/mlx5_0/ports/1/link_layer", "InfiniBand\n")
    _write(ib, "sys/class/infiniband/mlx5_0/ports/1/rate", "100 Gb/sec (4X EDR)\n")
    assert detect_fabric(ib) == "infiniband"
    require_hardware(load_profile("infiniband"), "native", ib)

    opa = tmp_path / "opa"
    _write(opa, "sys/class/infiniband/hfi1_0/ports/1/state", "4: ACTIVE\n")
    _write(opa, "dev/hfi1_0", "")
    assert detect_fabric(opa) == "omnipath"
    require_hardware(load_profile("omnipath"), "native", opa)

    down = tmp_path / "down"
    _write(down, "sys/class/infiniband/mlx5_0/ports/1/state", "1: DOWN\n")
    assert detect_fabric(down) == "ethernet"


MINIMAL = {"name": "site", "primitive": {"mpi": {"transport": ["ob1/tcp"]}}}


def test_what_code_decides_by_is_profile_data_with_defaults_per_hardware_kind():
    ib, shm = load_profile("infiniband"), load_profile("shm")
    assert ib.devices == ("/dev/infiniband",) and ib.link.speed_from == "rdma"
    assert ib.device_files("native") == ("/dev/infiniband",) and ib.device_files("tcp") == ()
    assert shm.single_host and shm.link.speed_from == "none" and shm.devices == ()
    # a site profile written before these keys existed: its hardware kind's defaults
    old = parse_profile({**MINIMAL, "hardware": "omnipath"}, "old.toml")
    assert old.devices == ("/dev/hfi1_0",) and old.link.speed_from == "rdma"
    assert parse_profile(MINIMAL, "eth.toml").link.speed_from == "nic"
    assert parse_profile({**MINIMAL, "single_host": True}, "one.toml").link.speed_from == "none"


@pytest.mark.parametrize("extra,message", [
    ({"link": {"speed_from": "wifi"}}, "link.speed_from must be one of"),
    ({"link": {"speed_from": "rdma"}}, "needs a hardware kind with RDMA ports"),
    ({"link": {"speed": "nic"}}, "link: unknown key 'speed'"),
    ({"link": {"iface_env": ["BAD NAME"]}}, "link.iface_env: expected a list of names"),
    ({"devices": ["/sys/x"]}, "devices must be paths under /dev/"),
    ({"devices": "/dev/infiniband"}, "devices must be a list"),
])
def test_bad_profile_data_is_refused_naming_the_file(extra, message):
    with pytest.raises(UsageError, match=message) as info:
        parse_profile({**MINIMAL, **extra}, "site.toml")
    assert str(info.value).startswith("site.toml")
