"""fabbench tune without launches: search spaces as profile data and as the library would take
them, the verdict of a stage from launches' figures, and the files it writes in the formats
Open MPI and NCCL read (the launches themselves: tests/integration/test_tune.py)."""

from __future__ import annotations

import dataclasses
import random

import pytest
import tomllib

from fabbench.errors import UsageError
from fabbench.fabrics.profile import Axis, load_profile, parse_profile, profile_toml
from fabbench.tune.library import Param, check_space, parse_ompi_info
from fabbench.tune.outputs import bands, nccl_csv, read_rules, rules_file
from fabbench.tune.search import Candidate, Choice, Loaded, Stage, _points, judge, narrowed

BASE = {"name": "t", "primitive": {"mpi": {"mca": {"btl": "self,tcp"},
                                           "transport": ["ob1/tcp"]}}}


def profile_with(*axes: dict):
    data = {**BASE, "primitive": {"mpi": {**BASE["primitive"]["mpi"], "tune": list(axes)}}}
    return parse_profile(data, "t.toml")


def test_a_profile_declares_what_may_be_tuned():
    p = profile_with({"mca": "btl_tcp_links", "values": [2, 4]},
                     {"mca": "coll_tuned_allreduce_algorithm", "values": [4, 6],
                      "ops": ["allreduce"], "per_size": True,
                      "needs": {"mca": {"coll_tuned_use_dynamic_rules": "1"}}})
    links, alg = p.primitives["mpi"].tune
    assert (links.name, links.values, links.per_size) == ("mca:btl_tcp_links", ("2", "4"), False)
    assert alg.per_size and dict(alg.needs_mca) == {"coll_tuned_use_dynamic_rules": "1"}


SEGMENT = {"mca": "coll_tuned_allreduce_algorithm_segmentsize", "algorithms": [5],
           "values": [262144, 1048576]}


def test_a_segmented_algorithm_pairs_with_segment_sizes():
    (alg,) = profile_with({"mca": "coll_tuned_allreduce_algorithm", "values": [4, 6],
                           "ops": ["allreduce"], "per_size": True,
                           "segment": SEGMENT}).primitives["mpi"].tune
    assert alg.values == ("4", "6", "5:262144", "5:1048576")
    assert alg.segment_key == "coll_tuned_allreduce_algorithm_segmentsize"
    assert alg.settings_of("4") == {"coll_tuned_allreduce_algorithm": "4"}
    assert alg.settings_of("5:1048576") == {"coll_tuned_allreduce_algorithm": "5",
                                            "coll_tuned_allreduce_algorithm_segmentsize":
                                            "1048576"}
    # a trial of the pair forces both; the next trial of the stage starts from the base again
    trial = Choice().with_value(alg, "5:262144")
    assert trial.mca["coll_tuned_allreduce_algorithm_segmentsize"] == "262144"
    assert "coll_tuned_allreduce_algorithm_segmentsize" not in Choice().with_value(alg, "4").mca


@pytest.mark.parametrize("axis,message", [
    ({"mca": "btl_tcp_links", "values": []}, "values must be a non-empty list"),
    ({"mca": "x", "values": [5], "segment": SEGMENT}, "segment sizes pair with a per_size"),
    ({"mca": "x", "values": [4], "ops": ["allreduce"], "per_size": True,
      "segment": {**SEGMENT, "algorithms": []}}, "a non-empty list of the segmented algorithms"),
    ({"mca": "x", "values": [4, "5:1"], "ops": ["allreduce"], "per_size": True,
      "segment": {**SEGMENT, "values": [1]}}, "a value is listed twice"),
    ({"mca": "x", "values": [5], "ops": ["allreduce"], "per_size": True,
      "segment": {**SEGMENT, "values": []}}, "a non-empty list of sizes in bytes"),
    ({"mca": "x", "values": [5], "ops": ["allreduce"], "per_size": True,
      "segment": {**SEGMENT, "values": [0]}}, "a non-empty list of sizes in bytes"),
    ({"mca": "x", "values": [5], "ops": ["allreduce"], "per_size": True,
      "segment": {**SEGMENT, "values": [1, 1]}}, "a size is listed twice"),
    ({"mca": "x", "values": [5], "ops": ["allreduce"], "per_size": True,
      "segment": {"algorithms": [5], "values": [1]}}, "name the segment size's MCA parameter"),
    ({"mca": "x", "values": [5], "ops": ["allreduce"], "per_size": True,
      "segment": {**SEGMENT, "size": 1}}, "unknown key 'size'"),
    ({"mca": "btl_tcp_links"}, "values must be a non-empty list"),
    ({"values": [1]}, 'name one setting, as mca = "NAME" or env = "NAME"'),
    ({"mca": "a", "env": "B", "values": [1]}, "name one setting"),
    ({"mca": "Bad-Name", "values": [1]}, "bad name 'Bad-Name'"),
    ({"mca": "x", "values": [1, "1"]}, "a value is listed twice"),
    ({"mca": "x", "values": [1.5]}, "values must be strings or integers"),
    ({"mca": "x", "values": [1], "per_size": True}, "per_size is for one op's"),
    ({"mca": "x", "values": [1], "colour": "red"}, "unknown key 'colour'"),
])
def test_a_bad_axis_is_one_line(axis, message):
    with pytest.raises(UsageError, match=message.replace("(", r"\(").replace(")", r"\)")):
        profile_with(axis)


