"""The rules a value must meet before a job is written with it, each defined once: `fabbench
render` applies them (Python's re), and the chart's values.schema.json holds them (generated from
here by fabbench.render.chart; Helm validates values with Go's regexp, RE2). A rule's pattern is
therefore in the subset the three engines (Python, RE2, ECMA-262) read alike: explicit character
classes (no \\s, \\d, \\w, which Python reads as Unicode), no lookaround, no back-references.
Every rule also refuses control characters (C0, DEL, C1 and the Unicode line separators, which
YAML 1.1 reads as line breaks): a value may end up in a comment of a script or a manifest, where
a line break would start a command or a YAML key.

A rule is anchored on both ends: Python by re.fullmatch, the schema by ^(?:...)$ (RE2's $ is
the end of the text; Python's jsonschema reads ^...$ with re.search, whose $ also matches before
a final newline, and the schema's "not" of control characters refuses that newline there)."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from fabbench.errors import UsageError

# \x85 (NEL), U+2028 and U+2029 are line breaks to YAML 1.1; the last two are written as the
# characters themselves (no escape of them is common to Python, RE2 and ECMA-262)
CONTROL = "[\\x00-\\x1f\\x7f-\\x9f\u2028\u2029]"
NOT_CONTROL = "[^" + CONTROL[1:]  # any other character
_CONTROL = re.compile(CONTROL)
# the most ranks a run starts on one host or emulated cluster (--ranks), and so the largest
# count of a scaling series
MAX_LOCAL_RANKS = 512


def has_control(value: str) -> bool:
    """Whether ``value`` holds a control character (CONTROL), which no rule takes."""
    return _CONTROL.search(value) is not None


@dataclass(frozen=True)
class Refusal:
    """Values a rule refuses although its pattern takes them: those where ``pattern`` is found
    (re.search), unless ``unless`` is found too."""

    pattern: str
    unless: str = ""

    def applies(self, value: str) -> bool:
        return bool(re.search(self.pattern, value)) and not (
            self.unless and re.search(self.unless, value))

    def schema(self) -> dict[str, Any]:
        if not self.unless:
            return {"pattern": self.pattern}
        return {"allOf": [{"pattern": self.pattern}, {"not": {"pattern": self.unless}}]}


@dataclass(frozen=True)
class ValueRule:
    """A text value: ``pattern`` (unanchored) matches all of it, it is at most ``max_len``
    characters, holds no control character and meets none of ``refused``. ``what`` says in a
    message what a good value is."""

    what: str
    pattern: str
    max_len: int
    refused: tuple[Refusal, ...] = ()

    def ok(self, value: object) -> bool:
        return (isinstance(value, str) and len(value) <= self.max_len
                and not has_control(value) and re.fullmatch(self.pattern, value) is not None
                and not any(r.applies(value) for r in self.refused))

    def message(self, value: object, option: str) -> str:
        return f"{option} must be {self.what}, not {value!r}"

    def check(self, value: object, option: str) -> str:
        """The value, or a UsageError naming the option."""
        if not self.ok(value):
            raise UsageError(self.message(value, option))
        assert isinstance(value, str)
        return value

    def schema(self, *, optional: bool = False) -> dict[str, Any]:
        """The rule as a JSON schema (draft-07) of a string; ``optional``: "" too (the chart's
        "not set")."""
        out: dict[str, Any] = {"type": "string",
                               "pattern": f"^(?:{self.pattern}){'?' if optional else ''}$",
                               "maxLength": self.max_len}
        nots = [{"pattern": CONTROL}, *(r.schema() for r in self.refused)]
        out["not"] = nots[0] if len(nots) == 1 else {"anyOf": nots}
        return out


@dataclass(frozen=True)
class Checked:
    """A run option's check (fabbench.option_fields.Option.check) by a rule, declared as data
    so that the chart's schema states the same rule (fabbench.render.chart); ``first``: a check
    of the option's own, whose UsageError says more (a size sweep's parse)."""

    rule: ValueRule
    option: str
    first: Callable[[str], object] | None = None

    def __call__(self, value: str) -> str | None:
        if self.first is not None:
            self.first(value)
        return None if self.rule.ok(value) else self.rule.message(value, self.option)


def text(what: str = "text without control characters", max_len: int = 4096) -> ValueRule:
    """Any text of at least one character but control characters."""
    return ValueRule(what, f"{NOT_CONTROL}+", max_len)


TEXT = text()
ENV_VALUE = ValueRule("text without control characters", f"{NOT_CONTROL}*", 4096)

# Kubernetes: a DNS-1123 label (object names, pods' host names), a subdomain (a claim's name,
# a label key's prefix), a qualified name (a label key, a resource name: [prefix/]name, the name
# at most 63 characters), a label value (at most 63, may be empty)
_DNS_LABEL = "[a-z0-9](?:[-a-z0-9]{0,61}[a-z0-9])?"
_SUBDOMAIN = f"{_DNS_LABEL}(?:\\.{_DNS_LABEL})*"
_QUALIFIED = "[A-Za-z0-9](?:[-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"


def dns_label(max_len: int) -> ValueRule:
    return ValueRule(f"a DNS-1123 label (lower-case letters, digits and '-', starting and ending "
                f"with a letter or digit, at most {max_len} characters)", _DNS_LABEL, max_len)


# A name's longest form: the MPI operator names pods "<name>-launcher" and "<name>-worker-<i>",
# an Indexed Job "<name>-<index>-<suffix>"; 52 leaves room for those within 63.
MAX_NAME = 52
NAME = dns_label(MAX_NAME)
NAMESPACE = dns_label(63)
GROUP_NAME = dns_label(20)  # a health check's node group: in its CronJob's and Jobs' names
SUBDOMAIN = ValueRule("a DNS-1123 subdomain (DNS-1123 labels joined by '.', at most 253 "
                 "characters)", _SUBDOMAIN, 253)
# the prefix's 253 characters are not counted apart: the whole key is at most 253 + 1 + 63
QUALIFIED_NAME = ValueRule("a Kubernetes qualified name ([DNS-subdomain/]name, the name at most 63 "
                      "letters, digits and '-_.', starting and ending with a letter or digit), "
                      "such as nvidia.com/gpu", f"(?:{_SUBDOMAIN}/)?{_QUALIFIED}", 317)
LABEL_VALUE = ValueRule("a Kubernetes label value (at most 63 letters, digits and '-_.', starting "
                   "and ending with a letter or digit, or empty)", f"(?:{_QUALIFIED})?", 63)

# An image reference as container runtimes parse it (the distribution project's grammar):
# [registry/]path[:tag][@digest]. A first component is a registry only with a '.' or a port, or
# as localhost; else it is a path component. A digest is what the OCI image spec registers:
# sha256 (64 lower-case hex digits) or sha512 (128).
_COMPONENT = "[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_HOST_LABEL = "[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?"
_REGISTRY = (f"(?:{_HOST_LABEL}(?:\\.{_HOST_LABEL})+(?::[0-9]+)?|{_HOST_LABEL}:[0-9]+"
             "|localhost)")
_REPOSITORY = f"(?:{_REGISTRY}/)?{_COMPONENT}(?:/{_COMPONENT})*"
_TAG = "[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}"
_DIGEST = "sha256:[0-9a-f]{64}|sha512:[0-9a-f]{128}"
IMAGE_REPOSITORY = ValueRule("an image repository such as registry.example.org/fabbench",
                        _REPOSITORY, 255)
IMAGE_TAG = ValueRule("an image tag (letters, digits and '_.-', not starting with '.' or '-', "
                      "at most 128 characters)", _TAG, 128)
IMAGE_DIGEST = ValueRule("an image digest, sha256:<64 lower-case hex digits> (or sha512:<128>)",
                    f"(?:{_DIGEST})", 135)
IMAGE_REFERENCE = ValueRule("an image reference such as registry.example.org/fabbench:0.1.0-cpu or "
                       "REPO@sha256:<64 hex digits>",
                       f"{_REPOSITORY}(?::{_TAG})?(?:@(?:{_DIGEST}))?", 255 + 1 + 128 + 1 + 135)

# What reaches mpirun's command line: Open MPI's rsh launcher forwards MCA parameters to each
# node's orted over ssh, inside double quotes, where $, ` and \ are live. An interface name is
# what the kernel allows (at most 15 characters) less what a shell reads; an RDMA device's name
# is the driver's (mlx5_0, hfi1_0); an MCA value holds lists (',' ';'), exclusions ('^'), ports
# and CIDRs (':' '/'), never a quote, '$', '`', '\' or a space.
IFACE = ValueRule("a network interface name (1 to 15 letters, digits and '_.:@-')",
             "[A-Za-z0-9_.:@-]{1,15}", 15)
RDMA_DEVICE = ValueRule("an RDMA device name such as mlx5_0 (1 to 64 letters, digits and '_.-')",
                   "[A-Za-z0-9_.-]{1,64}", 64)
MCA_VALUE = ValueRule("an MCA value of letters, digits and '_.,:;^@/+=%-' (no quote, '$', '`', "
                 "'\\' or space: mpirun passes it to every node's shell)",
                 "[A-Za-z0-9_.,:;^@/+=%-]*", 4096)

# Kubernetes' quantity (resource.Quantity): a decimal number and a suffix, binary (Ki..Ei),
# decimal (m, k, M..E) or an exponent (e3, E-2); no sign, and not zero: a size of something
_NUMBER = "(?:[0-9]*[1-9][0-9]*(?:\\.[0-9]*)?|[0-9]*\\.[0-9]*[1-9][0-9]*)"
QUANTITY = ValueRule("a Kubernetes quantity above zero such as 1Gi, 512Mi or 2G",
                f"{_NUMBER}(?:[KMGTPE]i|[mkMGTPE]|[eE][-+]?[0-9]+)?", 64)

# A CronJob's schedule as Kubernetes reads it (robfig/cron's standard parser): a macro, or five
# fields (minute, hour, day of month, month, day of week), each a comma list of *, ? or a value
# or range, with a /step; months and days of the week also by their English names.
_MONTHS = "jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec"
_DAYS = "sun|mon|tue|wed|thu|fri|sat"


def _cron_field(value: str) -> str:
    item = f"(?:[*?]|(?:{value})(?:-(?:{value}))?)(?:/[1-9][0-9]{{0,2}})?"
    return f"{item}(?:,{item})*"


_CRON = " ".join(_cron_field(v) for v in (
    "[0-5]?[0-9]", "[01]?[0-9]|2[0-3]", "0?[1-9]|[12][0-9]|3[01]",
    f"0?[1-9]|1[0-2]|{_MONTHS}|{_MONTHS.upper()}", f"[0-6]|{_DAYS}|{_DAYS.upper()}"))
CRON = ValueRule("a cron schedule: five fields (minute hour day-of-month month day-of-week, "
                 "one space apart) or @hourly, @daily, @weekly, @monthly, @yearly (@annually, "
                 "@midnight)",
                 f"@(?:annually|yearly|monthly|weekly|daily|midnight|hourly)|{_CRON}", 256)

# Paths. A host path is mounted read-write into pods that may run as root (the MPIJob's): it is
# absolute and normalised (no '//', no trailing '/', no '.' or '..' component) and outside the
# system's directories: the root, every top-level system directory and anything under it, /var
# but /var/tmp/<dir>, and /tmp itself (a world-writable directory the node's programs share).
_PATH_COMPONENT = "[A-Za-z0-9._+@-]+"
_DOT_COMPONENT = Refusal("(?:^|/)\\.\\.?(?:/|$)")
SYSTEM_DIRS = ("bin", "boot", "dev", "etc", "home", "lib", "lib32", "lib64", "libx32",
               "lost+found", "opt", "proc", "root", "run", "sbin", "snap", "srv/kubernetes",
               "sys", "usr")
HOST_PATH = ValueRule(
    "a normalised absolute path on the nodes outside the system's directories (/, /etc, /usr, "
    "/var, /home, /root, /run, /proc, /sys, /dev, /boot, /opt, /lib*, /bin, /sbin and what is "
    "under them; /var/tmp/<dir> may be used), such as /srv/fabbench",
    f"(?:/{_PATH_COMPONENT})+", 1024,
    (_DOT_COMPONENT,
     Refusal(f"^/(?:{'|'.join(re.escape(d) for d in SYSTEM_DIRS)})(?:/|$)"),
     Refusal("^/var(?:/|$)", unless="^/var/tmp/"),
     Refusal("^/tmp$")))
CONTAINER_PATH = ValueRule("a normalised absolute path in the container (no '//', trailing '/', "
                           "'.' or '..' component)", f"(?:/{_PATH_COMPONENT})+", 1024,
                           (_DOT_COMPONENT,))

# Slurm #SBATCH values are read by sbatch, not by a shell: only plain tokens may reach them.
SLURM_TOKEN = ValueRule("letters, digits and '_.+,-'", "[A-Za-z0-9_.+,-]+", 256)
SLURM_TIME = ValueRule("a Slurm time (MINUTES, H:M:S, D-H:M:S)",
                  "(?:[0-9]+-)?[0-9]+(?::[0-9]{1,2}){0,2}", 32)

# A size sweep as `fabbench run --sizes` reads it (fabbench.units): MIN:MAX[:FACTOR] or a comma
# list of sizes, a size a number with a unit B, K, M, G (KB, KiB, ...; any case)
_SIZE = "[0-9]+(?:[BbKkMmGg]|[KkMmGg][Bb]|[KkMmGg][Ii][Bb])?"
SIZES = ValueRule("MIN:MAX[:FACTOR] or a comma list of sizes, units K/M/G (1024)",
             f"{_SIZE}:{_SIZE}(?::[0-9]+)?|{_SIZE}(?:,{_SIZE})*", 1024)
