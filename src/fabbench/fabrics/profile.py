"""Load fabric profiles (TOML) into validated, frozen dataclasses.

Search path, later wins for a name: the package's profiles, /etc/fabbench/fabrics/,
~/.config/fabbench/fabrics/, each directory of $FABBENCH_PROFILE_PATH; ``--fabric`` also takes a
file. fabbench decides by a profile's data, never its name, so a site's copy is a shipped one:
``hardware`` (none, infiniband: verbs ports, omnipath: hfi1; `run` refuses a host without it,
`doctor` checks it and the memlock limit), ``devices`` (what a container needs on the native
wire), ``single_host`` (shared memory: no network device, /dev/shm required), ``[link]``
(``speed_from`` rdma, nic or none: where `report` reads the link's speed) and the MPI section's
settings (which the doctor's library checks follow). A missing key takes its hardware's default."""

from __future__ import annotations

import dataclasses
import json
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

import tomllib

from fabbench import value_rules as rules
from fabbench.errors import UsageError

BUILTIN_DIR = Path(__file__).parent / "profiles"
PRIMITIVE_SECTIONS = ("mpi", "gloo", "nccl")  # horovod runs over one of these
HARDWARE = ("none", "infiniband", "omnipath")
WIRES = ("native", "tcp")
# --gpudirect: "auto" sets nothing (the library decides); "on"/"off" apply the section's
# [gpudirect.on]/[gpudirect.off]. How the run learns whether it got GPUDirect ("verify"):
#   report   the library says per connection (NCCL: "via NET/IB/0/GDRDMA"); a run that did not
#            get what it asked for fails
#   library  the setting makes the library itself refuse to run without (UCX_IB_GPU_DIRECT_RDMA
#            =yes|no: UCX fails to open the HCA rather than fall back)
#   none     nothing says; the run records "not reported"
GPUDIRECT = ("auto", "on", "off")
GPUDIRECT_VERIFY = ("report", "library", "none")
_TOP_KEYS = {"name", "description", "hardware", "single_host", "devices", "link", "env",
             "primitive", "wire"}
_SECTION_KEYS = {"env", "mca", "transport", "gpudirect", "tune"}
_AXIS_KEYS = {"mca", "env", "values", "ops", "needs", "per_size", "note", "segment"}
_SEGMENT_KEYS = {"mca", "algorithms", "values"}
_GPUDIRECT_KEYS = {"verify", "on", "off"}
SPEED_FROM = ("rdma", "nic", "none")
_LINK_KEYS = {"speed_from", "device_env", "iface_env"}
# Defaults for profiles that do not say (one per hardware kind; the shipped profiles say).
DEFAULT_DEVICES = {"none": (), "infiniband": ("/dev/infiniband",), "omnipath": ("/dev/hfi1_0",)}
DEFAULT_DEVICE_ENV = ("UCX_NET_DEVICES", "NCCL_IB_HCA")
DEFAULT_IFACE_ENV = ("OMPI_MCA_btl_tcp_if_include", "NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME")
_PLACEHOLDER = re.compile(r"\{(\w+)\}")
_MCA_NAME = re.compile(r"[a-z][a-z0-9_]*")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_MCA_ENV = "OMPI_MCA_"  # a variable Open MPI reads as an MCA parameter


def search_path() -> list[Path]:
    dirs = [BUILTIN_DIR, Path("/etc/fabbench/fabrics"), Path.home() / ".config/fabbench/fabrics"]
    dirs += [Path(p) for p in os.environ.get("FABBENCH_PROFILE_PATH", "").split(":") if p]
    return dirs


def _frozen(mapping: Mapping[str, str]) -> Mapping[str, str]:
    return MappingProxyType(dict(mapping))