OMPI_INFO = """\
mca:btl:tcp:param:btl_tcp_links:value:1
mca:btl:tcp:param:btl_tcp_links:type:unsigned_int
mca:coll:tuned:param:coll_tuned_use_dynamic_rules:value:false
mca:coll:tuned:param:coll_tuned_use_dynamic_rules:enumerator:value:0:false
mca:coll:tuned:param:coll_tuned_use_dynamic_rules:enumerator:value:1:true
mca:coll:tuned:param:coll_tuned_use_dynamic_rules:type:bool
mca:coll:tuned:param:coll_tuned_allreduce_algorithm:value:ignore
mca:coll:tuned:param:coll_tuned_allreduce_algorithm:enumerator:value:0:ignore
mca:coll:tuned:param:coll_tuned_allreduce_algorithm:enumerator:value:4:ring
mca:coll:tuned:param:coll_tuned_allreduce_algorithm:type:int
mca:coll:tuned:param:coll_tuned_allreduce_algorithm_segmentsize:value:0
mca:coll:tuned:param:coll_tuned_allreduce_algorithm_segmentsize:type:int
mca:btl:tcp:param:btl_tcp_if_include:value:
mca:btl:tcp:param:btl_tcp_if_include:type:string
"""


def test_ompi_info_is_read_with_types_defaults_and_enumerators():
    params = parse_ompi_info(OMPI_INFO)
    assert params["btl_tcp_links"] == Param("btl_tcp_links", "unsigned_int", "1", {})
    assert params["coll_tuned_allreduce_algorithm"].values == {"0": "ignore", "4": "ring"}
    assert params["btl_tcp_if_include"].default == ""


@pytest.mark.parametrize("axis,message", [
    (Axis(kind="mca", key="btl_tcp_linkz", values=("2",)),
     "Open MPI has no MCA parameter 'btl_tcp_linkz'"),
    (Axis(kind="mca", key="btl_tcp_links", values=("two",)),
     "Open MPI refuses 'two': not an integer (unsigned_int)"),
    (Axis(kind="mca", key="btl_tcp_links", values=("-1",)), "negative"),
    (Axis(kind="mca", key="coll_tuned_allreduce_algorithm", values=("4", "9")),
     "Open MPI refuses '9': not one of its values: 0 (ignore), 4 (ring)"),
    (Axis(kind="mca", key="coll_tuned_allreduce_algorithm", values=("4",),
          needs_mca={"coll_tuned_use_dynamic_rulez": "1"}), "no MCA parameter"),
    (Axis(kind="env", key="NCCL_ALGO", values=("Ring",)), "NCCL_ALGO is not a setting of mpi"),
    (Axis(kind="mca", key="coll_tuned_allreduce_algorithm", values=("4", "4:big"),
          segment_key="coll_tuned_allreduce_algorithm_segmentsize"),
     "Open MPI refuses 'big for coll_tuned_allreduce_algorithm_segmentsize': not an integer"),
    (Axis(kind="mca", key="coll_tuned_allreduce_algorithm", values=("4:1024",),
          segment_key="coll_tuned_allreduce_algorithm_segsize"),
     "Open MPI has no MCA parameter 'coll_tuned_allreduce_algorithm_segsize'"),
])
def test_what_the_library_would_refuse_is_one_line(axis, message):
    with pytest.raises(UsageError) as info:
        check_space([axis], "mpi", "p.toml", parse_ompi_info(OMPI_INFO))
    assert str(info.value).startswith(f"p.toml: tune {axis.name}: ")
    assert message in str(info.value) and "\n" not in str(info.value)


