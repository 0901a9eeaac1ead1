"""One set of value rules (fabbench.value_rules) for `fabbench render` and the chart: on generated
values, hostile ones included (control characters, a trailing newline, Unicode, shell
metacharacters, long strings), each rule as Python applies it and the chart's committed
values.schema.json (as the jsonschema package validates it) take exactly the same values; the
rules' own cases; and the profile values that reach mpirun's command line."""

from __future__ import annotations

import json

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import REPO, property_examples
from fabbench import value_rules as rules
from fabbench.errors import UsageError
from fabbench.render import chart

SCHEMA = json.loads((REPO / "charts" / "fabbench" / "values.schema.json").read_text())

# every chart value a rule governs: its place, the rule, whether "" (not set) is taken
CASES = [*((path, rule, optional) for path, (rule, optional) in chart._RULES.items()),
         (("iface",), rules.IFACE, True), (("rdmaDevice",), rules.RDMA_DEVICE, True),
         (("benchmark", "sizes"), rules.SIZES, True)]


def schema_at(path: tuple[str, ...]) -> dict:
    at = SCHEMA
    for key in path:
        at = at["items"] if key == "[]" else at["properties"][key]
    return at


HOSTILE = ["\n", "\r", "\t", "\x00", "\x1b", "\x7f", "\x85", "\u2028", "\u2029", "$(id)", "`id`",
           "\\", '"', "'", ";", "|", "&", " ", "é", "\u212a", "\u0663", "\u200b", "/", "..", "//",
           ":", "@", "*", "?", ",", "-", "."]
PATHS = ["/", "/etc", "/etc/x", "/var", "/var/tmp", "/var/tmp/x", "/var/lib/kubelet", "/tmp",
         "/tmp/x", "/srv/x", "/srv/../etc", "/srv/./x", "/a//b", "/a/", "/home/u", "/usr/local",
         "/data", "/root", "/lib64", "/libfoo", "/srv/kubernetes", "/opt/cni/bin", "/run"]


def values(rule: rules.ValueRule) -> st.SearchStrategy[str]:
    good = st.from_regex(rule.pattern, fullmatch=True)
    return st.one_of(
        good, good.map(lambda v: v + "\n"), st.sampled_from(PATHS),
        st.tuples(good, st.sampled_from(HOSTILE), good).map("".join),
        st.lists(st.one_of(st.characters(), st.sampled_from(HOSTILE)), max_size=30).map("".join),
        st.text(st.sampled_from("ab0-."), min_size=60, max_size=400))