@dataclass(frozen=True, kw_only=True)
class Axis:
    """One setting `fabbench tune` may change ([[primitive.X.tune]]): an MCA parameter or an
    environment variable, the values to try, the ops it affects (empty: every op), what a value
    needs beside it to take effect (``needs``: Open MPI's forced algorithms need
    coll_tuned_use_dynamic_rules), and whether it is chosen per message size (``per_size``:
    an Open MPI collective's algorithm, written to a coll_tuned rules file). A per-size axis
    may pair its segmented algorithms with segment sizes (``segment``: the MCA parameter of the
    segment size, in a rules line the fourth column): each pair is one more value, written
    "ALGORITHM:SEGMENT" (a segmented algorithm with no segment size is its unsegmented one)."""

    kind: str                       # "mca" or "env"
    key: str
    values: tuple[str, ...]
    ops: tuple[str, ...] = ()
    needs_mca: Mapping[str, str] = field(default_factory=dict)
    needs_env: Mapping[str, str] = field(default_factory=dict)
    per_size: bool = False
    note: str = ""
    segment_key: str = ""  # the segment size's MCA parameter, for "ALGORITHM:SEGMENT" values

    @property
    def name(self) -> str:
        return f"{self.kind}:{self.key}"

    def settings_of(self, value: str) -> dict[str, str]:
        """The settings a value stands for: {key: value}, or for "ALGORITHM:SEGMENT" the
        algorithm and its segment size."""
        algorithm, segment = split_pair(value)
        if self.segment_key and segment is not None:
            return {self.key: algorithm, self.segment_key: segment}
        return {self.key: value}


def split_pair(value: str) -> tuple[str, str | None]:
    """A per-size value as (algorithm, segment size): "5:1048576" is ("5", "1048576"), a value
    without a segment size (value, None)."""
    algorithm, sep, segment = value.partition(":")
    return (algorithm, segment) if sep else (value, None)


@dataclass(frozen=True, kw_only=True)
class Settings:
    """What one primitive needs on one fabric: environment, MCA parameters, accepted transports."""

    env: Mapping[str, str] = field(default_factory=dict)
    mca: Mapping[str, str] = field(default_factory=dict)
    transport: tuple[str, ...] = ()
    # GPUDirect: the settings of "on" and "off" (each an env/mca-only Settings), how use is
    # verified, and (once merged by Profile.settings) the mode these settings apply
    gpudirect_modes: Mapping[str, Settings] = field(default_factory=dict)
    gpudirect_verify: str = "none"
    gpudirect: str = "auto"
    tune: tuple[Axis, ...] = ()  # what `fabbench tune` may change, and the values it tries

    def resolve(self, values: Mapping[str, str | None]) -> Settings:
        """Fill in "{iface}"-style placeholders; a placeholder without a value is a UsageError."""

        def fill(text: str) -> str:
            def sub(m: re.Match[str]) -> str:
                key = m.group(1)
                if values.get(key) is None:
                    raise UsageError(f"the fabric profile needs a value for {{{key}}}: "
                                     f"give --{key.replace('_', '-')}")
                return str(values[key])
            return _PLACEHOLDER.sub(sub, text)

        return dataclasses.replace(self, env=_frozen({k: fill(v) for k, v in self.env.items()}),
                                   mca=_frozen({k: fill(v) for k, v in self.mca.items()}))


@dataclass(frozen=True, kw_only=True)
class LinkSpec:
    """Where the speed of the link a run's bytes crossed is read (see the module's doc)."""

    speed_from: str
    device_env: tuple[str, ...] = DEFAULT_DEVICE_ENV
    iface_env: tuple[str, ...] = DEFAULT_IFACE_ENV

    def __post_init__(self) -> None:
        if self.speed_from not in SPEED_FROM:
            raise UsageError(f"link.speed_from must be one of {', '.join(SPEED_FROM)}, "
                             f"not {self.speed_from!r}")

    def to_json(self) -> dict[str, Any]:
        return {"speed_from": self.speed_from, "device_env": list(self.device_env),
                "iface_env": list(self.iface_env)}

    @classmethod
    def read(cls, data: Mapping[str, Any]) -> LinkSpec:
        return cls(speed_from=data["speed_from"], device_env=tuple(data["device_env"]),
                   iface_env=tuple(data["iface_env"]))


