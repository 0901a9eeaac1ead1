"""`fabbench floors label-nodes`: a verdict's nodes labelled through the Kubernetes API (the
chart's health check). Parsing only; fabbench.k8s_api.node_labels labels."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from fabbench.k8s_api.node_labels import API_ENV, CONDITION_TYPE, DEFAULT_PREFIX, TIMEOUT_S


def label_nodes(
    verdict: Annotated[Path, typer.Argument(
        help="The verdict `fabbench floors verify --json` wrote.", show_default=False)],
    prefix: Annotated[str, typer.Option(
        help="The labels' prefix: <prefix>/verdict, <prefix>/figure.")] = DEFAULT_PREFIX,
    api: Annotated[str | None, typer.Option(
        metavar="URL", envvar=API_ENV, show_default=False,
        help="The Kubernetes API's URL. Default: the cluster of the pod this runs in, with its "
        "service account's token and CA.")] = None,
    timeout: Annotated[float, typer.Option(help="Seconds each request may take.")] = TIMEOUT_S,
    condition: Annotated[str, typer.Option(
        help="The node condition that says why: True (AllRulesPassed), False (the failed "
        "rule's id in CamelCase, its FAIL line as message) or Unknown; '' sets none.")
    ] = CONDITION_TYPE,
    taint: Annotated[bool, typer.Option(
        "--taint", help="Taint each failed node <prefix>/fabric=fail (the taint is removed "
        "from a node that passes, with or without this).")] = False,
    taint_effect: Annotated[str, typer.Option(
        help="The taint's effect: NoSchedule, PreferNoSchedule or NoExecute.")] = "NoSchedule",
    dry_run: Annotated[bool, typer.Option(
        "--dry-run", help="Say what would change; change nothing.")] = False,
) -> None:
    """Label, condition and taint the nodes a verdict judged (the chart's health check).

    Each node gets its verdict (pass, fail, not-judged) and figure as labels and a condition,
    and with --taint a taint when it failed, from inside a pod whose service account may get
    and patch nodes and nodes/status (the chart's health check does this after `fabbench
    floors verify`). Exit code 0: every node done; 1: a node was not (one line
    each); 2: bad input.

    Examples:
        fabbench floors label-nodes /tmp/verdict.json --prefix fabbench.dev --taint
        fabbench floors label-nodes verdict.json --api http://127.0.0.1:8001
            --dry-run  # what would change, through `kubectl proxy`
    """
    from fabbench.k8s_api.node_labels import Api, Health, label_nodes, read_verdict

    health = Health(condition=condition, taint=taint, effect=taint_effect, dry_run=dry_run)
    done = label_nodes(read_verdict(verdict), Api.from_pod(api, timeout_s=timeout), prefix,
                       health)
    for node in done.done:
        if not dry_run:
            print(f"labelled node {node.node}: {node.text()}")
    for line in done.said:
        print(line)
    for line in done.failures:
        print(f"fabbench: error: {line}", file=sys.stderr)
    if not done.done and not done.failures:
        print("the verdict names no node: nothing labelled")
    raise typer.Exit(1 if done.failures else 0)