@pytest.mark.parametrize("path,rule,optional", CASES, ids=[".".join(c[0]) for c in CASES])
@settings(max_examples=property_examples(60), deadline=None,
          suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_python_and_the_charts_schema_take_the_same_values(path, rule, optional, data):
    validator = jsonschema.Draft7Validator(schema_at(path))
    value = data.draw(values(rule))
    python = rule.ok(value) or (optional and value == "")
    assert validator.is_valid(value) == python, (path, value)


@settings(max_examples=property_examples(60), deadline=None,
          suppress_health_check=list(HealthCheck))
@given(key=values(rules.QUALIFIED_NAME), value=values(rules.LABEL_VALUE))
def test_node_selectors_are_label_keys_and_values_in_both(key, value):
    for path in chart._SELECTORS:
        validator = jsonschema.Draft7Validator(schema_at(path))
        python = rules.QUALIFIED_NAME.ok(key) and rules.LABEL_VALUE.ok(value)
        assert validator.is_valid({key: value}) == python, (path, key, value)


@pytest.mark.parametrize("rule,good", [
    (rules.NAME, "fb-1"), (rules.SUBDOMAIN, "a.b-c"), (rules.QUALIFIED_NAME, "nvidia.com/gpu"),
    (rules.LABEL_VALUE, "A_b.c-1"), (rules.IMAGE_REFERENCE, "ghcr.io/a/fabbench:0.1.0-cpu"),
    (rules.IFACE, "eth0"), (rules.RDMA_DEVICE, "mlx5_0"), (rules.MCA_VALUE, "^uct,openib"),
    (rules.QUANTITY, "1Gi"), (rules.CRON, "0 * * * *"), (rules.HOST_PATH, "/srv/fabbench"),
    (rules.CONTAINER_PATH, "/results"), (rules.SLURM_TOKEN, "gpu"), (rules.SLURM_TIME, "10"),
    (rules.SIZES, "8:64M"), (rules.TEXT, "fabbench")])
def test_a_trailing_newline_or_a_control_character_is_refused_by_every_rule(rule, good):
    assert rule.ok(good)
    for bad in (good + "\n", good + "\r", "\n" + good, good + "\x00", good + "\u2028",
                good + "\x85"):
        assert not rule.ok(bad), repr(bad)


@pytest.mark.parametrize("path,ok", [
    ("/srv/fabbench", True), ("/var/tmp/fabbench", True), ("/data/fb", True), ("/tmp/fb", True),
    ("/mnt/results", True), ("/libfoo", True), ("/", False), ("/etc", False), ("/etc/fb", False),
    ("/var", False), ("/var/tmp", False), ("/var/lib/kubelet", False), ("/var/run", False),
    ("/var/log/fb", False), ("/usr/local/fb", False), ("/root", False), ("/home/alice", False),
    ("/proc/1", False), ("/sys", False), ("/dev/shm", False), ("/boot", False), ("/run/fb", False),
    ("/lib64", False), ("/opt/cni/bin", False), ("/srv/kubernetes/pki", False), ("/tmp", False),
    ("/srv/../etc", False), ("/srv/./x", False), ("/srv//x", False), ("/srv/x/", False),
    ("srv/x", False), ("/srv/a b", False), ("/srv/$(id)", False), ("", False)])
def test_host_paths_outside_the_systems_directories_only(path, ok):
    assert rules.HOST_PATH.ok(path) is ok


@pytest.mark.parametrize("value,ok", [
    ("1Gi", True), ("512Mi", True), ("2G", True), ("1.5Gi", True), (".5Gi", True), ("1e9", True),
    ("100m", True), ("0", False), ("0Gi", False), ("-1Gi", False), ("1GB", False), ("1 Gi", False),
    ("Gi", False), ("1Gi\n", False), ("1gi", False)])
def test_shm_size_is_a_kubernetes_quantity_above_zero(value, ok):
    assert rules.QUANTITY.ok(value) is ok


@pytest.mark.parametrize("value,ok", [
    ("0 * * * *", True), ("*/15 0-6 1,15 jan-jun MON-FRI", True), ("@hourly", True),
    ("5 4 * * 0", True), ("* * * * * *", False), ("60 * * * *", False), ("* 24 * * *", False),
    ("* * * * 7", False), ("hourly", False), ("@every 1h", False), ("0  * * * *", False),
    ("0 * * * *\n", False), ("0 * * * $(id)", False), ("TZ=UTC 0 * * * *", False)])
def test_cron_schedules_as_kubernetes_reads_them(value, ok):
    assert rules.CRON.ok(value) is ok


@pytest.mark.parametrize("key,value,ok", [
    ("kubernetes.io/hostname", "node-1", True), ("gpu", "", True), ("a.b/c_d", "X.y-z", True),
    ("gpu", "a/b", False), ("gpu", "x" * 64, False), ("gpu", "-x", False), ("a b", "x", False),
    ("A.b/c", "x", False), ("a/" + "x" * 64, "x", False), ("/x", "x", False)])
def test_node_selector_keys_and_values_are_kubernetes_labels(key, value, ok):
    assert (rules.QUALIFIED_NAME.ok(key) and rules.LABEL_VALUE.ok(value)) is ok


def test_a_rule_says_what_it_takes_and_names_the_option():
    with pytest.raises(UsageError, match=r"^--iface must be a network interface name .*, not "
                                         r"'\$\(touch /tmp/x\)'$"):
        rules.IFACE.check("$(touch /tmp/x)", "--iface")


PROFILE = """name = "site"
hardware = "none"
[primitive.mpi]
mca = {{ pml = "ob1", btl = "tcp,self", btl_tcp_if_include = {mca} }}
env = {{ {env} }}
transport = ["tcp"]
"""


@pytest.mark.parametrize("mca,env,message", [
    ('"$(touch /tmp/x)"', "", "primitive.mpi.mca.btl_tcp_if_include must be an MCA value"),
    ('"eth0`id`"', "", "must be an MCA value"), ('"a b"', "", "must be an MCA value"),
    ('"eth0\\"; id; \\""', "", "must be an MCA value"),
    ('"{iface}"', 'OMPI_MCA_btl = "$(id)"', "env.OMPI_MCA_btl must be an MCA value"),
    ('"{iface}"', 'X = "a\\nb"', "env.X must be text without control characters"),
    ('"{iface}"', '"X\\n" = "a"', "bad name 'X\\\\n'"),
])
def test_a_profiles_values_that_reach_mpirun_or_a_script_are_checked(tmp_path, mca, env,
                                                                     message):
    from fabbench.fabrics.profile import load_profile

    path = tmp_path / "site.toml"
    path.write_text(PROFILE.format(mca=mca, env=env))
    with pytest.raises(UsageError, match=message):
        load_profile(str(path))


def test_a_profiles_shipped_settings_meet_the_rules(tmp_path):
    from fabbench.fabrics.profile import load_profile

    path = tmp_path / "site.toml"
    path.write_text(PROFILE.format(mca='"{iface}"', env='UCX_TLS = "rc,sm self"'))
    assert load_profile(str(path)).primitives["mpi"].env["UCX_TLS"] == "rc,sm self"


@pytest.mark.parametrize("check,value", [
    ("dns1123", "fb\n"), ("slurm_token", "gpu\n"), ("slurm_time", "10\n"),
    ("image_reference", "fabbench\n"), ("resource_name", "nvidia.com/gpu\n")])
def test_the_render_checks_refuse_a_trailing_newline(check, value):
    from fabbench.render import names

    with pytest.raises(UsageError):
        getattr(names, check)(value, "--x")


def test_other_names_refuse_a_trailing_newline(tmp_path):
    from fabbench.k8s_api import node_labels
    from fabbench.study.spec import load_study

    for check, value in ((node_labels.check_prefix, "fabbench.dev\n"),
                         (node_labels.check_condition_type, "FabricHealthy\n")):
        with pytest.raises(UsageError):
            check(value)
    study = tmp_path / "s.toml"
    study.write_text('name = "s\\n"\n')
    with pytest.raises(UsageError, match="name must be lower-case"):
        load_study(str(study))
