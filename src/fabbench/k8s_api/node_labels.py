"""Node labels from a verdict, through the Kubernetes API (`fabbench floors label-nodes`, the
chart's health check; docs/guide.md): ``<prefix>/verdict`` (pass, fail, not-judged) and
``<prefix>/figure`` (the node's figure with its unit; removed when there is none), a node
condition (FabricHealthy by default: True, False with the failed rule's id, Unknown), and with
``taint`` the taint ``<prefix>/fabric=fail`` on a failed node. From inside the pod, with urllib
only and a deadline on every request; the chart's ClusterRole allows get and patch of nodes and
nodes/status, nothing else. A dry run says what would change; each failure is one line and does
not stop the other nodes."""

from __future__ import annotations

import json
import math
import os
import re
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fabbench.errors import UsageError

if TYPE_CHECKING:
    import ssl
    import urllib.error

VERDICT_FORMAT = "fabbench-verdict/1"  # what `fabbench floors verify --json` writes
DEFAULT_PREFIX = "fabbench.dev"
SERVICE_ACCOUNT = Path("/var/run/secrets/kubernetes.io/serviceaccount")  # token, ca.crt
API_ENV = "FABBENCH_KUBE_API"  # the API's base URL instead of the pod's cluster (tests)
TIMEOUT_S = 10.0
PATCH_TYPE = "application/merge-patch+json"  # RFC 7386: a null value removes the label
FIELD_MANAGER = "fabbench"

VERDICTS = {"pass": "pass", "fail": "fail", "not judged": "not-judged"}  # verdict -> label
CONDITION_TYPE = "FabricHealthy"
CONDITION_STATUS = {"pass": "True", "fail": "False", "not judged": "Unknown"}
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
STRATEGIC = "application/strategic-merge-patch+json"  # status.conditions merge by type
_DNS_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_NAME = r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?"  # a label's value, a qualified name's name
DNS_SUBDOMAIN = re.compile(rf"^{_DNS_LABEL}(\.{_DNS_LABEL})*$")  # a prefix, a node's name
LABEL_VALUE = re.compile(rf"^({_NAME})?$")
# a condition's type: an optional DNS-subdomain prefix and a name, as Kubernetes' own checks
CONDITION_NAME = re.compile(rf"^({_DNS_LABEL}(\.{_DNS_LABEL})*/)?{_NAME}$")
_UNIT_WORDS = (("/s", "ps"), ("/", "p"), ("%", "pct"), ("µ", "u"), ("μ", "u"), (" ", ""))


@dataclass(frozen=True, kw_only=True)
class NodeLabels:
    """What one node gets: its name and labels (None: the label is removed)."""

    node: str
    labels: Mapping[str, str | None]
    status: str = "not judged"  # the verdict: pass, fail, not judged
    reason: str = "NotJudged"   # the condition's reason
    message: str = ""           # the condition's message: the deciding verdict line

    def text(self) -> str:
        return " ".join(f"{k}={'(removed)' if v is None else v}" for k, v in self.labels.items())


def figure_value(figure: float, unit: str) -> str:
    """A figure and its unit as a label value (at most 63 of [A-Za-z0-9._-], starting and
    ending with a letter or digit): 0.117 "GB/s" -> 0.117GBps, 12.5 "us" -> 12.5us. Four
    significant digits; an exponent without its '+'; a negative figure as minus<figure>."""
    if not math.isfinite(figure):
        number = "nan" if math.isnan(figure) else "inf"
    else:
        number = f"{abs(figure):.4g}".replace("e+", "e")
    for old, new in _UNIT_WORDS:
        unit = unit.replace(old, new)
    unit = re.sub(r"[^A-Za-z0-9._-]", "", unit)
    text = ("minus" if figure < 0 else "") + number + unit
    text = text[:63].rstrip("._-")
    assert LABEL_VALUE.fullmatch(text), text  # built from characters a label value allows
    return text


