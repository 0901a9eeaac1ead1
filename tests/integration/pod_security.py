"""Kubernetes' Pod Security Standards (baseline and restricted, as of Kubernetes 1.36), checked on
a pod spec here, without a cluster: what the chart's and `fabbench render k8s`'s pods are held
to (docs/security.md). The cluster's own admission checks the same on the cluster
(test_k8s_chart.py)."""

from __future__ import annotations

from collections.abc import Iterator

LEVELS = ("privileged", "baseline", "restricted")  # loosest first
# baseline: the capabilities a container may add (the runtime's defaults)
BASELINE_CAPABILITIES = {"AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL",
                         "MKNOD", "NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP", "SETUID",
                         "SYS_CHROOT"}
RESTRICTED_VOLUMES = {"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral",
                      "persistentVolumeClaim", "projected", "secret"}


def containers(spec: dict) -> Iterator[dict]:
    yield from spec.get("initContainers") or ()
    yield from spec.get("containers") or ()


def violations(spec: dict, level: str) -> list[str]:
    """What of the pod spec ``spec`` Pod Security ``level`` refuses (empty: admitted)."""
    if level == "privileged":
        return []
    out = _baseline(spec)
    if level == "restricted":
        out += _restricted(spec)
    return out


def lowest_level(spec: dict) -> str:
    """The strictest level that admits the pod."""
    return [lv for lv in LEVELS if not violations(spec, lv)][-1]


def _baseline(spec: dict) -> list[str]:
    out = [f"{k}=true" for k in ("hostNetwork", "hostPID", "hostIPC") if spec.get(k)]
    out += [f"hostPath volume {v['name']}" for v in spec.get("volumes") or () if "hostPath" in v]
    pod_seccomp = (spec.get("securityContext") or {}).get("seccompProfile", {}).get("type")
    if pod_seccomp == "Unconfined":
        out.append("pod seccompProfile Unconfined")
    for c in containers(spec):
        sc = c.get("securityContext") or {}
        if sc.get("privileged"):
            out.append(f"{c['name']}: privileged")
        added = set((sc.get("capabilities") or {}).get("add") or ()) - BASELINE_CAPABILITIES
        if added:
            out.append(f"{c['name']}: non-default capabilities {sorted(added)}")
        if (sc.get("seccompProfile") or {}).get("type") == "Unconfined":
            out.append(f"{c['name']}: seccompProfile Unconfined")
        if sc.get("procMount", "Default") != "Default":
            out.append(f"{c['name']}: procMount")
        out += [f"{c['name']}: hostPort" for p in c.get("ports") or () if p.get("hostPort")]
    return out


def _restricted(spec: dict) -> list[str]:
    pod = spec.get("securityContext") or {}
    out = [f"volume {v['name']} of a restricted type" for v in spec.get("volumes") or ()
           if not set(v) - {"name"} <= RESTRICTED_VOLUMES]
    if pod.get("runAsUser") == 0:
        out.append("pod runAsUser=0")
    for c in containers(spec):
        sc = c.get("securityContext") or {}
        name = c["name"]
        if sc.get("allowPrivilegeEscalation") is not False:
            out.append(f"{name}: allowPrivilegeEscalation != false")
        caps = sc.get("capabilities") or {}
        if "ALL" not in (caps.get("drop") or ()):
            out.append(f"{name}: capabilities not drop ALL")
        if set(caps.get("add") or ()) - {"NET_BIND_SERVICE"}:
            out.append(f"{name}: capabilities add {caps['add']}")
        if sc.get("runAsNonRoot", pod.get("runAsNonRoot")) is not True:
            out.append(f"{name}: runAsNonRoot != true")
        if sc.get("runAsUser") == 0:
            out.append(f"{name}: runAsUser=0")
        seccomp = (sc.get("seccompProfile") or pod.get("seccompProfile") or {}).get("type")
        if seccomp not in ("RuntimeDefault", "Localhost"):
            out.append(f"{name}: seccompProfile {seccomp}")
    return out