@dataclass(frozen=True, kw_only=True)
class Profile:
    name: str
    description: str
    hardware: str
    single_host: bool
    devices: tuple[str, ...] = ()
    link: LinkSpec
    env: Mapping[str, str]
    primitives: Mapping[str, Settings]
    wires: Mapping[str, Mapping[str, Settings]]
    source: str

    def __post_init__(self) -> None:
        if self.hardware not in HARDWARE:
            raise UsageError(f"{self.source}: hardware must be one of {', '.join(HARDWARE)}, "
                             f"not {self.hardware!r}")
        for device in self.devices:
            if not device.startswith("/dev/"):
                raise UsageError(f"{self.source}: devices must be paths under /dev/, "
                                 f"not {device!r}")

    def native(self, wire: str) -> bool:
        """This wire uses the fabric's hardware (RDMA devices), not TCP."""
        return self.hardware != "none" and wire == "native"

    def device_files(self, wire: str) -> tuple[str, ...]:
        """The device files a container of a run on this wire needs."""
        return self.devices if self.native(wire) else ()

    def settings(self, primitive: str, wire: str = "native", gpudirect: str = "auto") -> Settings:
        """The merged settings for a primitive: the profile's env, its section (or the wire's
        override), then the section's [gpudirect.on|off] for --gpudirect on|off."""
        section = self.wires.get(wire, {}).get(primitive) if wire != "native" else None
        if wire != "native" and wire not in self.wires:
            raise UsageError(f"fabric {self.name!r} has no --wire {wire} variant "
                             f"(it has: {', '.join(['native', *self.wires]) })")
        base = section or self.primitives.get(primitive)
        if base is None:
            raise UsageError(f"fabric {self.name!r} has no settings for primitive {primitive!r}")
        if gpudirect not in GPUDIRECT:
            raise UsageError(f"--gpudirect takes {', '.join(GPUDIRECT)}, not {gpudirect!r}")
        extra = Settings()
        if gpudirect != "auto":
            if gpudirect == "on" and "on" not in base.gpudirect_modes:
                table = ("" if wire == "native" else f"wire.{wire}.") + f"primitive.{primitive}"
                raise UsageError(
                    f"fabric {self.name!r} (wire {wire}) has no GPUDirect for {primitive}: "
                    f"--gpudirect on needs [{table}.gpudirect.on] in {self.source} (use "
                    "--gpudirect auto or off)")
            # "off" without a table: the primitive cannot use GPUDirect here; nothing to set
            extra = base.gpudirect_modes.get(gpudirect, extra)
        return dataclasses.replace(
            base, env=_frozen({**self.env, **base.env, **extra.env}),
            mca=_frozen({**base.mca, **extra.mca}), gpudirect=gpudirect)


def _toml_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    return json.dumps(str(value))  # a JSON string is a TOML basic string


def _inline(table: Mapping[str, str]) -> str:
    return "{ " + ", ".join(f"{k} = {_toml_value(v)}" for k, v in table.items()) + " }"


def _section_toml(at: str, s: Settings) -> list[str]:
    lines = [f"[{at}]"]
    if s.mca:
        lines.append(f"mca = {_inline(s.mca)}")
    if s.env:
        lines.append(f"env = {_inline(s.env)}")
    lines.append(f"transport = {_toml_value(s.transport)}")
    if s.gpudirect_modes:
        lines += ["", f"[{at}.gpudirect]", f"verify = {_toml_value(s.gpudirect_verify)}"]
        for mode, m in s.gpudirect_modes.items():
            parts = [f"{k} = {_inline(v)}" for k, v in (("mca", m.mca), ("env", m.env)) if v]
            lines.append(f"{mode} = {{ {', '.join(parts)} }}")
    return lines


def profile_toml(profile: Profile, header: Sequence[str] = ()) -> str:
    """The profile as a TOML file that reads back to the same profile (its tune axes left out:
    a written profile is a result, not a search space); ``header``: comment lines on top."""
    lines = [f"# {line}" if line else "#" for line in header]
    lines += [f"name = {_toml_value(profile.name)}",
              f"description = {_toml_value(profile.description)}",
              f"hardware = {_toml_value(profile.hardware)}"]
    if profile.single_host:
        lines.append("single_host = true")
    lines.append(f"devices = {_toml_value(profile.devices)}")
    if profile.env:
        lines.append(f"env = {_inline(profile.env)}")
    link = profile.link
    lines += ["", "[link]", f"speed_from = {_toml_value(link.speed_from)}",
              f"device_env = {_toml_value(link.device_env)}",
              f"iface_env = {_toml_value(link.iface_env)}"]
    for name, settings in profile.primitives.items():
        lines += ["", *_section_toml(f"primitive.{name}", settings)]
    for wire, sections in profile.wires.items():
        for name, settings in sections.items():
            lines += ["", *_section_toml(f"wire.{wire}.primitive.{name}", settings)]
    return "\n".join(lines) + "\n"


