"""`fabbench label-nodes`: a verdict's nodes labelled through the Kubernetes API, here a local
HTTP server on 127.0.0.1 standing for it (--api): one JSON merge patch per node with the
verdict and the figure as label values, the service account's token sent; a refusal (403), an
API that does not answer and bad input are one line each, with a non-zero exit."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from conftest import cli
from fabbench.errors import UsageError
from fabbench.k8s_api.node_labels import Api, figure_value, label_nodes, node_labels

VERDICT = {"format": "fabbench-verdict/1", "ok": False, "exit_code": 1, "rules": [], "nodes": [
    {"node": "fbn1", "status": "pass", "figure": 0.1172, "unit": "GB/s", "floor": 0.0947,
     "margin": 0.24, "rules": ["pairs-node-bw"]},
    {"node": "FBN3", "status": "fail", "figure": 0.031, "unit": "GB/s", "floor": 0.0947,
     "margin": -0.67, "rules": ["pairs-node-bw"],
     "line": "FAIL       node fbn3: sendrecv 8M: pairs bw 0.031 GB/s, floor 0.0947 GB/s"},
    {"node": "fbn4", "status": "not judged", "figure": None, "unit": "GB/s", "floor": None,
     "margin": None, "rules": []}]}


@contextmanager
def api_server(status: int = 200, answer: dict | None = None,
               nodes: dict[str, dict] | None = None) -> Iterator[tuple[str, list]]:
    """A stand-in API on 127.0.0.1: every request recorded (method, path, headers, body). With
    ``status`` other than 200 each is answered with it and ``answer``; else it keeps nodes
    (``nodes``: name -> node object, made on first sight): GET a node, PATCH its labels or
    taints (a merge patch; 409 when its resourceVersion is not the node's), PATCH its status
    (conditions merged by type)."""
    seen: list[dict] = []
    kept = nodes if nodes is not None else {}

    def node(name: str) -> dict:
        return kept.setdefault(name, {"metadata": {"name": name, "resourceVersion": "1",
                                                   "labels": {}},
                                      "spec": {}, "status": {"conditions": []}})

    class Handler(BaseHTTPRequestHandler):
        def _answer(self, code: int, data: dict) -> None:
            text = json.dumps(data).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(text)))
            self.end_headers()
            self.wfile.write(text)

        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            seen.append({"method": "GET", "path": self.path, "headers": dict(self.headers)})
            if status != 200:
                return self._answer(status, answer or {})
            self._answer(200, node(self.path.split("/")[4].split("?")[0]))

        def do_PATCH(self) -> None:  # noqa: N802 (http.server's name)
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            seen.append({"method": "PATCH", "path": self.path, "headers": dict(self.headers),
                         "body": body})
            if status != 200:
                return self._answer(status, answer or {"kind": "Node"})
            parts = self.path.split("?")[0].split("/")
            n = node(parts[4])
            if parts[-1] == "status":
                conditions = [c for c in n["status"]["conditions"]
                              if c["type"] not in {x["type"] for x in body["status"]["conditions"]}]
                n["status"]["conditions"] = conditions + body["status"]["conditions"]
            elif "spec" in body:
                want = body.get("metadata", {}).get("resourceVersion")
                if want is not None and want != n["metadata"]["resourceVersion"]:
                    return self._answer(409, {"kind": "Status", "message": "conflict"})
                n["spec"]["taints"] = body["spec"]["taints"] or []
            else:
                n["metadata"]["labels"].update(body["metadata"]["labels"])
            n["metadata"]["resourceVersion"] = str(int(n["metadata"]["resourceVersion"]) + 1)
            self._answer(200, n)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()


def write_verdict(tmp_path, verdict: dict = VERDICT) -> str:
    path = tmp_path / "verdict.json"
    path.write_text(json.dumps(verdict))
    return str(path)


def test_each_node_gets_one_merge_patch_of_its_verdict_and_figure(tmp_path, capsys):
    with api_server() as (url, seen):
        code, out, err = cli(capsys, "label-nodes", write_verdict(tmp_path), "--api", url,
                             "--prefix", "health.example.org")
    assert code == 0, err
    seen = [r for r in seen if r["method"] == "PATCH" and "labels" in r["body"].get(
        "metadata", {})]
    assert [r["path"] for r in seen] == [f"/api/v1/nodes/{n}?fieldManager=fabbench"
                                         for n in ("fbn1", "fbn3", "fbn4")]
    assert {r["headers"]["Content-Type"] for r in seen} == {"application/merge-patch+json"}
    assert [r["body"] for r in seen] == [
        {"metadata": {"labels": {"health.example.org/verdict": "pass",
                                 "health.example.org/figure": "0.1172GBps"}}},
        {"metadata": {"labels": {"health.example.org/verdict": "fail",
                                 "health.example.org/figure": "0.031GBps"}}},
        {"metadata": {"labels": {"health.example.org/verdict": "not-judged",
                                 "health.example.org/figure": None}}}]  # a stale figure removed
    assert ("labelled node fbn3: health.example.org/verdict=fail "
            "health.example.org/figure=0.031GBps") in out.splitlines()


def test_the_service_accounts_token_is_sent(tmp_path):
    (tmp_path / "token").write_text("s3cret\n")
    with api_server() as (url, seen):
        api = Api.from_pod(url, env={}, account=tmp_path)
        done = label_nodes(VERDICT, api)
    assert len(done.done) == 3 and not done.failures
    assert {r["headers"]["Authorization"] for r in seen} == {"Bearer s3cret"}


def test_a_refusal_is_one_line_and_a_failure(tmp_path, capsys):
    refusal = {"kind": "Status", "status": "Failure", "reason": "Forbidden", "code": 403,
               "message": 'nodes "fbn1" is forbidden: User "system:serviceaccount:bench:fb" '
                          'cannot patch resource "nodes" in API group "" at the cluster scope'}
    one = {**VERDICT, "nodes": VERDICT["nodes"][:1]}
    with api_server(403, refusal) as (url, _):
        code, out, err = cli(capsys, "label-nodes", write_verdict(tmp_path, one), "--api", url)
    assert code == 1 and out == ""
    assert err == ("fabbench: error: node fbn1: not labelled: HTTP 403 Forbidden: nodes "
                   '"fbn1" is forbidden: User "system:serviceaccount:bench:fb" cannot patch '
                   'resource "nodes" in API group "" at the cluster scope\n')


def test_an_api_that_does_not_answer_is_one_line_within_the_deadline(tmp_path, capsys):
    with socket.socket() as silent:  # accepts (the kernel's backlog), never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(4)
        url = f"http://127.0.0.1:{silent.getsockname()[1]}"
        one = {**VERDICT, "nodes": VERDICT["nodes"][:1]}
        start = time.monotonic()
        code, out, err = cli(capsys, "label-nodes", write_verdict(tmp_path, one), "--api", url,
                             "--timeout", "0.3")
    assert time.monotonic() - start < 5
    assert code == 1 and out == ""
    assert err == (f"fabbench: error: node fbn1: not labelled: no answer from the Kubernetes API "
                   f"at {url} within 0.3 s\n")


def test_an_api_that_is_not_there_is_one_line_per_node(tmp_path, capsys):
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{closed.getsockname()[1]}"  # bound, not listening: refused
        code, _, err = cli(capsys, "label-nodes", write_verdict(tmp_path), "--api", url)
    assert code == 1 and err.count("\n") == 3
    assert all("cannot reach the Kubernetes API" in line for line in err.splitlines())


@pytest.mark.parametrize("figure,unit,value", [
    (0.1172, "GB/s", "0.1172GBps"), (12.5, "us", "12.5us"), (123456789.0, "B/s", "1.235e08Bps"),
    (1e-7, "s", "1e-07s"), (-0.5, "%", "minus0.5pct"), (3.0, "µs", "3us"), (7.0, "", "7"),
    (1.0, "Gb/s per node", "1Gbpspernode"), (2.0, "x" * 80, "2" + "x" * 62)])
def test_figures_become_label_values(figure, unit, value):
    assert figure_value(figure, unit) == value


def test_not_in_a_pod_without_an_url(tmp_path):
    with pytest.raises(UsageError, match="not in a Kubernetes pod"):
        Api.from_pod(env={}, account=tmp_path)
    with pytest.raises(UsageError, match="no service account token"):
        Api.from_pod(env={"KUBERNETES_SERVICE_HOST": "10.0.0.1", "KUBERNETES_SERVICE_PORT": "443"},
                     account=tmp_path)
    (tmp_path / "token").write_text("t")
    api = Api.from_pod(env={"KUBERNETES_SERVICE_HOST": "fd00::1",
                            "KUBERNETES_SERVICE_PORT": "443"}, account=tmp_path)
    assert api.base == "https://[fd00::1]:443" and api.token == "t" and api.context is not None


@pytest.mark.parametrize("change,message", [
    ({"format": "fabbench-floors/1"}, "not a verdict"),
    ({"nodes": [{"node": "a_b", "status": "pass", "figure": 1, "unit": "s"}]},
     "cannot be a Kubernetes node's name"),
    ({"nodes": [{"node": "a", "status": "great", "figure": 1, "unit": "s"}]}, "status 'great'"),
    ({"nodes": [{"node": "a", "status": "pass", "figure": "1", "unit": "s"}]}, "not a number"),
])
def test_bad_verdicts_are_refused(change, message):
    with pytest.raises(UsageError, match=message):
        node_labels({**VERDICT, **change})


def test_bad_input_is_one_line_exit_2(tmp_path, capsys):
    for args in (["--prefix", "Not/A/Prefix"], ["--api", "ftp://x"]):
        code, out, err = cli(capsys, "label-nodes", write_verdict(tmp_path), *args)
        assert code == 2 and out == "" and err.count("\n") == 1, (args, err)
    code, _, err = cli(capsys, "label-nodes", str(tmp_path / "none.json"), "--api", "http://x")
    assert code == 2 and "cannot read the verdict" in err


def conditions(node: dict) -> dict[str, dict]:
    return {c["type"]: c for c in node["status"]["conditions"]}


def test_conditions_say_why_and_a_failed_node_is_tainted(tmp_path, capsys):
    nodes: dict[str, dict] = {}
    with api_server(nodes=nodes) as (url, _):
        code, out, err = cli(capsys, "label-nodes", write_verdict(tmp_path), "--api", url,
                             "--taint")
    assert code == 0, err
    bad = conditions(nodes["fbn3"])["FabricHealthy"]
    assert (bad["status"], bad["reason"]) == ("False", "PairsNodeBw")
    assert bad["message"].startswith("FAIL       node fbn3: sendrecv 8M")
    assert nodes["fbn3"]["spec"]["taints"] == [
        {"key": "fabbench.dev/fabric", "value": "fail", "effect": "NoSchedule"}]
    good, unknown = (conditions(nodes[n])["FabricHealthy"] for n in ("fbn1", "fbn4"))
    assert (good["status"], good["reason"]) == ("True", "AllRulesPassed")
    assert (unknown["status"], unknown["reason"]) == ("Unknown", "NotJudged")
    assert not nodes["fbn1"]["spec"].get("taints") and not nodes["fbn4"]["spec"].get("taints")
    assert "node fbn3: taint fabbench.dev/fabric=fail:NoSchedule added" in out
    assert "node fbn3: condition FabricHealthy=False (PairsNodeBw)" in out


def test_a_pass_removes_the_taint_and_keeps_the_transition_time(tmp_path, capsys):
    other = {"key": "gpu.example.com/broken", "effect": "NoExecute"}
    before = {"type": "FabricHealthy", "status": "True", "reason": "AllRulesPassed",
              "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z",
              "lastHeartbeatTime": "2026-01-01T00:00:00Z"}
    nodes = {"fbn1": {"metadata": {"name": "fbn1", "resourceVersion": "7", "labels": {}},
                      "spec": {"taints": [other, {"key": "fabbench.dev/fabric", "value": "fail",
                                                  "effect": "NoSchedule"}]},
                      "status": {"conditions": [before]}}}
    one = {**VERDICT, "nodes": VERDICT["nodes"][:1]}
    with api_server(nodes=nodes) as (url, seen):
        code, out, err = cli(capsys, "label-nodes", write_verdict(tmp_path, one), "--api", url)
    assert code == 0, err
    assert nodes["fbn1"]["spec"]["taints"] == [other]  # ours gone, without --taint too
    (taints,) = [r for r in seen if "spec" in r.get("body", {})]
    # the version the status patch answered (labels 7 -> 8, status 8 -> 9): no 409
    assert taints["body"]["metadata"] == {"resourceVersion": "9"}
    after = conditions(nodes["fbn1"])["FabricHealthy"]
    assert after["lastTransitionTime"] == "2026-01-01T00:00:00Z"  # still True
    assert after["lastHeartbeatTime"] != "2026-01-01T00:00:00Z"
    assert "node fbn1: taint fabbench.dev/fabric remove" in out


def test_a_dry_run_reads_and_says_and_writes_nothing(tmp_path, capsys):
    nodes: dict[str, dict] = {}
    with api_server(nodes=nodes) as (url, seen):
        code, out, err = cli(capsys, "label-nodes", write_verdict(tmp_path), "--api", url,
                             "--taint", "--dry-run")
    assert code == 0, err
    assert {r["method"] for r in seen} == {"GET"}
    assert "dry run: node fbn3: would add taint fabbench.dev/fabric=fail:NoSchedule" in out
    assert "dry run: node fbn3: would set condition FabricHealthy=False (PairsNodeBw)" in out
    assert "labelled" not in out


@pytest.mark.parametrize("args,message", [
    (["--condition", "Fabric Healthy"], "--condition must be a condition type"),
    (["--taint-effect", "NoWay"], "--taint-effect must be one of NoSchedule"),
])
def test_a_bad_condition_or_effect_is_one_line_exit_2(tmp_path, capsys, args, message):
    with api_server() as (url, seen):
        code, out, err = cli(capsys, "label-nodes", write_verdict(tmp_path), "--api", url, *args)
    assert code == 2 and out == "" and err.count("\n") == 1 and message in err, err
    assert seen == []  # refused before any request