def test_what_the_library_takes_passes():
    check_space([Axis(kind="mca", key="coll_tuned_allreduce_algorithm", values=("ring", "0"))],
                "mpi", "p", parse_ompi_info(OMPI_INFO))
    check_space([Axis(kind="mca", key="coll_tuned_allreduce_algorithm", values=("4:65536",),
                      segment_key="coll_tuned_allreduce_algorithm_segmentsize")],
                "mpi", "p", parse_ompi_info(OMPI_INFO))
    check_space([Axis(kind="env", key="NCCL_PROTO", values=("LL",))], "nccl", "p", None)
    with pytest.raises(UsageError, match="an MCA parameter tunes Open MPI, not nccl"):
        check_space([Axis(kind="mca", key="btl_tcp_links", values=("2",))], "nccl", "p", {})


@pytest.mark.parametrize("name", ["ethernet", "infiniband", "omnipath", "shm"])
def test_a_written_profile_reads_back_as_the_same_profile_less_its_axes(name):
    p = load_profile(name)
    back = parse_profile(tomllib.loads(profile_toml(p, ["a comment"])), p.source)
    bare = dataclasses.replace(p, primitives={k: dataclasses.replace(v, tune=())
                                              for k, v in p.primitives.items()})
    assert back == bare


def test_the_shipped_ethernet_space_is_what_open_mpi_takes():
    axes = load_profile("ethernet").primitives["mpi"].tune
    assert [a.key for a in axes][:2] == ["btl_tcp_links", "coll_tuned_allreduce_algorithm"]
    assert {a.key for a in load_profile("ethernet").primitives["nccl"].tune} >= {
        "NCCL_ALGO", "NCCL_PROTO", "NCCL_MIN_NCHANNELS", "NCCL_SOCKET_NTHREADS",
        "NCCL_NSOCKS_PERTHREAD", "NCCL_BUFFSIZE"}


# ---- a stage's verdict ----

def loaded(medians: dict[int, float], transport="ob1/tcp", rounds=3, seed=0,
           error=None) -> Loaded:
    """Launches of one setting: per size, ``rounds`` launches of 20 samples around a median."""
    rng = random.Random(seed)
    out = Loaded(transport=transport, error=error)
    for size, med in medians.items():
        key = ("allreduce", size)
        for _ in range(rounds):
            xs = [med * (1 + rng.uniform(-0.02, 0.02)) for _ in range(20)]
            out.samples.setdefault(key, []).extend(xs)
            out.medians.setdefault(key, []).append(sorted(xs)[10])
    return out


LINKS = Axis(kind="mca", key="btl_tcp_links", values=("2", "4"))
ALG = Axis(kind="mca", key="coll_tuned_allreduce_algorithm", values=("4", "6"),
           ops=("allreduce",), per_size=True, needs_mca={"coll_tuned_use_dynamic_rules": "1"})


def test_the_fastest_value_that_is_slower_nowhere_is_chosen():
    base = loaded({1 << 20: 100.0, 16 << 20: 1000.0})
    stage = judge(LINKS, Choice(), base, {
        "2": loaded({1 << 20: 80.0, 16 << 20: 900.0}, seed=1),
        "4": loaded({1 << 20: 50.0, 16 << 20: 1100.0}, seed=2)})  # faster at 1M, slower at 16M
    assert stage.chosen == "2"
    four = next(c for c in stage.candidates if c.value == "4")
    assert [p.slower for p in four.points] == [False, True]


def test_nothing_faster_keeps_the_base():
    base = loaded({1 << 20: 100.0})
    stage = judge(LINKS, Choice(), base, {"2": loaded({1 << 20: 100.5}, seed=3)})
    assert stage.chosen is None


