"""The per-record schema check, timed: each checker in fresh processes over the records of each
results file (parsed by json first, not timed; one warm-up record; the cycle collector paused, as
the reader pauses it), wall and CPU µs per record, the medians of --repeat processes
(docs/performance.md, "What a record costs").

Checkers (a reader's: fields a schema does not list are not refused):
  problem         records.problem(record, version, unknown_fields=True), what the reader calls
                  for every record: the NaN check, the kind, the fast verdict (and the walk of a
                  refused record); of this checkout, and of --before's as problem-before
  jsonschema-rs   the fast verdict alone (results.fast_check) of this checkout
  compiled        the verdict alone of the hand-written compiler (results.compiled) of --before,
                  a checkout from before its removal
  fastjsonschema  the verdict alone of fastjsonschema (not a dependency: --fastjsonschema DIR,
                  a `pip install --target DIR fastjsonschema`) on the same reader's schema
                  (it knows drafts up to 7: the schema's "$schema" is left out)

    git archive bae17b7 src | tar -x -C /tmp/before     # a checkout with results/compiled.py
    pip install --target /tmp/fjs fastjsonschema==2.22.3
    .venv/bin/python bench/record_check.py FILE... --before /tmp/before --fastjsonschema /tmp/fjs
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
TIMEOUT_S = 900


def records_of(path: Path) -> list[tuple[str, dict[str, Any]]]:
    """Each record of a results file with the schema version of its run."""
    out, version = [], ""
    with path.open() as f:
        for line in f:
            if line.strip():
                record = json.loads(line)
                if record["kind"] == "run":
                    version = record["schema"]
                out.append((version, record))
    return out


def checker(name: str) -> Callable[[str, dict[str, Any]], bool]:
    """The check ``name`` of the fabbench on the path: (version, record) -> valid."""
    from fabbench.results import records

    if name == "problem":
        return lambda version, record: records.problem(record, version,
                                                       unknown_fields=True) is None
    if name == "jsonschema-rs":
        return lambda version, record: records._fast(version, None, True)(record) is True
    if name == "compiled":
        return lambda version, record: records._compiled(version, None, True)(record) is True
    if name == "fastjsonschema":
        import fastjsonschema

        from fabbench.results.fast_check import judged
        made: dict[str, Callable[[Any], Any]] = {}

        def valid(version: str, record: dict[str, Any]) -> bool:
            if version not in made:
                judged_schema = judged(records._schema(version), lenient=True)
                assert judged_schema is not None
                made[version] = fastjsonschema.compile(
                    {k: v for k, v in judged_schema[0].items() if k != "$schema"})
            try:
                made[version](record)
            except fastjsonschema.JsonSchemaException:
                return False
            return True
        return valid
    raise SystemExit(f"bench/record_check.py: no checker {name}")


def one(name: str, path: Path) -> None:
    """In a fresh process: time one checker over one file's records (wall and CPU time), with
    the cycle collector paused as the reader pauses it, print JSON."""
    pairs = records_of(path)
    check = checker(name)
    check(*pairs[0])  # warm-up: the validator built
    gc.disable()
    start, cpu = time.perf_counter(), time.process_time()
    valid = sum(1 for version, record in pairs if check(version, record))
    took, cpu = time.perf_counter() - start, time.process_time() - cpu
    print(json.dumps({"records": len(pairs), "valid": valid, "us": took / len(pairs) * 1e6,
                      "cpu_us": cpu / len(pairs) * 1e6}))


def timed(name: str, path: Path, src: Path, extra: list[str]) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(src), *extra])}
    proc = subprocess.run([sys.executable, __file__, "--one", name, str(path)], env=env,
                          capture_output=True, text=True, timeout=TIMEOUT_S, check=False)
    if proc.returncode:
        sys.exit(f"bench/record_check.py: {name} on {path} failed: {proc.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(proc.stdout)
    return result


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("files", type=Path, nargs="*")
    p.add_argument("--before", type=Path, help="a checkout (its src/) with results/compiled.py")
    p.add_argument("--fastjsonschema", type=Path, help="a folder fastjsonschema imports from")
    p.add_argument("--repeat", type=int, default=3, help="processes per checker and file")
    p.add_argument("--one", nargs=2, metavar=("CHECKER", "FILE"), help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.one:
        one(args.one[0], Path(args.one[1]))
        return
    after = REPO / "src"
    runs: list[tuple[str, str, Path, list[str]]] = [("problem", "problem", after, []),
                                                    ("jsonschema-rs", "jsonschema-rs", after, [])]
    if args.before is not None:
        runs += [("problem-before", "problem", args.before / "src", []),
                 ("compiled", "compiled", args.before / "src", [])]
    if args.fastjsonschema is not None:
        runs.append(("fastjsonschema", "fastjsonschema", after, [str(args.fastjsonschema)]))
    print("| checker | file | records | valid | wall µs per record | CPU µs per record | "
          "wall, each run |")
    print("| --- | --- | ---: | ---: | ---: | ---: | --- |")
    for path in args.files:
        got: dict[str, list[dict[str, Any]]] = {label: [] for label, *_ in runs}
        for _ in range(args.repeat):  # the checkers alternate: a busy neighbour slows all alike
            for label, name, src, extra in runs:
                got[label].append(timed(name, path, src, extra))
        for label, *_ in runs:
            us = [g["us"] for g in got[label]]
            first = got[label][0]
            cpu = statistics.median(g["cpu_us"] for g in got[label])
            print(f"| {label} | {path.name} | {first['records']:,} | {first['valid']:,} | "
                  f"{statistics.median(us):.2f} | {cpu:.2f} | "
                  f"{', '.join(f'{u:.2f}' for u in us)} |", flush=True)


if __name__ == "__main__":
    main()
