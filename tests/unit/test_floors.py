"""fabbench.floors: the floors file format (every bad file one line, exit code 2), the verdict
(figures, floors, margins, repeats, transport classes, per-node suspects confirmed against nodes
that passed, "not judged" never a pass) and baselines made from runs."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import jsonschema
import pytest
import tomllib

from conftest import REPO, cli
from fabbench.errors import UsageError
from fabbench.floors import rules
from fabbench.floors.judge import FAIL, NOT_JUDGED, PASS, exit_code, judge
from fabbench.floors.points import Point, transport_class

HEAD = 'format = "fabbench-floors/1"\nname = "t"\n'
ALLREDUCE = '''
[[rule]]
id = "ar"
source = "test"
workload = "collectives"
op = "allreduce"
size = "64M"
metric = "busbw"
at_least = 0.1
unit = "GB/s"
'''


def floors(tmp_path: Path, text: str) -> rules.Floors:
    path = tmp_path / "f.toml"
    path.write_text(HEAD + text)
    return rules.load(path)


def point(**kw: object) -> Point:
    base = dict(source="fabbench", file="r.jsonl", run="r1", workload="collectives",
                op="allreduce", bytes=64 << 20, dtype="float32", primitive="mpi",
                fabric="ethernet", transport="ob1/tcp", ranks=4, nodes=4,
                metrics={"busbw": 0.11, "algbw": 0.07, "time": 900.0})
    base.update(kw)
    return Point(**base)  # type: ignore[arg-type]


@pytest.mark.parametrize(("text", "message"), [
    (ALLREDUCE.replace('op = "allreduce"', 'op = "allreduse"'),
     "rule ar: unknown op 'allreduse' for a collectives rule"),
    (ALLREDUCE.replace("at_least = 0.1", "at_least = -1"), "at_least = -1 must be above 0"),
    (ALLREDUCE.replace('unit = "GB/s"', 'unit = "furlongs/s"'), "unknown unit 'furlongs/s'"),
    (ALLREDUCE.replace('unit = "GB/s"', 'unit = "ms"'),
     "busbw is measured in GB/s: unit 'ms' is not one of GB/s, MB/s, Gbit/s"),
    (ALLREDUCE.replace('size = "64M"', 'sizes = "64M:1M"'),
     "sizes '64M:1M' is empty (its MIN is above its MAX): the rule matches nothing"),
    (ALLREDUCE.replace('workload = "collectives"', 'workload = "pairs"'),
     "unknown op 'allreduce' for a pairs rule"),
    (ALLREDUCE.replace('metric = "busbw"', 'metric = "step_time"'),
     "unknown metric 'step_time' for a collectives rule"),
    (ALLREDUCE.replace('metric = "busbw"', 'metric = "time"'),
     "time is lower is better: use at_most, not at_least"),
    (ALLREDUCE.replace('source = "test"\n', ''), "rule ar: source is required"),
    (ALLREDUCE + ALLREDUCE, "rule id 'ar' is used twice"),
    (ALLREDUCE.replace("at_least = 0.1\n", ""), "no floor"),
    (ALLREDUCE.replace("at_least = 0.1", "at_least = 0.1\nceiling_fraction = 0.5"),
     "one floor per rule"),
    (ALLREDUCE + 'require_transport = "tcp"\nforbid_transport = "tcp"\n',
     "both required and forbidden matches nothing"),
    (ALLREDUCE + 'transport = "infiniband"\n', "unknown transport class 'infiniband'"),
    (ALLREDUCE + "repeats = 0\n", "repeats must be a whole number of at least 1"),
    (ALLREDUCE + "colour = 1\n", "unknown key 'colour'"),
    (ALLREDUCE.replace("at_least = 0.1", "nominal_fraction = 1.5"),
     "nominal_fraction = 1.5 must be above 0 and at most 1"),
])
def test_a_bad_floors_file_is_one_line_and_exit_2(tmp_path, capsys, text, message):
    path = tmp_path / "f.toml"
    path.write_text(HEAD + text)
    with pytest.raises(UsageError, match=message.replace("(", r"\(").replace(")", r"\)")):
        rules.load(path)
    (tmp_path / "r.jsonl").write_text("")
    code, out, err = cli(capsys, "verify", "--floors", str(path), str(tmp_path / "r.jsonl"))
    assert code == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err


def test_not_toml_and_wrong_format_are_refused(tmp_path):
    path = tmp_path / "f.toml"
    path.write_text("format = ")
    with pytest.raises(UsageError, match="not a TOML file"):
        rules.load(path)
    path.write_text('format = "fabbench-floors/9"\n' + ALLREDUCE)
    with pytest.raises(UsageError, match="not one this fabbench reads"):
        rules.load(path)


def test_units_are_converted_to_the_metrics_units(tmp_path):
    f = floors(tmp_path, ALLREDUCE.replace("at_least = 0.1", "at_least = 800").replace(
        'unit = "GB/s"', 'unit = "Mbit/s"'))
    assert f.rules[0].value == pytest.approx(0.1)
    (v,) = judge(f, [point()])
    assert v.status == PASS and v.floor == pytest.approx(0.1)
    assert v.margin == pytest.approx(0.1)


def test_a_floor_fails_with_its_margin_and_a_missing_measurement_is_not_judged(tmp_path):
    f = floors(tmp_path, ALLREDUCE)
    (v,) = judge(f, [point(metrics={"busbw": 0.075})])
    assert v.status == FAIL and v.margin == pytest.approx(-0.25)
    assert "busbw 0.075 GB/s, floor 0.1 GB/s (at least 0.1 GB/s), margin -25.0%" in v.line()
    assert exit_code([v]) == 1
    (v,) = judge(f, [point(bytes=1 << 20)])
    assert v.status == NOT_JUDGED and "no measurement matches" in v.why
    assert exit_code([v]) == 1  # nothing judged is not a pass
    (v,) = judge(f, [point(metrics={"time": 5.0})])
    assert v.status == NOT_JUDGED and "recorded no busbw" in v.why


def test_tolerance_and_lower_is_better(tmp_path):
    f = floors(tmp_path, ALLREDUCE + "tolerance = 0.1\n")
    (v,) = judge(f, [point(metrics={"busbw": 0.095})])
    assert v.status == PASS and v.floor == pytest.approx(0.09)
    f = floors(tmp_path, ALLREDUCE.replace('metric = "busbw"', 'metric = "time"').replace(
        "at_least = 0.1", "at_most = 1").replace('unit = "GB/s"', 'unit = "ms"'))
    (v,) = judge(f, [point()])
    assert v.status == PASS and v.floor == pytest.approx(1000.0)
    (v,) = judge(f, [point(metrics={"time": 1250.0})])
    assert v.status == FAIL and v.margin == pytest.approx(-0.2)


def test_repeats_pass_on_the_first_try_that_holds_and_say_so(tmp_path):
    f = floors(tmp_path, ALLREDUCE + "repeats = 3\n")
    tries = [point(run=f"r{i}", metrics={"busbw": bw}) for i, bw in
             enumerate((0.05, 0.12, 0.02), 1)]
    (v,) = judge(f, tries)
    assert v.status == PASS and v.passed_on == 2 and v.tries == 3
    assert "passed on try 2 of 3" in v.line()
    (v,) = judge(f, [replace(t, metrics={"busbw": 0.05}) for t in tries])
    assert v.status == FAIL and "none of 3 tries held" in v.line()
    assert [x.status for x in judge(floors(tmp_path, ALLREDUCE), tries)] == [FAIL, PASS, FAIL]


def test_fractions_of_the_ceiling_line_rate_and_baseline(tmp_path):
    f = floors(tmp_path, ALLREDUCE.replace("at_least = 0.1", "ceiling_fraction = 0.8").replace(
        'unit = "GB/s"\n', ""))
    (v,) = judge(f, [point(ceiling_gbit_s=0.94)])
    assert v.status == PASS and v.floor == pytest.approx(0.8 * 0.94 / 8)
    (v,) = judge(f, [point()])
    assert v.status == NOT_JUDGED and "no measured ceiling" in v.why
    f = floors(tmp_path, ALLREDUCE.replace("at_least = 0.1", "baseline_fraction = 0.9\n"
                                           "baseline = 0.125"))
    (v,) = judge(f, [point()])
    assert v.status == FAIL and v.floor == pytest.approx(0.1125)
    assert "90% of the baseline 0.125 GB/s" in v.how


def test_a_transport_rule_names_both_classes(tmp_path):
    f = floors(tmp_path, '[[rule]]\nid = "ib"\nsource = "t"\nworkload = "collectives"\n'
                         'require_transport = "ib"\n')
    (v,) = judge(f, [point(), point(op="allgather")])
    assert v.status == FAIL
    assert "transport ob1/tcp (class tcp); required: ib" in v.line()
    (v,) = judge(f, [point(transport="ucx/rc_mlx5")])
    assert v.status == PASS
    (v,) = judge(f, [point(source="nccl-tests", transport=None)])
    assert v.status == NOT_JUDGED and "nccl-tests claims no transport" in v.why


@pytest.mark.parametrize(("transport", "gdr", "cls"), [
    ("ob1/tcp", None, "tcp"), ("gloo/tcp", None, "tcp"), ("nccl/Socket", None, "tcp"),
    ("ucx/rc_mlx5", None, "ib"), ("nccl/IB", False, "ib"), ("nccl/IB", True, "ib-gdr"),
    ("cm/ofi/psm2", None, "opa"), ("ob1/vader", None, "shm"), ("ob1/tcp, ob1/vader", None, "tcp"),
    ("mystery", None, None), (None, None, None),
])
def test_transport_classes(transport, gdr, cls):
    assert point(transport=transport, gpudirect=gdr).transport_class == cls
    if not gdr:
        assert transport_class(transport) == cls


PAIRS = '''
[[rule]]
id = "pairs-bw"
source = "test"
workload = "pairs"
per_node = true
metric = "bw"
at_least = 0.1
unit = "GB/s"
'''


def pairs(bw: dict[str, dict[str, float]], run: str = "r1") -> list[Point]:
    """Per-node points of a run whose pair bandwidths are ``bw[a][b]`` (symmetric)."""
    import statistics

    out = []
    for node, peers in bw.items():
        out.append(point(workload="pairs", op="sendrecv", bytes=1 << 20, node=node, run=run,
                         metrics={"bw": statistics.median(peers.values())}, peers=peers,
                         evidence=f"median of {len(peers)} pairs"))
    return out


def fleet(slow: str | None = None, good: float = 0.117, bad: float = 0.03,
          hosts: tuple[str, ...] = ("n1", "n2", "n3", "n4")) -> dict[str, dict[str, float]]:
    return {a: {b: bad if slow in (a, b) else good for b in hosts if b != a} for a in hosts}


def test_the_slow_node_fails_confirmed_and_only_it(tmp_path):
    f = floors(tmp_path, PAIRS)
    verdicts = judge(f, pairs(fleet(slow="n3")))
    status = {v.node: v.status for v in verdicts}
    assert status == {"n1": PASS, "n2": PASS, "n3": FAIL, "n4": PASS}
    (bad,) = [v for v in verdicts if v.status == FAIL]
    assert "confirmed: its pairs with the 3 node(s) that passed give 0.03 GB/s" in bad.line()
    assert bad.line().startswith("FAIL       node n3:") and "margin -70.0%" in bad.line()
    assert exit_code(verdicts) == 1
    assert exit_code(judge(f, pairs(fleet()))) == 0


def test_the_verdict_json_reads_back_as_the_verdict(tmp_path):
    from fabbench.floors.verify import FloorsVerdict, Verification

    f = floors(tmp_path, PAIRS)
    outcome = Verification(f, ["r.jsonl"], judge(f, pairs(fleet(slow="n3"))))
    written = json.loads(json.dumps(outcome.to_json()))
    verdict = FloorsVerdict.read(written)
    assert verdict == outcome.verdict() and verdict.to_json() == written
    assert [n.node for n in verdict.nodes if n.status == FAIL] == ["n3"]
    with pytest.raises(UsageError, match="not a verdict"):
        FloorsVerdict.read({**written, "format": "x"})


def test_a_suspect_its_pairs_with_passed_nodes_clear_is_not_called_bad(tmp_path):
    f = floors(tmp_path, PAIRS)
    bw = fleet()
    # n3's median is low because of its pairs with n4 and n2, but its pair with n1 (which
    # passed) is normal; n2 and n4 are slow with each other and with n3 only
    for a, b in (("n3", "n4"), ("n2", "n3"), ("n2", "n4")):
        bw[a][b] = bw[b][a] = 0.03
    verdicts = {v.node: v for v in judge(f, pairs(bw))}
    assert verdicts["n1"].status == PASS
    assert verdicts["n3"].status == NOT_JUDGED
    assert "a suspect, not confirmed" in verdicts["n3"].why
    # with no node passed there is nothing to confirm against: all fail, and say so
    everyone = judge(f, pairs(fleet(good=0.05)))
    assert {v.status for v in everyone} == {FAIL}
    assert all("no node passed to confirm it against" in v.why for v in everyone)


def test_the_reference_floors_load_and_each_rule_has_a_public_source():
    f = rules.load(rules.REFERENCE)
    assert len(f.rules) >= 6
    for rule in f.rules:
        assert rule.source.strip() and ("issue" in rule.source or "conf/" in rule.source), \
            rule.id
    ids = {r.id for r in f.rules}
    assert {"ib-roce-100g-busbw", "ib-roce-200g-busbw", "ib-roce-400g-busbw",
            "nvlink-8gpu-h100-busbw", "ethernet-tcp-busbw"} <= ids


def test_a_400g_run_is_placed_against_the_reference(tmp_path):
    f = rules.load(rules.REFERENCE)
    p = point(primitive="nccl", transport="nccl/IB", gpudirect=True, bytes=8 << 30,
              nominal_gbit_s=400.0, metrics={"busbw": 46.2}, nodes=2, ranks=2)
    judged = {v.rule.id: v for v in judge(f, [p]) if v.status != NOT_JUDGED}
    assert set(judged) == {"ib-roce-400g-busbw", "ib-roce-gpudirect"}
    v = judged["ib-roce-400g-busbw"]
    assert v.status == PASS and v.rule.reference == 48.0
    assert v.figure / v.rule.reference == pytest.approx(0.9625)


def test_the_json_schema_documents_the_format(tmp_path):
    schema = json.loads((REPO / "docs" / "floors.schema.json").read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    reference = tomllib.loads(rules.REFERENCE.read_text())
    assert not list(validator.iter_errors(reference))
    listed = set(schema["$defs"]["rule"]["properties"])
    assert listed == rules._KEYS
    bad = {**reference, "rule": [{**reference["rule"][0], "colour": 1}]}
    assert list(validator.iter_errors(bad))


FOREIGN = REPO / "tests" / "fixtures" / "foreign"


def test_other_tools_output_is_judged_and_reported(tmp_path, capsys):
    nccl = FOREIGN / "nccl-tests-2.13.9-all_reduce_perf-8gpu.txt"
    path = tmp_path / "f.toml"
    path.write_text(HEAD + ALLREDUCE.replace('size = "64M"', 'size = "128M"').replace(
        "at_least = 0.1", "at_least = 200").replace("\n[[rule]]", "\n[[rule]]", 1)
        + '[[rule]]\nid = "ib"\nsource = "t"\nworkload = "collectives"\n'
          'require_transport = "ib"\n')
    code, out, _ = cli(capsys, "verify", "--floors", str(path), str(nccl))
    assert code == 0, out
    assert "PASS       rule ar: allreduce 128M float32: collectives busbw 228.9 GB/s" in out
    assert "NOT JUDGED rule ib: transport: nccl-tests claims no transport" in out
    code, out, _ = cli(capsys, "report", str(nccl), "--floors", str(path))
    assert code == 0
    assert "# nccl-tests: allreduce" in out and "no transport claimed" in out
    assert "134217728       228.9" in out
    code, _, err = cli(capsys, "verify", "--floors", str(path), str(FOREIGN / "bad-osu-row.txt"))
    assert code == 2 and len(err.strip().splitlines()) == 1


def test_a_baseline_rule_of_points_without_a_primitive_selects_by_none_and_loads():
    """A rule key's None is a selector left out (primitive, dtype, ...), never a TOML null: the
    rule judges points of any primitive, and the floors file loads."""
    from fabbench.floors.baseline import RuleKey, Spread, _rule

    key = RuleKey("collectives", "allreduce", 1 << 20, "float32", None, "ethernet", None, 1)
    text = "\n".join(["format = \"fabbench-floors/1\"", "",
                      *_rule(key, Spread((2.0, 2.1, 1.9)), 3, below=0.1, k=3.0, made="now")])
    data = tomllib.loads(text)
    assert "primitive" not in data["rule"][0] and "null" not in text
    (rule,) = rules.parse(data, Path("baseline.toml")).rules
    assert rule.primitive is None and rule.op == "allreduce"