def test_a_faster_value_that_changed_the_transport_is_refused_and_named():
    base = loaded({1 << 20: 100.0})
    stage = judge(LINKS, Choice(), base, {"2": loaded({1 << 20: 10.0}, transport="ob1/vader"),
                                          "4": loaded({1 << 20: 90.0}, seed=4)})
    assert stage.chosen == "4"
    two = stage.candidates[0]
    assert two.refused == "the transport changed from ob1/tcp to ob1/vader"


def test_a_failed_launch_is_refused_with_its_error():
    stage = judge(LINKS, Choice(), loaded({1 << 20: 100.0}),
                  {"2": Loaded(error="x.jsonl: rank 0: timed out")})
    assert stage.chosen is None and stage.candidates[0].refused == \
        "its launch failed: x.jsonl: rank 0: timed out"


def test_faster_in_the_pool_but_not_in_every_round_is_not_faster():
    base = loaded({1 << 20: 100.0})
    mixed = loaded({1 << 20: 70.0}, seed=5)
    mixed.medians[("allreduce", 1 << 20)][1] = 120.0  # one launch slower than the base's
    stage = judge(LINKS, Choice(), base, {"2": mixed})
    (point,) = stage.candidates[0].points
    assert point.verdict.verdict == "faster" and not point.every_round and not point.faster
    assert stage.chosen is None


def test_a_per_size_axis_chooses_per_size():
    base = loaded({1 << 20: 100.0, 16 << 20: 1000.0})
    stage = judge(ALG, Choice(), base, {
        "4": loaded({1 << 20: 120.0, 16 << 20: 700.0}, seed=6),
        "6": loaded({1 << 20: 60.0, 16 << 20: 800.0}, seed=7)})
    assert stage.chosen is None
    assert stage.chosen_per_size == {("allreduce", 1 << 20): "6", ("allreduce", 16 << 20): "4"}


# ---- the final stage, narrowed ----

M, S = 1 << 20, 16 << 20
TUNED = Choice({"btl_tcp_links": "2", "coll_tuned_use_dynamic_rules": "1"}, {},
               {("allreduce", M): "4", ("allreduce", S): "5:1048576"})
STAGES = [Stage(LINKS.name, Choice(), chosen="2"),
          Stage(ALG.name, Choice(), chosen_per_size={("allreduce", M): "4",
                                                     ("allreduce", S): "5:1048576"})]


def final(default: dict[int, float], tuned: dict[int, float], transport="ob1/tcp") -> Stage:
    got = loaded(tuned, transport=transport, seed=9)
    cand = Candidate("tuned", points=_points(loaded(default, seed=8), got))
    if transport != "ob1/tcp":
        cand.refused = "the transport changed"
    return Stage("final", Choice(), candidates=[cand])


def test_the_per_size_choice_at_a_size_found_slower_goes_back_to_the_fixed_rules():
    step = narrowed(TUNED, final({M: 100.0, S: 1000.0}, {M: 120.0, S: 700.0}), STAGES,
                    [LINKS, ALG])
    assert step is not None
    choice, what = step
    assert choice.per_size == {("allreduce", M): "0", ("allreduce", S): "5:1048576"}
    assert choice.mca == TUNED.mca and what == "the per-size choices at allreduce 1M"


def test_slower_where_no_per_size_choice_was_made_drops_the_other_axes_settings():
    tuned = dataclasses.replace(TUNED, per_size={("allreduce", S): "5:1048576",
                                                 ("allreduce", M): "0"})
    step = narrowed(tuned, final({M: 100.0, S: 1000.0}, {M: 120.0, S: 700.0}), STAGES,
                    [LINKS, ALG])
    assert step is not None
    choice, what = step
    assert choice.mca == {"coll_tuned_use_dynamic_rules": "1"}  # what the per-size axis needs
    assert choice.per_size == tuned.per_size and what == "mca:btl_tcp_links = 2"


@pytest.mark.parametrize("default, tuned, transport", [
    ({M: 100.0, S: 1000.0}, {M: 80.0, S: 700.0}, "ob1/tcp"),    # holds
    ({M: 100.0, S: 1000.0}, {M: 100.3, S: 1001.0}, "ob1/tcp"),  # faster nowhere, slower nowhere
    ({M: 100.0, S: 1000.0}, {M: 120.0, S: 700.0}, "ob1/vader")])  # refused
