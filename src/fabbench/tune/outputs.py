"""What a tune writes, in the formats the libraries read themselves (docs/tuning.md).

Open MPI's coll_tuned rules file (``coll_tuned_dynamic_rules_filename``, the classic format):
per collective id (coll_base_functions.h) and communicator size, bands of message sizes, each
``<bytes> <algorithm> <fan in/out> <segment size>``; algorithm 0 leaves the choice to the fixed
rules. A message size is the whole operation's bytes; a band starts halfway (geometrically)
between two measured sizes and takes the choice of the size above. NCCL's tuner plugin CSV
(the ext-tuner example's columns, ``NCCL_TUNER_CONFIG_FILE``): one line per op from the tuned
NCCL_ALGO and NCCL_PROTO."""

from __future__ import annotations

import math
from collections.abc import Mapping

from fabbench.fabrics.profile import split_pair

RULES = "coll_tuned.rules"
NCCL_CSV = "nccl_tuner.csv"
# coll_base_functions.h's COLLTYPE, for the ops fabbench tunes per size
COLL_IDS = {"allgather": 0, "allreduce": 2, "alltoall": 3, "broadcast": 7}
NCCL_COLL = {"allreduce": "allreduce", "allgather": "allgather", "broadcast": "broadcast",
             "reduce_scatter": "reducescatter"}
MAX_BYTES = 4294967295  # the plugin's largest size
NCCL_COLUMNS = ("collective_type", "min_bytes", "max_bytes", "algorithm", "protocol",
                "channels", "nNodes", "nRanks", "numPipeOps", "regBuff")


def bands(choices: Mapping[int, str]) -> list[tuple[int, int, str]]:
    """(from, to, choice) message-size bands over measured sizes: the first from 0, the last to
    the largest integer; neighbours with the same choice merged."""
    sizes = sorted(choices)
    out: list[tuple[int, int, str]] = []
    for i, size in enumerate(sizes):
        start = 0 if i == 0 else math.isqrt(sizes[i - 1] * size) + 1
        if out and out[-1][2] == choices[size]:
            continue
        if out:
            out[-1] = (out[-1][0], start - 1, out[-1][2])
        out.append((start, 2**63 - 1, choices[size]))
    return out


def rules_file(per_size: Mapping[tuple[str, int], str], ranks: int) -> str:
    """The coll_tuned rules of per-size algorithm choices, for communicators of ``ranks``
    ranks and more (sizes not chosen keep coll_tuned's fixed rules: algorithm 0)."""
    by_op: dict[str, dict[int, str]] = {}
    for (op, size), alg in per_size.items():
        if op not in COLL_IDS:
            raise ValueError(f"coll_tuned rules are written for {', '.join(COLL_IDS)}, "
                             f"not {op}")
        by_op.setdefault(op, {})[size] = alg
    lines = ["# Open MPI coll_tuned dynamic rules, written by fabbench tune",
             "# use: --mca coll_tuned_use_dynamic_rules 1 "
             "--mca coll_tuned_dynamic_rules_filename THIS_FILE",
             f"{len(by_op)}  # collectives"]
    for op in sorted(by_op, key=COLL_IDS.__getitem__):
        rules = bands(by_op[op])
        lines += [f"{COLL_IDS[op]}  # {op}", "1  # communicator sizes",
                  f"{ranks}  # ranks (and more)", f"{len(rules)}  # message sizes"]
        for start, _, choice in rules:
            alg, segment = split_pair(choice)
            lines.append(f"{start} {alg} 0 {segment or 0}  # {op} from {start} B")
    return "\n".join(lines) + "\n"


def read_rules(text: str) -> list[int]:
    """The integers of a rules file, comments skipped (as coll_tuned reads it)."""
    return [int(tok) for line in text.splitlines() for tok in line.split("#", 1)[0].split()]


def nccl_csv(ops: list[str], env: Mapping[str, str], nodes: int, ranks: int) -> str | None:
    """The tuner plugin's CSV of the tuned NCCL_ALGO and NCCL_PROTO (and NCCL_MIN_NCHANNELS,
    -1: NCCL's own), one line per op over every size (0 to 4294967295 bytes), for ``nodes``
    nodes and ``ranks`` ranks; None unless the tune chose both an algorithm and a protocol (a
    line of the plugin names both)."""
    if "NCCL_ALGO" not in env or "NCCL_PROTO" not in env:
        return None
    row = f"{env['NCCL_ALGO'].lower()},{env['NCCL_PROTO'].lower()}," \
          f"{env.get('NCCL_MIN_NCHANNELS', '-1')},{nodes},{ranks},-1,-1"
    lines = ["# " + ",".join(NCCL_COLUMNS)]
    lines += [f"{NCCL_COLL[op]},0,{MAX_BYTES},{row}" for op in ops if op in NCCL_COLL]
    return "\n".join(lines) + "\n"
