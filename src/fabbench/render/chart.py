"""The data files of the Helm chart (charts/fabbench/files/), generated from the Python sources
of truth: the chart cannot call Python, so it reads these, and a unit test fails when a file
differs from what this module generates. Regenerate with ``python -m fabbench.render.chart``.

  files/fabrics.yaml     the fabric profiles: per fabric, what the chart decides by
                         (singleHost, devices) and per wire and backend the {env, mca} and
                         its --gpudirect on/off additions, placeholders kept (filled as
                         fabbench.render.fabric fills them);
  files/primitives.yaml  the primitive registry as the chart needs it: the default-primitive
                         rule (comm.registry.default_primitive) and per primitive its profile
                         section, render family, controller and whether it needs GPUs;
  files/run-options.yaml the run configuration's fields in argv order (fabbench.config
                         .chart_options), from which the chart's fabbench.runArgs writes the
                         arguments RunConfig.to_argv writes;
  files/launchers.yaml   the launcher table's Kubernetes pod launches (launch.table.PODS): per
                         render family the line before the program, which the chart's
                         fabbench.podLaunch fills in as launch.table.pod_launch does.
"""

from __future__ import annotations

import sys
from pathlib import Path
from types import MappingProxyType
from typing import Any

from fabbench import config
from fabbench.comm import registry
from fabbench.fabrics.profile import BUILTIN_DIR, PRIMITIVE_SECTIONS, WIRES, load_profile
from fabbench.launch import table
from fabbench.render.context import rendered_over
from fabbench.render.engine import k8s_arg

_HEADER = ("# Generated from {source} by fabbench.render.chart; do not edit\n"
           "# (tests/unit/test_render_k8s.py fails when it differs). Regenerate:\n"
           "#   python -m fabbench.render.chart charts/fabbench\n")


def chart_profiles(names: list[str] | None = None) -> dict:
    """fabric -> {singleHost, devices, wires: wire -> backend -> {env, mca, gpudirect: {on:
    {env, mca}, off: {env, mca}}}}."""
    names = names or sorted(p.stem for p in BUILTIN_DIR.glob("*.toml"))
    out: dict = {}
    for name in names:
        profile = load_profile(str(BUILTIN_DIR / f"{name}.toml"))
        wires: dict = {}
        for wire in WIRES:
            if wire != "native" and wire not in profile.wires:
                continue
            wires[wire] = {}
            for backend in PRIMITIVE_SECTIONS:
                s = profile.settings(backend, wire)
                wires[wire][backend] = {
                    "env": dict(sorted(s.env.items())), "mca": dict(sorted(s.mca.items())),
                    "gpudirect": {mode: {"env": dict(sorted(m.env.items())),
                                         "mca": dict(sorted(m.mca.items()))}
                                  for mode, m in sorted(s.gpudirect_modes.items())}}
        out[name] = {"singleHost": profile.single_host, "devices": list(profile.devices),
                     "wires": wires}
    return out


def chart_primitives() -> dict:
    """{default: {gpu, cpu}, primitives: name -> {backend, launch, over, gpuOnly}}."""
    out: dict = {"default": {"gpu": registry.default_primitive(True)[0],
                             "cpu": registry.default_primitive(False)[0]},
                 "primitives": {}}
    for name in registry.PRIMITIVES:
        spec = registry.get(name)
        over = rendered_over(spec)
        out["primitives"][name] = {"backend": spec.backend(over),
                                   "launch": spec.render_family(over),
                                   "over": over or "", "gpuOnly": spec.gpu_only}
    return out


# the run configuration's fields the chart keeps at the top of its values (the rest are under
# .Values.benchmark), and those it works out itself as `fabbench render k8s` does
_TOP_VALUES = ("fabric", "wire", "gpudirect", "iface", "rdma_device")
_DECIDED = MappingProxyType({"primitive": "primitive", "horovod_over": "over", "device": "device"})


def chart_options() -> list[dict[str, Any]]:
    """Per field of the run configuration the chart carries (all but those a job places:
    --ranks, --out), in argv order: its flag(s), the kind of value, its default as argument
    text, and where the chart finds it (``value`` in ``.Values`` or, ``in: benchmark``,
    ``.Values.benchmark``; or ``decided``: the chart works it out). The chart's
    ``fabbench.runArgs`` writes from these the arguments RunConfig.to_argv writes."""
    out = []
    for f in config.fields():
        o = f.option
        if o.placed:
            continue
        default = f.default if f.default is None or o.kind is config.SWITCH else \
            o.kind.write(f.default)
        entry: dict[str, Any] = {"flag": o.flag, "kind": o.kind.name, "default": default}
        if o.negative:
            entry["negative"] = o.negative
        if f.path in _DECIDED:
            entry["decided"] = _DECIDED[f.path]
        else:
            entry["value"] = camel(o.flag)
            entry["in"] = "" if f.path in _TOP_VALUES else "benchmark"
        out.append(entry)
    return out


def camel(flag: str) -> str:
    """``--batch-size`` -> ``batchSize``: the chart's name of a field."""
    first, *rest = flag.removeprefix("--").split("-")
    return first + "".join(p.capitalize() for p in rest)


def chart_run_options() -> dict:
    """{options: chart_options()}."""
    return {"options": chart_options()}


def chart_launchers() -> dict:
    """{hostfile, pods: render family -> {line, bareWhenOne}}: a line's words in Kubernetes'
    syntax (a literal '$' as '$$', the table's $(VAR) kept), an Each group as {each, words}."""
    def word(w: str) -> str:
        return str(w) if isinstance(w, table.Shell) else k8s_arg(w)

    def part(p: str | table.Each) -> str | dict:
        if isinstance(p, table.Each):
            return {"each": p.items, "words": [word(w) for w in p.words]}
        return word(p)

    return {"hostfile": table.HOSTFILE_K8S,
            "pods": {family: {"line": [part(p) for p in pod.line],
                              "bareWhenOne": pod.bare_when_one}
                     for family, pod in table.PODS.items()}}


FILES = {"files/fabrics.yaml": ("src/fabbench/fabrics/profiles/*.toml", chart_profiles),
         "files/primitives.yaml": ("src/fabbench/comm/registry.py", chart_primitives),
         "files/run-options.yaml": ("src/fabbench/config.py", chart_run_options),
         "files/launchers.yaml": ("src/fabbench/launch/table.py", chart_launchers)}


def generated(path: str) -> str:
    import yaml

    source, make = FILES[path]
    return _HEADER.format(source=source) + yaml.safe_dump(make(), sort_keys=True)


def main(argv: list[str]) -> int:
    chart = Path(argv[0]) if argv else Path("charts/fabbench")
    for path in FILES:
        (chart / path).write_text(generated(path))
        print(f"wrote {chart / path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