def test_nothing_is_narrowed_where_nothing_was_slower_or_the_settings_were_refused(
        default, tuned, transport):
    assert narrowed(TUNED, final(default, tuned, transport), STAGES, [LINKS, ALG]) is None


def test_nothing_left_to_drop_ends_the_narrowing():
    only_rules = Choice({"coll_tuned_use_dynamic_rules": "1"}, {},
                        {("allreduce", M): "0", ("allreduce", S): "5:1048576"})
    slower_at_1m = final({M: 100.0, S: 1000.0}, {M: 120.0, S: 700.0})
    assert narrowed(only_rules, slower_at_1m, [Stage(LINKS.name, Choice()), STAGES[1]],
                    [LINKS, ALG]) is None


# ---- the files ----

def test_bands_start_halfway_between_sizes_and_merge_equal_neighbours():
    m = 1 << 20
    assert bands({m: "6", 4 * m: "6", 16 * m: "4"}) == [(0, 8 * m, "6"), (8 * m + 1, 2**63 - 1,
                                                                          "4")]
    assert bands({m: "0"}) == [(0, 2**63 - 1, "0")]


def test_the_rules_file_is_coll_tuneds_classic_format():
    m = 1 << 20
    text = rules_file({("allreduce", m): "6", ("allreduce", 16 * m): "0",
                       ("broadcast", m): "3"}, ranks=4)
    # collectives; allreduce (2): 1 comm size, 4 ranks, 2 message sizes; bcast (7): ...
    assert read_rules(text) == [2, 2, 1, 4, 2, 0, 6, 0, 0, 4 * m + 1, 0, 0, 0,
                                7, 1, 4, 1, 0, 3, 0, 0]
    assert text.startswith("# Open MPI coll_tuned dynamic rules")
    # a segmented choice fills the segment size column
    assert read_rules(rules_file({("allreduce", m): "5:262144"}, 2)) == [
        1, 2, 1, 2, 1, 0, 5, 0, 262144]
    with pytest.raises(ValueError, match="not reduce_scatter"):
        rules_file({("reduce_scatter", m): "1"}, 2)


def test_the_nccl_tuner_csv_has_the_example_plugins_columns():
    assert nccl_csv(["allreduce"], {"NCCL_ALGO": "Ring"}, 2, 16) is None  # no protocol chosen
    text = nccl_csv(["allreduce", "broadcast", "alltoall"],
                    {"NCCL_ALGO": "Tree", "NCCL_PROTO": "LL128"}, 2, 16)
    header, *rows = text.splitlines()
    assert header == ("# collective_type,min_bytes,max_bytes,algorithm,protocol,channels,"
                      "nNodes,nRanks,numPipeOps,regBuff")
    assert rows == ["allreduce,0,4294967295,tree,ll128,-1,2,16,-1,-1",
                    "broadcast,0,4294967295,tree,ll128,-1,2,16,-1,-1"]
    assert all(len(r.split(",")) == 10 for r in rows)


class _Stop(Exception):
    pass


@pytest.mark.parametrize("given,sizes,budget,repeats", [
    ((), "4M,64M", 0.3, 2),
    (("--sizes", "1M,64M"), "1M,64M", 0.3, 2),
    (("--budget", "2", "--repeats", "4"), "4M,64M", 2.0, 4),
    # given, though equal to tune's defaults: still the user's
    (("--sizes", "1M,4M,16M,64M", "--budget", "1", "--repeats", "3"), "1M,4M,16M,64M", 1.0, 3),
])
def test_quick_sets_what_was_not_given(monkeypatch, capsys, given, sizes, budget, repeats):
    from conftest import cli
    from fabbench.tune import search

    seen = {}

    def tuner(config, directory, *, repeats, **_):
        seen.update(sizes=config.collectives.sizes, budget=config.collectives.budget_s,
                    repeats=repeats)
        raise _Stop

    monkeypatch.setattr(search, "Tuner", tuner)
    with pytest.raises(_Stop):
        cli(capsys, "tune", "d", "--fabric", "ethernet", "--primitive", "mpi", "--quick", *given)
    assert seen == {"sizes": sizes, "budget": budget, "repeats": repeats}
