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
from fabbench.render.labels import Api, figure_value, label_nodes, node_labels

VERDICT = {"format": "fabbench-verdict/1", "ok": False, "exit_code": 1, "rules": [], "nodes": [
    {"node": "fbn1", "status": "pass", "figure": 0.1172, "unit": "GB/s", "floor": 0.0947,
     "margin": 0.24, "rules": ["pairs-node-bw"]},
    {"node": "FBN3", "status": "fail", "figure": 0.031, "unit": "GB/s", "floor": 0.0947,
     "margin": -0.67, "rules": ["pairs-node-bw"]},
    {"node": "fbn4", "status": "not judged", "figure": None, "unit": "GB/s", "floor": None,
     "margin": None, "rules": []}]}


@contextmanager
def api_server(status: int = 200, answer: dict | None = None) -> Iterator[tuple[str, list]]:
    """A stand-in API on 127.0.0.1: every request recorded (method, path, headers, body), each
    answered with ``status`` and ``answer``."""
    seen: list[dict] = []

    class Handler(BaseHTTPRequestHandler):
        def do_PATCH(self) -> None:  # noqa: N802 (http.server's name)
            body = self.rfile.read(int(self.headers["Content-Length"]))
            seen.append({"method": "PATCH", "path": self.path, "headers": dict(self.headers),
                         "body": json.loads(body)})
            data = json.dumps(answer or {"kind": "Node"}).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

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
    assert out.splitlines()[1] == ("labelled node fbn3: health.example.org/verdict=fail "
                                   "health.example.org/figure=0.031GBps")


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