def _strings(table: object, where: str, pattern: re.Pattern[str]) -> dict[str, str]:
    if not isinstance(table, dict):
        raise UsageError(f"{where}: expected a table of strings")
    out = {}
    for key, value in table.items():
        if not pattern.fullmatch(key):
            raise UsageError(f"{where}: bad name {key!r}")
        if not isinstance(value, str | int | bool):
            raise UsageError(f"{where}.{key}: expected a string, got {type(value).__name__}")
        out[key] = _value(str(value).lower() if isinstance(value, bool) else str(value),
                          f"{where}.{key}", pattern is _MCA_NAME or key.startswith(_MCA_ENV))
    return out


def _value(text: str, where: str, mca: bool) -> str:
    """A setting's value: an MCA parameter's reaches mpirun's command line, and mpirun passes
    it on to each node's shell (value_rules.MCA_VALUE); a variable's is written into scripts
    and manifests (no control characters). A placeholder is checked when filled in (--iface,
    --rdma-device)."""
    rule = rules.MCA_VALUE if mca else rules.ENV_VALUE
    if not rule.ok(_PLACEHOLDER.sub("", text)):
        raise UsageError(rule.message(text, where))
    return text


def _table(table: object, where: str, allowed: set[str]) -> dict[str, Any]:
    """A TOML table holding only ``allowed`` keys."""
    if not isinstance(table, dict):
        raise UsageError(f"{where}: expected a table")
    unknown = set(table) - allowed
    if unknown:
        raise UsageError(f"{where}: unknown key {sorted(unknown)[0]!r} "
                         f"(allowed: {', '.join(sorted(allowed))})")
    return table


def _section(table: object, where: str) -> Settings:
    table = _table(table, where, _SECTION_KEYS)
    transport = table.get("transport", [])
    if isinstance(transport, str):
        transport = [transport]
    if not transport or not all(isinstance(t, str) and t for t in transport):
        raise UsageError(f"{where}.transport: expected a non-empty list of transport patterns")
    modes, verify = _gpudirect(table.get("gpudirect"), f"{where}.gpudirect")
    return Settings(env=_frozen(_strings(table.get("env", {}), f"{where}.env", _ENV_NAME)),
                    mca=_frozen(_strings(table.get("mca", {}), f"{where}.mca", _MCA_NAME)),
                    transport=tuple(transport), gpudirect_modes=modes, gpudirect_verify=verify,
                    tune=_axes(table.get("tune", []), f"{where}.tune"))


def _axes(value: object, where: str) -> tuple[Axis, ...]:
    """[[primitive.X.tune]]: each an ``mca`` or ``env`` name with a non-empty list of values."""
    if not isinstance(value, list):
        raise UsageError(f"{where}: expected an array of tables ([[...tune]])")
    axes = []
    for i, table in enumerate(value, 1):
        at = f"{where}[{i}]"
        table = _table(table, at, _AXIS_KEYS)
        kinds = [k for k in ("mca", "env") if k in table]
        if len(kinds) != 1:
            raise UsageError(f"{at}: name one setting, as mca = \"NAME\" or env = \"NAME\"")
        kind = kinds[0]
        key = table[kind]
        if not isinstance(key, str) or not (_MCA_NAME if kind == "mca" else _ENV_NAME).fullmatch(
                key):
            raise UsageError(f"{at}.{kind}: bad name {key!r}")
        values = table.get("values")
        if not isinstance(values, list) or not values:
            raise UsageError(f"{at}: {kind} {key}: values must be a non-empty list")
        if not all(isinstance(v, str | int) and not isinstance(v, bool) for v in values):
            raise UsageError(f"{at}: {kind} {key}: values must be strings or integers")
        texts = tuple(_value(str(v), f"{at}.values", kind == "mca" or key.startswith(_MCA_ENV))
                      for v in values)
        if len(set(texts)) != len(texts):
            raise UsageError(f"{at}: {kind} {key}: a value is listed twice")
        ops = table.get("ops", [])
        if not isinstance(ops, list) or not all(isinstance(o, str) and o for o in ops):
            raise UsageError(f"{at}.ops: expected a list of op names")
        needs = _table(table.get("needs", {}), f"{at}.needs", {"mca", "env"})
        per_size = table.get("per_size", False)
        if not isinstance(per_size, bool):
            raise UsageError(f"{at}.per_size: expected true or false")
        if per_size and (kind != "mca" or len(ops) != 1):
            raise UsageError(f"{at}: per_size is for one op's Open MPI algorithm (an mca "
                             "setting with one op in ops)")
        segment_key = ""
        if "segment" in table:
            if not per_size:
                raise UsageError(f"{at}.segment: segment sizes pair with a per_size algorithm")
            segment_key, pairs = _segments(table["segment"], f"{at}.segment")
            if set(pairs) & set(texts):
                raise UsageError(f"{at}: {kind} {key}: a value is listed twice")
            texts += pairs
        axes.append(Axis(kind=kind, key=key, values=texts, ops=tuple(ops),
                         needs_mca=_frozen(_strings(needs.get("mca", {}), f"{at}.needs.mca",
                                                    _MCA_NAME)),
                         needs_env=_frozen(_strings(needs.get("env", {}), f"{at}.needs.env",
                                                    _ENV_NAME)),
                         per_size=per_size, note=str(table.get("note", "")),
                         segment_key=segment_key))
    names = [a.name for a in axes]
    if len(set(names)) != len(names):
        raise UsageError(f"{where}: a setting is tuned twice")
    return tuple(axes)


