"""The tune's loop without launches: each launch's results file is written from a model of the
library (times per setting), so the search, the final stage and its narrowing, the resume and
the files written are checked end to end and exactly (tests/integration/test_tune.py launches
real ranks, where which path a tune takes is up to the host)."""

from __future__ import annotations

import json
import random

import pytest

from fabbench.config import RunConfig
from fabbench.errors import UsageError
from fabbench.results.writer import ResultWriter
from fabbench.tune import library, publish, search
from fabbench.tune.library import Param
from fabbench.tune.outputs import read_rules, rules_file
from fabbench.workloads.collectives import CollectivesConfig
from unit.test_records import _collective, examples, replaced

M, S = 1 << 20, 16 << 20
PROFILE = """name = "t"
[primitive.mpi]
mca = { btl = "self,tcp" }
transport = ["ob1/tcp"]
[[primitive.mpi.tune]]
mca = "btl_tcp_links"
values = [2, 4]
[[primitive.mpi.tune]]
mca = "coll_tuned_allreduce_algorithm"
values = [4, 6]
ops = ["allreduce"]
per_size = true
needs = { mca = { coll_tuned_use_dynamic_rules = "1" } }
"""


def model(label: str, mca: dict[str, str], per_size: dict, rng: random.Random) -> dict[int, float]:
    """Time per size (µs): two links make everything 10 % faster; algorithm 6 makes 1 MiB 20 %
    faster and algorithm 4 16 MiB 30 % faster, while the axes are tried; in a final stage
    algorithm 6 at 1 MiB is 30 % slower than the default (choices that do not add up).
    Four links are fastest everywhere, over another transport (see trial): refused."""
    times = {M: 100.0, S: 1000.0}
    for n in times:
        times[n] *= 0.9 if mca.get("btl_tcp_links") == "2" else 1.0
    # an axis' trial forces its algorithm at every size; a final stage's, per size (the rules)
    alg = {n: per_size.get(("allreduce", n), mca.get("coll_tuned_allreduce_algorithm", "0"))
           for n in times}
    if alg[M] == "6":
        times[M] *= 1.3 / 0.9 if "-final-" in label else 0.8
    if alg[S] == "4":
        times[S] *= 0.7
    for n in times:
        times[n] *= 0.5 if mca.get("btl_tcp_links") == "4" else 1.0
    return {n: t * (1 + rng.uniform(-0.01, 0.01)) for n, t in times.items()}


@pytest.fixture
def tuner_env(tmp_path, monkeypatch):
    path = tmp_path / "t.toml"
    path.write_text(PROFILE)
    monkeypatch.setattr(library, "ompi_params", lambda: {
        "btl_tcp_links": Param("btl_tcp_links", "int", "1", ()),
        "coll_tuned_allreduce_algorithm": Param("coll_tuned_allreduce_algorithm", "int", "0",
                                                ())})
    monkeypatch.setattr(library, "check_space", lambda *a: None)
    launched: list[str] = []

    def trial(self, label, choice, *, ceiling=False):
        out = self.directory / "trials" / f"{search._slug(label)}.jsonl"
        self.done += 1
        if search.results_ok(out):
            return out
        launched.append(label)
        rng = random.Random(label)
        # four links "moved" to shared memory: refused, whatever their figures (the first
        # axis: the header names every stage's refusals, not only the last's)
        transport = "ob1/vader" if choice.mca.get("btl_tcp_links") == "4" else "ob1/tcp"
        run = replaced(examples()["run"], transport=transport)
        writer = ResultWriter(out, claim=True)
        writer.open()
        writer.write(run)
        for n, t in model(label, dict(choice.mca), dict(choice.per_size), rng).items():
            writer.write(replaced(_collective(n, t), transport=transport))
        writer.write(replaced(examples()["summary"], run_id=run.run_id))
        writer.close()
        return out

    monkeypatch.setattr(search.Tuner, "_trial", trial)
    config = RunConfig(fabric=str(path), primitive="mpi",
                       collectives=CollectivesConfig(ops=("allreduce",), sizes="1M,16M"))
    return config, tmp_path / "tune", launched


def test_a_final_stage_slower_at_a_size_drops_that_sizes_choice_and_holds_after(tuner_env):
    config, d, launched = tuner_env
    outcome = search.Tuner(config, d, repeats=3).run()
    algs = outcome.stages[1].chosen_per_size
    assert outcome.stages[0].chosen == "2"
    assert algs == {("allreduce", M): "6", ("allreduce", S): "4"}
    (first, what), = outcome.narrowed  # slower at 1 MiB: its choice went, and then it held
    assert [(p.bytes, p.slower) for p in first.candidates[0].points] == [(M, True), (S, False)]
    assert what == "the per-size choices at allreduce 1M"
    assert outcome.tuned.per_size == {("allreduce", M): "0", ("allreduce", S): "4"}
    assert outcome.tuned.mca["btl_tcp_links"] == "2" and outcome.holds
    assert sum("-final-" in label for label in launched) == 2 * 2 * 3
    written = publish.write(outcome)
    assert read_rules((d / "coll_tuned.rules").read_text()) == read_rules(
        rules_file({("allreduce", M): "0", ("allreduce", S): "4"}, 2))  # 1 MiB: fixed rules
    header = written[0].read_text()
    assert "dropped the per-size choices at allreduce 1M: together the settings were slower " \
           "at allreduce 1M" in header
    assert "= 6 at allreduce 1M" not in header and "= 4 at allreduce 16M" in header
    assert "btl_tcp_links = 2:" in header
    assert "refused mca:btl_tcp_links = 4: the transport changed from ob1/tcp to ob1/vader" \
        in header
    text = publish.summary(outcome)
    assert "slower at allreduce 1M: dropped the per-size choices at allreduce 1M" in text
    # resumed: nothing launched again, the same decisions
    launched.clear()
    again = search.Tuner(config, d, repeats=3, resume=True).run()
    assert launched == [] and again.tuned == outcome.tuned and again.holds
    state = json.loads((d / "tune.json").read_text())
    assert [s["axis"] for s in state["stages"]][-2:] == ["final", "final"]


def test_without_narrowing_the_settings_do_not_hold_and_a_resume_must_say_the_same(tuner_env):
    config, d, launched = tuner_env
    outcome = search.Tuner(config, d, repeats=3, narrowings=0).run()  # what --quick does
    assert outcome.narrowed == [] and not outcome.holds and publish.write(outcome) == []
    assert sum("-final-" in label for label in launched) == 2 * 3
    with pytest.raises(UsageError, match=r"holds a tune of other options \(.*--repeats 3 "
                                         r"--quick\): resume it with those"):
        search.Tuner(config, d, repeats=3, resume=True)
    assert search.replayed(d).holds is False  # decided again as it was: without narrowing


def test_the_state_file_reads_back_as_the_state_it_was_written_from():
    state = search.TuneState(
        fabbench="0.1", argv=("--fabric", "ethernet"), fabric="ethernet",
        profile_source="builtin", primitive="mpi", repeats=3, narrowings=2,
        started="2026-01-01T00:00:00+00:00", finished=None, axes=("btl_tcp_links",),
        stages=({"axis": "btl_tcp_links"},), tuned=None)
    written = json.loads(json.dumps(state.to_json()))
    assert written["format"] == "fabbench-tune/1" and list(written)[1] == "fabbench"
    assert search.TuneState.read(written) == state
    del written["narrowings"]  # a state written before it was recorded
    assert search.TuneState.read(written).narrowings == search.NARROWINGS
