"""The results contract moves its version with its schema (issue 45): each version's schema file
is pinned by the digest it was released with, so that a change to a schema fails here until
SCHEMA names a new version (the old file kept as schema-<n>.json beside RENAMED's entries and
docs/results.md's "Versions"), and the new version's digest is added below."""

from __future__ import annotations

import hashlib
import json
from importlib import resources

from fabbench import results

# sha256 of each schema as canonical JSON (sorted keys, no spaces): what a version promises
RELEASED = {
    "fabbench/1": "fc25e976628fb9df91ba48a09853fa56083fab97b5222332dca38b42216095b5",
    # with the optional fields added to /2 before this pin: schedule and recheck (pairs),
    # rank_containers (run), cuda_graph (collective); then the replay kind (issue 62), a kind
    # added: every fabbench/2 file valid before is valid after, and means the same (was
    # 8ea94e26f032dcf6c80b7b7724b060df9173e3f461b70a452c196a4e8113115c)
    "fabbench/2": "df593176372897fa41582b2a222af1557ea788df4d13785f0f647d3a78d6097a",
}


def _digest(name: str) -> str:
    schema = json.loads(resources.files(results).joinpath(name).read_text())
    return hashlib.sha256(json.dumps(schema, sort_keys=True, separators=(",", ":"))
                          .encode()).hexdigest()


def test_every_version_reads_with_the_schema_it_was_released_with():
    assert set(RELEASED) == set(results.SCHEMA_FILES) and results.SCHEMA in RELEASED
    changed = [v for v, name in results.SCHEMA_FILES.items() if _digest(name) != RELEASED[v]]
    assert not changed, (f"the schema of {changed} changed: name a new version in "
                         "results.SCHEMA and keep the old file (see this module's docstring)")