def node_labels(verdict: Mapping[str, Any], prefix: str = DEFAULT_PREFIX) -> list[NodeLabels]:
    """The labels of every node the verdict names (`fabbench floors verify --json`'s "nodes"),
    by node name in lower case: the name the records give each rank's host, which in the chart's
    pods is the Kubernetes node's (FABBENCH_NODE_NAME, from spec.nodeName; launch.world)."""
    check_prefix(prefix)
    if not isinstance(verdict, Mapping) or verdict.get("format") != VERDICT_FORMAT:
        found = verdict.get("format") if isinstance(verdict, Mapping) else type(verdict).__name__
        raise UsageError(f"not a verdict of `fabbench verify --json` (format {VERDICT_FORMAT}): "
                         f"format is {found!r}")
    nodes = verdict.get("nodes")
    if not isinstance(nodes, list):
        raise UsageError("the verdict has no list of nodes")
    out = []
    for entry in nodes:
        if not isinstance(entry, Mapping) or not isinstance(entry.get("node"), str):
            raise UsageError(f"a node of the verdict without its name: {entry!r}")
        name, status, figure = entry["node"].lower(), entry.get("status"), entry.get("figure")
        if len(name) > 253 or not DNS_SUBDOMAIN.fullmatch(name):
            raise UsageError(f"node {entry['node']!r} of the verdict cannot be a Kubernetes "
                             "node's name")
        if status not in VERDICTS:
            raise UsageError(f"node {name}: status {status!r} is none of "
                             f"{', '.join(VERDICTS)}")
        if figure is not None and (isinstance(figure, bool)
                                   or not isinstance(figure, int | float)):
            raise UsageError(f"node {name}: figure {figure!r} is not a number")
        value = None if figure is None else figure_value(float(figure),
                                                         str(entry.get("unit") or ""))
        rules = [r for r in entry.get("rules") or () if isinstance(r, str)]
        reason = {"pass": "AllRulesPassed", "not judged": "NotJudged"}.get(
            status, camel(rules[-1]) if rules else "RuleFailed")
        out.append(NodeLabels(node=name, labels={f"{prefix}/verdict": VERDICTS[status],
                                                 f"{prefix}/figure": value},
                              status=status, reason=reason,
                              message=str(entry.get("line") or "")[:1024]))
    return out


def camel(rule_id: str) -> str:
    """A rule's id as a condition's reason (CamelCase, letters and digits): pairs-node-bw ->
    PairsNodeBw; one that starts with a digit gets "Rule" before it."""
    words = [w for w in re.split(r"[^A-Za-z0-9]+", rule_id) if w]
    text = "".join(w[:1].upper() + w[1:] for w in words) or "RuleFailed"
    return text if text[0].isalpha() else f"Rule{text}"


def check_condition_type(name: str) -> str:
    if len(name) > 316 or not CONDITION_NAME.fullmatch(name):
        raise UsageError(f"--condition must be a condition type such as {CONDITION_TYPE} (letters, "
                         f"digits, '-', '_', '.', optionally after a DNS prefix and '/'), "
                         f"not {name!r}")
    return name


def check_prefix(prefix: str) -> str:
    if len(prefix) > 253 or not DNS_SUBDOMAIN.fullmatch(prefix):
        raise UsageError(f"--prefix must be a DNS subdomain such as {DEFAULT_PREFIX} (lower-case "
                         f"letters, digits, '-' and '.'), not {prefix!r}")
    return prefix