def _segments(value: object, where: str) -> tuple[str, tuple[str, ...]]:
    """segment = { mca = NAME, algorithms = [...], values = [...] }: the segment size's MCA
    parameter and the "ALGORITHM:SEGMENT" values, every listed algorithm with every size (a
    listed algorithm need not be among the axis' own values: without a segment size it may be
    another one's twin, as Open MPI's segmented ring is its ring)."""
    table = _table(value, where, _SEGMENT_KEYS)
    key = table.get("mca")
    if not isinstance(key, str) or not _MCA_NAME.fullmatch(key):
        raise UsageError(f"{where}.mca: name the segment size's MCA parameter")
    segmented = table.get("algorithms")
    if not isinstance(segmented, list) or not segmented or \
            not all(isinstance(a, str | int) and not isinstance(a, bool) for a in segmented):
        raise UsageError(f"{where}.algorithms: a non-empty list of the segmented algorithms")
    sizes = table.get("values")
    if not isinstance(sizes, list) or not sizes or \
            not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in sizes):
        raise UsageError(f"{where}.values: a non-empty list of sizes in bytes (integers > 0)")
    if len(set(sizes)) != len(sizes):
        raise UsageError(f"{where}.values: a size is listed twice")
    return key, tuple(f"{a}:{v}" for a in segmented for v in sizes)


def _gpudirect(table: object, where: str) -> tuple[Mapping[str, Settings], str]:
    """[primitive.X.gpudirect]: verify = "report"|"library"|"none", on = {env, mca},
    off = {env, mca}."""
    if table is None:
        return MappingProxyType({}), "none"
    table = _table(table, where, _GPUDIRECT_KEYS)
    verify = table.get("verify")
    if verify not in GPUDIRECT_VERIFY:
        raise UsageError(f"{where}.verify: expected one of {', '.join(GPUDIRECT_VERIFY)}, "
                         f"not {verify!r}")
    modes = {}
    for mode in ("on", "off"):
        sub = table.get(mode)
        if sub is None:
            continue
        sub = _table(sub, f"{where}.{mode}", {"env", "mca"})
        modes[mode] = Settings(env=_frozen(_strings(sub.get("env", {}), f"{where}.{mode}.env",
                                                    _ENV_NAME)),
                               mca=_frozen(_strings(sub.get("mca", {}), f"{where}.{mode}.mca",
                                                    _MCA_NAME)))
    if not modes:
        raise UsageError(f"{where}: needs an on or off table")
    return MappingProxyType(modes), verify


def _primitives(table: object, where: str) -> Mapping[str, Settings]:
    if not isinstance(table, dict):
        raise UsageError(f"{where}: expected a table of primitives")
    for name in table:
        if name not in PRIMITIVE_SECTIONS:
            raise UsageError(f"{where}: unknown primitive {name!r} "
                             f"(allowed: {', '.join(PRIMITIVE_SECTIONS)})")
    return MappingProxyType({n: _section(t, f"{where}.{n}") for n, t in table.items()})


def _names(value: object, where: str, pattern: re.Pattern[str]) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) and pattern.fullmatch(v)
                                              for v in value):
        raise UsageError(f"{where}: expected a list of names")
    return tuple(value)


