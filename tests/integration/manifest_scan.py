"""checkov, the Kubernetes manifest scanner sites use, as the tests run it: the pinned version
(.ci/checkov.lock; .ci/checkov.sh installs it into its own venv under $FABBENCH_CACHE), one
offline run over a folder, its findings; the list of findings the project accepts, each with its
reason (charts/fabbench/scan-accepted.yaml), and which findings an entry accepts."""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path

import yaml

from conftest import REPO

LOCK = REPO / ".ci" / "checkov.lock"
ACCEPTED = REPO / "charts" / "fabbench" / "scan-accepted.yaml"
# offline: no mapping or policy download from Prisma Cloud (--skip-download, BC_SKIP_MAPPING),
# no look on PyPI for a newer checkov
OFFLINE_ENV = {"BC_SKIP_MAPPING": "TRUE", "CKV_SKIP_PACKAGE_UPDATE_CHECK": "TRUE"}
SCAN_TIMEOUT_S = 600


def checkov_version() -> str:
    pins = [line.split("==", 1)[1] for line in LOCK.read_text().splitlines()
            if line.startswith("checkov==")]
    assert len(pins) == 1, f"{LOCK} pins checkov {len(pins)} times"
    return pins[0]


def checkov_path() -> Path:
    cache = Path(os.environ.get("FABBENCH_CACHE") or Path.home() / ".cache" / "fabbench")
    return cache / "tools" / f"checkov-{checkov_version()}" / "bin" / "checkov"


@dataclass(frozen=True, order=True)
class Finding:
    check: str   # checkov's id, CKV_K8S_23
    title: str   # checkov's name of the check
    source: str  # the file's path in the scanned folder without .yaml: chart/<value set>
    obj: str     # Kind/name


@dataclass(frozen=True)
class Scan:
    findings: frozenset[Finding]
    scanned: frozenset[tuple[str, str]]  # (source, Kind/name) of every object a check judged


def _source_and_object(result: dict) -> tuple[str, str]:
    # checkov names a resource Kind.namespace.name (a graph check's pod adds .label-value pairs)
    kind, _namespace, rest = result["resource"].split(".", 2)
    return result["file_path"].strip("/").removesuffix(".yaml"), f"{kind}/{rest.split('.')[0]}"


def scan(folder: Path) -> Scan:
    """One checkov run over every manifest under ``folder`` (its Kubernetes checks, JSON)."""
    proc = subprocess.run(
        [str(checkov_path()), "--directory", str(folder), "--framework", "kubernetes",
         "--output", "json", "--compact", "--skip-download"],
        capture_output=True, text=True, timeout=SCAN_TIMEOUT_S, check=False,
        env={**os.environ, **OFFLINE_ENV})
    assert proc.returncode in (0, 1), f"checkov exit {proc.returncode}: {proc.stderr[-2000:]}"
    report = json.loads(proc.stdout)
    assert isinstance(report, dict) and report["check_type"] == "kubernetes", proc.stdout[:500]
    assert report["summary"]["parsing_errors"] == 0, report["results"].get("parsing_errors")
    results = report["results"]
    findings = frozenset(Finding(r["check_id"], r["check_name"], *_source_and_object(r))
                         for r in results["failed_checks"])
    scanned = frozenset(_source_and_object(r)
                        for r in results["failed_checks"] + results["passed_checks"])
    return Scan(findings, scanned)


@dataclass(frozen=True)
class Acceptance:
    """One entry of the accepted list: the findings of ``check`` on the objects (Kind/name
    patterns) in the sources (chart/<value set>, render/<name> patterns) it names."""
    check: str
    objects: tuple[str, ...]
    sources: tuple[str, ...]
    reason: str

    def accepts(self, f: Finding) -> bool:
        return (f.check == self.check and any(fnmatchcase(f.obj, p) for p in self.objects)
                and any(fnmatchcase(f.source, p) for p in self.sources))

    def stale(self, findings: frozenset[Finding]) -> list[str]:
        """The patterns of this entry that no finding it accepts matches any more."""
        mine = [f for f in findings if self.accepts(f)]
        return ([f"objects: {p}" for p in self.objects
                 if not any(fnmatchcase(f.obj, p) for f in mine)]
                + [f"sources: {p}" for p in self.sources
                   if not any(fnmatchcase(f.source, p) for f in mine)])


def accepted(path: Path = ACCEPTED) -> list[Acceptance]:
    entries = yaml.safe_load(path.read_text())["accepted"]
    out = []
    for e in entries:
        assert set(e) == {"check", "objects", "sources", "reason"}, f"{path}: {e}"
        assert len(e["reason"].split()) >= 8, f"{path}: {e['check']} gives no reason"
        out.append(Acceptance(e["check"], tuple(e["objects"]), tuple(e["sources"]),
                              " ".join(e["reason"].split())))
    return out