def read_verdict(path: str | os.PathLike[str]) -> dict[str, Any]:
    try:
        data = json.loads(Path(path).read_text())
    except OSError as exc:
        raise UsageError(f"cannot read the verdict {path}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise UsageError(f"the verdict {path} is not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise UsageError(f"the verdict {path} is not a JSON object")
    return data


class ApiError(Exception):
    """A request the API refused or did not answer: one line, naming the node."""


@dataclass(frozen=True, kw_only=True)
class Api:
    """Where and how to reach the Kubernetes API."""

    base: str
    token: str | None = None
    context: ssl.SSLContext | None = None
    timeout_s: float = TIMEOUT_S

    @classmethod
    def from_pod(cls, base: str | None = None, *, timeout_s: float = TIMEOUT_S,
                 env: Mapping[str, str] | None = None,
                 account: Path = SERVICE_ACCOUNT) -> Api:
        """The API of the cluster this pod runs in, with its service account's token and CA;
        ``base`` (or $FABBENCH_KUBE_API) instead: that URL, with the token and CA when the pod
        has them."""
        import ssl

        env = os.environ if env is None else env
        if not timeout_s > 0:
            raise UsageError(f"--timeout must be above 0 seconds, not {timeout_s}")
        base = base or env.get(API_ENV)
        token_file, ca_file = account / "token", account / "ca.crt"
        if not base:
            host, port = env.get("KUBERNETES_SERVICE_HOST"), env.get("KUBERNETES_SERVICE_PORT")
            if not host or not port:
                raise UsageError("not in a Kubernetes pod (KUBERNETES_SERVICE_HOST and _PORT are "
                                 f"not set): give the API's URL with --api or ${API_ENV}")
            if not token_file.is_file():
                raise UsageError(f"no service account token at {token_file}: the pod needs one "
                                 "(automountServiceAccountToken)")
            base = f"https://[{host}]:{port}" if ":" in host else f"https://{host}:{port}"
        parsed = urllib.parse.urlsplit(base)
        if parsed.scheme not in ("http", "https") or not parsed.netloc:
            raise UsageError(f"the API's URL must be http(s)://HOST[:PORT], not {base!r}")
        try:
            token = token_file.read_text().strip() if token_file.is_file() else None
            context = None
            if parsed.scheme == "https":
                context = ssl.create_default_context(
                    cafile=str(ca_file) if ca_file.is_file() else None)
        except (OSError, ssl.SSLError) as exc:
            raise UsageError(f"cannot read the service account's token or CA in {account}: "
                             f"{exc}") from None
        return cls(base=base.rstrip("/"), token=token, context=context, timeout_s=timeout_s)

    def patch_labels(self, node: NodeLabels) -> None:
        """One merge patch of the node's labels; ApiError with one line when it fails."""
        self._call("PATCH", node.node, "", {"metadata": {"labels": dict(node.labels)}},
                   PATCH_TYPE, "not labelled")

    def get(self, node: str) -> dict[str, Any]:
        return self._call("GET", node, "", None, "", "not read")

    def patch_condition(self, node: str, condition: Mapping[str, str]) -> dict[str, Any]:
        """The condition merged into the node's status by its type (strategic merge); the node
        as the API answers (its new resourceVersion)."""
        return self._call("PATCH", node, "/status",
                          {"status": {"conditions": [dict(condition)]}}, STRATEGIC,
                          "condition not set")

    def put_taints(self, node: str, taints: list[dict[str, Any]], version: str) -> None:
        """The node's whole list of taints, if it is still at ``version`` (409 otherwise)."""
        body: dict[str, Any] = {"spec": {"taints": taints or None}}
        if version:
            body["metadata"] = {"resourceVersion": version}
        self._call("PATCH", node, "", body, PATCH_TYPE, "taints not set")

    def _call(self, method: str, node: str, sub: str, body: Any, content_type: str,
              failed: str) -> dict[str, Any]:
        import urllib.error
        import urllib.request

        url = f"{self.base}/api/v1/nodes/{urllib.parse.quote(node, safe='')}{sub}"
        if method == "PATCH":
            url += f"?fieldManager={FIELD_MANAGER}"
        headers = {"Accept": "application/json"}
        if content_type:
            headers["Content-Type"] = content_type
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(url, data=data, headers=headers, method=method)
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s,
                                        context=self.context) as answer:
                text = answer.read()
        except urllib.error.HTTPError as exc:
            raise ApiError(f"node {node}: {failed}: HTTP {exc.code} "
                           f"{exc.reason}: {_status_message(exc)}") from None
        except urllib.error.URLError as exc:
            raise ApiError(f"node {node}: {failed}: cannot reach the Kubernetes API at "
                           f"{self.base}: {exc.reason}") from None
        except TimeoutError:
            raise ApiError(f"node {node}: {failed}: no answer from the Kubernetes API "
                           f"at {self.base} within {self.timeout_s:g} s") from None
        except OSError as exc:  # a connection reset mid-answer
            raise ApiError(f"node {node}: {failed}: {exc}") from None
        try:
            answer_json = json.loads(text or b"{}")
        except ValueError:
            answer_json = {}
        return answer_json if isinstance(answer_json, dict) else {}


