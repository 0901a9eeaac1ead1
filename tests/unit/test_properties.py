"""Property-based tests: thousands of generated inputs to the CLI, size specs, profiles and
results files. Never a traceback; always exit 0 or 2 (or a UsageError in the library)."""

from __future__ import annotations

import contextlib
import io
import json
import string

import pytest
import tomllib
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import property_examples
from fabbench.cli.main import main
from fabbench.errors import UsageError
from fabbench.fabrics.profile import parse_profile
from fabbench.results.reader import read_results
from fabbench.units import parse_sizes

TEXT = st.text(alphabet=string.printable, max_size=24)


@settings(max_examples=property_examples(1500), deadline=None)
@given(TEXT)
def test_size_specs_parse_or_refuse(spec):
    try:
        sizes = parse_sizes(spec)
    except UsageError as exc:
        assert str(exc) and "\n" not in str(exc).strip()
        return
    assert sizes and all(isinstance(s, int) and s > 0 for s in sizes)
    assert list(sizes) == sorted(sizes)


OPTION_VALUES = {
    "--fabric": st.sampled_from(["ethernet", "shm", "infiniband", "omnipath", "auto", "x", ""]),
    "--primitive": st.sampled_from(["mpi", "gloo", "nccl", "horovod", "MPI", "", "q"]),
    "--wire": st.sampled_from(["native", "tcp", "udp", ""]),
    "--ranks": st.one_of(st.integers(-3, 600).map(str), TEXT),
    "--sizes": st.one_of(st.sampled_from(["8:64M", "1K", "8,1M", "64:8", "12Q"]), TEXT),
    "--ops": st.one_of(st.sampled_from(["allreduce", "sendrecv,alltoall", "scan"]), TEXT),
    "--dtypes": st.sampled_from(["float32", "float16", "bfloat16,float32", "int8", ""]),
    "--timeout": st.one_of(st.floats(allow_nan=True, allow_infinity=True).map(str), TEXT),
    "--budget": st.one_of(st.floats(-1, 5).map(str), TEXT),
    "--min-samples": st.integers(-2, 300).map(str),
    "--horovod-over": st.sampled_from(["mpi", "gloo", "nccl"]),
    "--device": st.sampled_from(["cpu", "cuda", "tpu"]),
    "--gpudirect": st.sampled_from(["auto", "on", "off", "yes", ""]),
    "--iface": st.sampled_from(["lo", "nosuch0"]),
}


def run_main(argv: list[str]) -> tuple[int, str]:
    err = io.StringIO()
    out = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out), \
            pytest.raises(SystemExit) as exit_info:
        main(argv)
    return exit_info.value.code, err.getvalue()


@settings(max_examples=property_examples(600), deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(st.dictionaries(st.sampled_from(sorted(OPTION_VALUES)), st.just(None), max_size=6)
       .flatmap(lambda keys: st.fixed_dictionaries({k: OPTION_VALUES[k] for k in keys})))
def test_run_options_exit_0_or_2_never_a_traceback(options):
    argv = ["run", "--dry-run"]
    for key, value in options.items():
        argv += [key, value]
    code, err = run_main(argv)
    assert code in (0, 2), (argv, err)
    assert "Traceback" not in err
    if code == 2:
        assert len(err.strip().splitlines()) == 1, (argv, err)


PROFILE = st.recursive(
    st.one_of(st.text(max_size=8), st.integers(), st.booleans(), st.floats(allow_nan=False)),
    lambda children: st.one_of(st.lists(children, max_size=3),
                               st.dictionaries(st.sampled_from(
                                   ["name", "primitive", "mpi", "gloo", "nccl", "env", "mca",
                                    "transport", "wire", "tcp", "hardware", "single_host",
                                    "description", "x"]), children, max_size=4)),
    max_leaves=12)


@settings(max_examples=property_examples(700), deadline=None)
@given(st.dictionaries(st.sampled_from(["name", "primitive", "wire", "hardware", "env",
                                        "single_host", "description"]), PROFILE, max_size=5))
def test_profile_data_loads_or_refuses(data):
    try:
        profile = parse_profile(data, "generated.toml")
    except UsageError as exc:
        assert "generated.toml" in str(exc)
        return
    for primitive in profile.primitives:
        assert profile.settings(primitive).transport


@settings(max_examples=property_examples(500), deadline=None)
@given(st.text(max_size=200))
def test_profile_text_loads_or_refuses(text):
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return
    with contextlib.suppress(UsageError):
        parse_profile(data, "generated.toml")


RECORD = st.fixed_dictionaries({"kind": st.sampled_from(["run", "collective", "summary", "x"]),
                                 "run_id": st.one_of(st.text(max_size=5), st.integers())},
                                optional={"schema": st.sampled_from(["fabbench/1",
                                                                     "fabbench/2", "x"]),
                                          "ok": st.booleans(), "bytes": st.integers(-5, 5)})


@settings(max_examples=property_examples(1000), deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(RECORD.map(json.dumps), st.text(max_size=30)), max_size=5),
       st.booleans())
def test_results_files_read_or_refuse(tmp_path_factory, lines, cut):
    path = tmp_path_factory.mktemp("r") / "r.jsonl"
    text = "\n".join(lines) + ("" if cut else "\n")
    path.write_text(text)
    try:
        results = read_results(path)
    except UsageError as exc:
        assert str(path) in str(exc) and "\n" not in str(exc)
        return
    assert results.records[0].kind == "run"
    assert path.read_text() == text  # reading never changes a file