def _link(table: object, source: str, hardware: str, single_host: bool) -> LinkSpec:
    table = _table(table, f"{source}: link", _LINK_KEYS)
    default = "rdma" if hardware != "none" else ("none" if single_host else "nic")
    speed_from = table.get("speed_from", default)
    if speed_from == "rdma" and hardware == "none":
        raise UsageError(f"{source}: link.speed_from = \"rdma\" needs a hardware kind with "
                         "RDMA ports (infiniband or omnipath)")
    try:
        return LinkSpec(
            speed_from=speed_from,
            device_env=_names(table.get("device_env", list(DEFAULT_DEVICE_ENV)),
                              "link.device_env", _ENV_NAME),
            iface_env=_names(table.get("iface_env", list(DEFAULT_IFACE_ENV)),
                             "link.iface_env", _ENV_NAME))
    except UsageError as exc:
        raise UsageError(f"{source}: {exc}") from None


def parse_profile(data: dict[str, Any], source: str) -> Profile:
    _table(data, source, _TOP_KEYS)
    for key in ("name", "primitive"):
        if key not in data:
            raise UsageError(f"{source}: missing key {key!r}")
    if not isinstance(data["name"], str) or not re.fullmatch(r"[a-z][a-z0-9_-]*", data["name"]):
        raise UsageError(f"{source}: name must be lower-case letters, digits, '-' or '_'")
    wires_table = data.get("wire", {})
    if not isinstance(wires_table, dict):
        raise UsageError(f"{source}: [wire] must be a table")
    wires = {}
    for wire, table in wires_table.items():
        if wire not in WIRES or wire == "native":
            raise UsageError(f"{source}: unknown wire {wire!r} (allowed: tcp)")
        if not isinstance(table, dict) or set(table) != {"primitive"}:
            raise UsageError(f"{source}: [wire.{wire}] must hold only [wire.{wire}.primitive.*]")
        wires[wire] = _primitives(table["primitive"], f"{source}: wire.{wire}.primitive")
    single_host = data.get("single_host", False)
    if not isinstance(single_host, bool):
        raise UsageError(f"{source}: single_host must be true or false")
    hardware = str(data.get("hardware", "none"))
    devices = data.get("devices", list(DEFAULT_DEVICES.get(hardware, ())))
    if not isinstance(devices, list) or not all(rules.TEXT.ok(d) for d in devices):
        raise UsageError(f"{source}: devices must be a list of device paths")
    return Profile(
        name=data["name"],
        description=str(data.get("description", "")),
        hardware=hardware,
        single_host=single_host,
        devices=tuple(devices),
        link=_link(data.get("link", {}), source, hardware, single_host),
        env=_frozen(_strings(data.get("env", {}), f"{source}: env", _ENV_NAME)),
        primitives=_primitives(data["primitive"], f"{source}: primitive"),
        wires=MappingProxyType(wires),
        source=source,
    )


def read_profile(path: Path) -> Profile:
    try:
        data = tomllib.loads(path.read_text())
    except OSError as exc:
        raise UsageError(f"cannot read fabric profile {path}: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{path}: not valid TOML: {exc}") from None
    return parse_profile(data, str(path))


def toml_files(directories: list[Path]) -> dict[str, Path]:
    """Name (the file's stem) -> file over a search path: later directories override earlier
    ones. Fabric profiles and studies are found this way."""
    found: dict[str, Path] = {}
    for directory in directories:
        if directory.is_dir():
            for path in sorted(directory.glob("*.toml")):
                found[path.stem] = path
    return found


def available_profiles() -> dict[str, Path]:
    """Name -> file, over the search path (later directories override earlier ones)."""
    return toml_files(search_path())


def load_profile(name_or_path: str) -> Profile:
    """A profile by name (from the search path) or by the path of a .toml file."""
    if name_or_path.endswith(".toml") or os.sep in name_or_path:
        return read_profile(Path(name_or_path))
    profiles = available_profiles()
    if name_or_path not in profiles:
        raise UsageError(f"unknown fabric {name_or_path!r} (known: "
                         f"{', '.join(sorted([*profiles, 'auto']))})")
    profile = read_profile(profiles[name_or_path])
    if profile.name != name_or_path:
        raise UsageError(f"{profile.source}: file is named {name_or_path!r} but says "
                         f"name = {profile.name!r}")
    return profile