def _status_message(exc: urllib.error.HTTPError) -> str:
    """The API's own sentence (a Status object's message), else the start of its answer."""
    try:
        text = exc.read(4096).decode(errors="replace")
    except (OSError, TimeoutError):
        return "(no answer body)"
    try:
        message = json.loads(text).get("message")
    except (ValueError, AttributeError):
        message = None
    return " ".join(str(message or text or "(no answer body)").split())[:300]


@dataclass(frozen=True, kw_only=True)
class Labelled:
    """What label_nodes did: the nodes labelled, one line per change to a node's condition or
    taints (``said``; in a dry run, what would change), and one line per node that failed."""

    done: tuple[NodeLabels, ...]
    failures: tuple[str, ...]
    said: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class Health:
    """How a verdict acts on nodes beyond their labels."""

    condition: str = CONDITION_TYPE  # the condition's type; "" sets none
    taint: bool = False              # taint failed nodes <prefix>/fabric=fail:EFFECT
    effect: str = "NoSchedule"
    dry_run: bool = False


def label_nodes(verdict: Mapping[str, Any], api: Api, prefix: str = DEFAULT_PREFIX,
                health: Health | None = None, now: str | None = None) -> Labelled:
    """Every node of the verdict labelled, its condition set and its taint added or removed
    (each node tried, whatever the others did)."""
    import datetime

    health = health or Health()
    if health.condition:
        check_condition_type(health.condition)
    if health.effect not in TAINT_EFFECTS:
        raise UsageError(f"--taint-effect must be one of {', '.join(TAINT_EFFECTS)}, "
                         f"not {health.effect!r}")
    now = now or datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    done, failures, said = [], [], []
    for node in node_labels(verdict, prefix):
        try:
            if health.dry_run:
                said.append(f"dry run: node {node.node}: would set {node.text()}")
            else:
                api.patch_labels(node)
            if health.condition or health.taint or node.status == "pass":
                said += _act(api, node, prefix, health, now)
        except ApiError as exc:
            failures.append(str(exc))
        else:
            done.append(node)
    return Labelled(done=tuple(done), failures=tuple(failures), said=tuple(said))


def _act(api: Api, node: NodeLabels, prefix: str, health: Health, now: str) -> list[str]:
    """The node's condition and taint brought in line with its verdict: one line per change."""
    current = api.get(node.node)
    said = []
    dry = health.dry_run
    if health.condition:
        status = CONDITION_STATUS[node.status]
        old = next((c for c in (current.get("status") or {}).get("conditions") or ()
                    if isinstance(c, dict) and c.get("type") == health.condition), {})
        condition = {"type": health.condition, "status": status, "reason": node.reason,
                     "message": node.message or f"fabbench verdict: {node.status}",
                     "lastHeartbeatTime": now,
                     "lastTransitionTime": old.get("lastTransitionTime", now)
                     if old.get("status") == status else now}
        if not health.dry_run:
            answer = api.patch_condition(node.node, condition)
            if (answer.get("metadata") or {}).get("resourceVersion"):
                current = answer  # the version the taints' patch must name
        what = f"condition {health.condition}={status} ({node.reason})"
        said.append(f"dry run: node {node.node}: would set {what}" if dry
                    else f"node {node.node}: {what}")
    key = f"{prefix}/fabric"
    taints = [t for t in (current.get("spec") or {}).get("taints") or () if isinstance(t, dict)]
    ours = [t for t in taints if t.get("key") == key]
    if node.status == "fail" and health.taint and not ours:
        wanted = [*taints, {"key": key, "value": "fail", "effect": health.effect}]
        verb, taint = "add", f"{key}=fail:{health.effect}"
    elif node.status == "pass" and ours:
        wanted = [t for t in taints if t.get("key") != key]
        verb, taint = "remove", key
    else:
        return said
    if not dry:
        version = str((current.get("metadata") or {}).get("resourceVersion") or "")
        api.put_taints(node.node, wanted, version)
    done = {"add": "added", "remove": "removed"}[verb]
    said.append(f"dry run: node {node.node}: would {verb} taint {taint}" if dry
                else f"node {node.node}: taint {taint} {done}")
    return said
