"""`fabbench forecast --json` prints what it printed before its answer was a typed record
(tests/fixtures/forecast: the output at 7d7d8f0): the same text with every number in its place,
and numbers equal to 12 digits (a least-squares fit may differ in its last bits on another
machine's BLAS)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from conftest import cli
from fabbench.scaling.predict import Forecast, ModelOptions, build

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
RUNS = FIXTURES / "runs"
CASES = {
    "siteA-ib+train-8-n8x8.json": (["siteA-ib.jsonl", "siteA-train-8.jsonl"],
                                   ["--nodes", "8", "--ranks-per-node", "8",
                                    "--intra-bandwidth", "100GB/s"]),
    "siteA-train-1-n4.json": (["siteA-train-1.jsonl"], ["--nodes", "4"]),
}
NUMBER = re.compile(r"(?<![\w\"])-?\d+(\.\d+)?([eE][-+]?\d+)?(?![\w\"])")


def _numbers(text: str) -> list[float]:
    return [float(m.group()) for m in NUMBER.finditer(text)]


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_json_is_what_it_was_before_the_typed_answer(capsys, name):
    runs, options = CASES[name]
    argv = [arg for run in runs for arg in ("--from", str(RUNS / run))]
    code, out, err = cli(capsys, "forecast", *argv, *options, "--json")
    before = (FIXTURES / "forecast" / name).read_text()
    assert code == 0 and not err
    assert NUMBER.sub("N", out) == NUMBER.sub("N", before)  # keys, order, nulls, layout
    assert _numbers(out) == pytest.approx(_numbers(before), rel=1e-12, abs=1e-300)


def test_the_answer_is_typed_and_to_json_is_strict_json():
    answer = build([RUNS / "siteA-ib.jsonl", RUNS / "siteA-train-8.jsonl"],
                   ModelOptions(nodes=8, ranks_per_node=8, intra_bandwidth="100GB/s"))
    assert isinstance(answer, Forecast) and answer.hierarchical is not None
    assert answer.train[0].by_nodes[0].nodes == 1
    doc = answer.to_json()
    assert json.loads(json.dumps(doc, allow_nan=False)) == doc
    assert doc["alpha_us"] == answer.alpha_us and doc["ranks"] == 64
