"""The data files of the Helm chart (charts/fabbench/files/), generated from the Python sources
of truth: the chart cannot call Python, so it reads these, and a unit test fails when a file
differs from what this module generates. Regenerate with ``python -m fabbench.render.chart``.

  files/fabrics.yaml     the fabric profiles: per fabric, what the chart decides by
                         (singleHost, devices) and per wire and backend the {env, mca} and
                         its --gpudirect on/off additions, placeholders kept (filled as
                         fabbench.render.fabric fills them);
  files/primitives.yaml  the primitive registry as the chart needs it: the default-primitive
                         rule (comm.primitives.default_primitive) and per primitive its profile
                         section, render family, controller and whether it needs GPUs;
  files/run-options.yaml the run configuration's fields in argv order (fabbench.config
                         .chart_options), from which the chart's fabbench.runArgs writes the
                         arguments RunConfig.to_argv writes;
  files/launchers.yaml   the launchers' Kubernetes pod launches (launch.launchers.pod.Pod
                         .lines): per render family the line before the program, which the
                         chart's fabbench.podLaunch fills in as Pod.launch does;

and, within the chart's own values.yaml and values.schema.json, what they say of each run option
(its value, default, documentation, type, range, choices; the rendezvous port), spliced in
(``SPLICED``), so that the chart's defaults are `fabbench run`'s and `fabbench render`'s.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from types import MappingProxyType
from typing import Any

from fabbench import config, option_fields
from fabbench import value_rules as rules
from fabbench.comm import primitives
from fabbench.fabrics.profile import BUILTIN_DIR, PRIMITIVE_SECTIONS, WIRES, load_profile
from fabbench.launch.launchers.pod import HOSTFILE, Pod
from fabbench.launch.ports import RENDEZVOUS_PORT
from fabbench.launch.words import Each, Shell
from fabbench.render.context import render_family, rendered_over
from fabbench.render.jinja_env import k8s_arg

_HEADER = ("# Generated from {source} by fabbench.render.chart; do not edit\n"
           "# (tests/unit/test_render_k8s.py fails when it differs). Regenerate:\n"
           "#   python -m fabbench.render.chart charts/fabbench\n")


def chart_profiles(names: list[str] | None = None) -> dict[str, dict[str, object]]:
    """fabric -> {singleHost, devices, wires: wire -> backend -> {env, mca, gpudirect: {on:
    {env, mca}, off: {env, mca}}}}."""
    names = names or sorted(p.stem for p in BUILTIN_DIR.glob("*.toml"))
    out: dict[str, dict[str, object]] = {}
    for name in names:
        profile = load_profile(str(BUILTIN_DIR / f"{name}.toml"))
        wires: dict[str, dict[str, object]] = {}
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


def chart_primitives() -> dict[str, object]:
    """{default: {gpu, cpu}, primitives: name -> {backend, launch, over, gpuOnly}}."""
    found: dict[str, object] = {}
    for name in primitives.PRIMITIVES:
        spec = primitives.get(name)
        over = rendered_over(spec)
        found[name] = {"backend": spec.backend(over), "launch": render_family(spec, over),
                       "over": over or "", "gpuOnly": spec.gpu_only}
    return {"default": {"gpu": primitives.default_primitive(True)[0],
                        "cpu": primitives.default_primitive(False)[0]},
            "primitives": found}


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
        default = f.default if f.default is None or o.kind is option_fields.SWITCH else \
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


def chart_run_options() -> dict[str, list[dict[str, Any]]]:
    """{options: chart_options()}."""
    return {"options": chart_options()}


def chart_launchers() -> dict[str, object]:
    """{hostfile, pods: render family -> {line, bareWhenOne}}: a line's words in Kubernetes'
    syntax (a literal '$' as '$$', the launcher's $(VAR) kept), an Each group as {each, words}."""
    def word(w: str) -> str:
        return str(w) if isinstance(w, Shell) else k8s_arg(w)

    def part(p: str | Each) -> str | dict[str, object]:
        if isinstance(p, Each):
            return {"each": p.items, "words": [word(w) for w in p.words]}
        return word(p)

    return {"hostfile": HOSTFILE,
            "pods": {family: {"line": [part(p) for p in pod.line],
                              "bareWhenOne": pod.bare_when_one}
                     for family, pod in Pod.lines().items()}}


# a generated file -> (what it is made from, its maker)
FILES: dict[str, tuple[str, Callable[[], object]]] = {
    "files/fabrics.yaml": ("src/fabbench/fabrics/profiles/*.toml", chart_profiles),
    "files/primitives.yaml": ("src/fabbench/comm/primitives.py", chart_primitives),
    "files/run-options.yaml": ("src/fabbench/config.py", chart_run_options),
    "files/launchers.yaml": ("src/fabbench/launch/launchers/", chart_launchers)}


def generated(path: str) -> str:
    import yaml

    source, make = FILES[path]
    return _HEADER.format(source=source) + yaml.safe_dump(make(), sort_keys=True)


# ---- values.yaml and values.schema.json: the run options' entries ----
# Both files are the chart's own (its job's shape is written there by hand); what they say of a
# run option (its value's name, default, documentation, type, range and choices) is generated
# here from fabbench.config and spliced in: values.yaml between the markers below,
# values.schema.json property by property.

_BEGIN = "# >>> generated by fabbench.render.chart from src/fabbench/config.py: do not edit;"
_BEGIN_2 = "# regenerate: python -m fabbench.render.chart charts/fabbench (the rest is by hand)"
_END = "# <<< generated"
# what the chart says beside an option's own help
_CHART_HELP = MappingProxyType({
    "fabric": "Fabric profile: {choices} (files/fabrics.yaml, from the package's profiles).",
    "iface": "Network interface in the pods for TCP traffic (\"\": each rank finds its own, the "
             "interface of its route to the rendezvous peer, else of the default route, and says "
             "which in its log and its results' run record).",
    "rdma_device": "RDMA device on the nodes, e.g. mlx5_0 (\"\": each rank's first active port).",
    "gpudirect": "{help} Quote \"on\" and \"off\" in YAML files: unquoted, YAML reads them as "
                 "booleans.",
})
# The chart's own values that a rule of fabbench.value_rules governs, by their place in the
# values ("[]": an array's items), and whether "" (not set) is taken: `fabbench render` applies
# the same rules to its options.
_RULES: MappingProxyType[tuple[str, ...], tuple[rules.ValueRule, bool]] = MappingProxyType({
    ("nameOverride",): (rules.NAME, True), ("fullnameOverride",): (rules.NAME, True),
    ("image", "repository"): (rules.IMAGE_REPOSITORY, False),
    ("image", "tag"): (rules.IMAGE_TAG, True), ("image", "digest"): (rules.IMAGE_DIGEST, True),
    ("fabbenchCommand",): (rules.TEXT, False),
    ("gpuResource",): (rules.QUALIFIED_NAME, False),
    ("rdma", "resource"): (rules.QUALIFIED_NAME, True),
    ("benchmark", "label"): (rules.NAME, True),
    ("results", "claim"): (rules.SUBDOMAIN, True),
    ("results", "hostPath"): (rules.HOST_PATH, True),
    ("results", "path"): (rules.CONTAINER_PATH, False),
    ("shmSize",): (rules.QUANTITY, False),
    ("healthCheck", "schedule"): (rules.CRON, False),
    ("healthCheck", "nodeGroups", "[]", "name"): (rules.GROUP_NAME, False),
    ("preflight", "sizes"): (rules.SIZES, False)})
# node selectors: label keys to label values
_SELECTORS = (("nodeSelector",), ("healthCheck", "nodeGroups", "[]", "nodeSelector"))
# a container's requests and limits of cpu and memory: the ranks', the launcher's, the judge's
_RESOURCES = (("resources",), ("helperResources",), ("healthCheck", "judgeResources"))


def node_selector_schema() -> dict[str, Any]:
    return {"type": "object", "propertyNames": rules.QUALIFIED_NAME.schema(),
            "additionalProperties": rules.LABEL_VALUE.schema(optional=True)}


def resources_schema() -> dict[str, Any]:
    """Requests and limits of cpu and memory, each a quantity (text, or a whole number)."""
    quantity = {"anyOf": [{"type": "integer", "minimum": 1}, rules.QUANTITY.schema()]}
    amounts = {"type": "object", "additionalProperties": False,
               "properties": {"cpu": quantity, "memory": quantity}}
    return {"type": "object", "additionalProperties": False,
            "properties": {"requests": amounts, "limits": amounts}}


def _carried() -> list[config.Field]:
    """The fields the chart takes as values (not those a job places, nor those it decides)."""
    return [f for f in config.fields() if not f.option.placed and f.path not in _DECIDED]


def _chart_default(f: config.Field) -> Any:
    """A field's default as the chart's value: a comma list as text, "" for text not given."""
    default = config.RENDERED_DEFAULTS.get(f.path, f.default)
    kind = f.option.kind
    if kind.name == "list":
        return "" if default is None else kind.write(default)
    if default is None:
        return "" if kind is option_fields.TEXT else None
    return default


def _choices(f: config.Field) -> tuple[str, ...]:
    return tuple(chart_profiles()) if f.path == "fabric" else f.option.choices


def chart_property(f: config.Field) -> dict[str, Any]:
    """The JSON schema of a field's chart value (draft-07): its type, range, choices and
    default."""
    o, default = f.option, _chart_default(f)
    nullable = default is None
    if o.kind.name in ("text", "list") and (_choices(f) and o.kind is not option_fields.NAMES):
        prop: dict[str, Any] = {"enum": [*_choices(f)]}
    elif o.kind.name in ("text", "list"):
        prop = {"type": "string"}
        if o.kind is option_fields.NAMES:
            word = "(" + "|".join(o.choices) + ")"
            prop["pattern"] = f"^({word}(,{word})*)?$"
        elif o.kind is option_fields.COUNTS:
            prop["pattern"] = "^([0-9]+(,[0-9]+)*)?$"
        elif isinstance(o.check, rules.Checked):  # what reaches a command line
            prop.update(o.check.rule.schema(optional=True))
    else:
        name = {"int": "integer", "float": "number", "switch": "boolean"}[o.kind.name]
        prop = {"type": [name, "null"] if nullable else name}
        if isinstance(o.check, option_fields.Bounds):
            if o.check.low is not None:
                prop["exclusiveMinimum" if o.check.low_open else "minimum"] = o.check.low
            if o.check.high is not None:
                prop["maximum"] = o.check.high
    prop["default"] = default
    return prop


def _yaml_scalar(value: Any) -> str:
    import yaml

    if isinstance(value, str):
        return value if value and yaml.safe_load(value) == value and ":" not in value \
            else json.dumps(value)
    if isinstance(value, float):
        return option_fields.number_text(value)
    return json.dumps(value)  # true, false, null, whole numbers


def _values_lines(where: str) -> list[str]:
    """The generated lines of values.yaml at ``where`` ("": the top, "benchmark")."""
    import textwrap

    indent = "  " if where else ""
    lines = [indent + _BEGIN, indent + _BEGIN_2]
    for f in _carried():
        if ("" if f.path in _TOP_VALUES else "benchmark") != where:
            continue
        text = _CHART_HELP.get(f.path, "{help}").format(
            help=f.option.help, choices=", ".join(_choices(f)))
        if f.section:
            text = f"{f.section}: {text}"
        lines += textwrap.wrap(text, 100, initial_indent=indent + "# -- ",
                               subsequent_indent=indent + "# ")
        lines.append(f"{indent}{camel(f.option.flag)}: {_yaml_scalar(_chart_default(f))}")
    if not where:
        lines += ["# -- Rendezvous port of torch primitives (fabbench.launch.ports)",
                  f"masterPort: {RENDEZVOUS_PORT}"]
    return [*lines, indent + _END]


def values_yaml(text: str) -> str:
    """values.yaml with its generated blocks (top level, then under benchmark:) regenerated."""
    lines = text.splitlines()
    out: list[str] = []
    at = 0
    for where in ("", "benchmark"):
        indent = "  " if where else ""
        begin = next(i for i in range(at, len(lines)) if lines[i].startswith(indent + "# >>>"))
        end = lines.index(indent + _END, begin)
        out += lines[at:begin] + _values_lines(where)
        at = end + 1
    return "\n".join(out + lines[at:]) + "\n"


def values_schema(text: str) -> str:
    """values.schema.json with every run option's property (and the primitive's choices, the
    rendezvous port's default) regenerated; the chart's own properties kept as they are."""
    schema = json.loads(text)
    props = schema["properties"]
    for f in _carried():
        where = props if f.path in _TOP_VALUES else props["benchmark"]["properties"]
        where[camel(f.option.flag)] = chart_property(f)
    props["primitive"] = {"enum": ["", *primitives.PRIMITIVES], "default": ""}
    props["masterPort"]["default"] = RENDEZVOUS_PORT
    for path, (rule, optional) in _RULES.items():
        _parent(schema, path)[path[-1]] = rule.schema(optional=optional)
    for path in _SELECTORS:
        _parent(schema, path)[path[-1]] = node_selector_schema()
    for path in _RESOURCES:
        _parent(schema, path)[path[-1]] = resources_schema()
    return _json(schema, 0) + "\n"


def _parent(schema: dict[str, Any], path: tuple[str, ...]) -> dict[str, Any]:
    """The properties that hold the value at ``path`` ("[]": an array's items)."""
    at = schema
    for key in path[:-1]:
        at = at["items"] if key == "[]" else at["properties"][key]
    properties: dict[str, Any] = at["properties"]  # a JSON schema: objects all the way down
    return properties


def _json(value: Any, depth: int) -> str:
    """The schema's layout: an object of properties one key a line, every other value on one."""
    if not (isinstance(value, dict) and "properties" in value):
        return json.dumps(value)
    pad = "  " * (depth + 1)
    items = [f"{pad}{json.dumps(k)}: {_json(v, depth + 1)}" for k, v in value.items()
             if k != "properties"]
    inner = [f"{pad}  {json.dumps(k)}: {_json(v, depth + 2)}"
             for k, v in value["properties"].items()]
    items.append(f"{pad}\"properties\": {{\n" + ",\n".join(inner) + f"\n{pad}}}")
    return "{\n" + ",\n".join(items) + "\n" + "  " * depth + "}"


SPLICED = {"values.yaml": values_yaml, "values.schema.json": values_schema}


def main(argv: list[str]) -> int:
    chart = Path(argv[0]) if argv else Path("charts/fabbench")
    for path in FILES:
        (chart / path).write_text(generated(path))
        print(f"wrote {chart / path}")
    for path, splice in SPLICED.items():
        (chart / path).write_text(splice((chart / path).read_text()))
        print(f"wrote {chart / path} (its run options)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
