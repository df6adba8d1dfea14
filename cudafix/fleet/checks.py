"""Fleet-only rules: facts that are fine on each node alone and wrong between nodes.

Stable ids, listed by `cudafix explain` and docs/rules.md like the per-node rules.
"""

from __future__ import annotations

import collections
from typing import Dict, List, Sequence

from cudafix.fleet.model import Aggregated, hostlist
from cudafix.knowledge import nccl as kn
from cudafix.model.findings import ERROR, Rule

FLEET_RULES = (
    Rule(
        id="fleet-nccl-mismatch",
        severity=ERROR,
        title="Nodes of the fleet load different NCCL versions",
        check=lambda snap: (),  # judged across nodes by `cudafix fleet` (cudafix/fleet/checks.py)
        cause="Every rank of a job runs NCCL's protocol with every other; ranks built on different NCCL releases (a node with another image, a system libnccl on one node's LD_LIBRARY_PATH) can disagree on it.",
        symptoms=("a multi-node job hangs in its first collective, or fails with an NCCL 'internal error' on some ranks only",),
        evidence_used="the libnccl.so.2 version each node's torch would load (loader simulation), compared across nodes",
        fix_text="give every node the same NCCL: the one torch ships (remove foreign NCCL from LD_LIBRARY_PATH: rule nccl-shadowed), the same image.",
        sources=(kn.TROUBLESHOOTING_DOC,),
        severity_basis="error, cited, not measured (no multi-node cluster here): ranks must run one NCCL protocol (NCCL's troubleshooting guide); a node on another NCCL than torch's own is also nccl-shadowed, whose import failure was measured (tests/test_fleet.py).",
    ),
    Rule(
        id="fleet-torch-mismatch",
        severity=ERROR,
        title="Nodes of the fleet run different torch builds",
        check=lambda snap: (),
        cause="A partial upgrade or a node on another image leaves one torch release or CUDA variant beside the others. torch.distributed ranks then differ in their collectives, pickled objects and NCCL.",
        symptoms=("RuntimeError from torch.distributed on some ranks only; a job that hangs at its first barrier",),
        evidence_used="torch's version and CUDA variant (torch/version.py) on each node",
        fix_text="install the same torch build on every node (one image, one environment file).",
        sources=("https://pytorch.org/docs/stable/distributed.html",),
    ),
)
BY_ID = {r.id: r for r in FLEET_RULES}


def _differing(nodes: Sequence, fact: str) -> Dict[str, List[str]]:
    by_value: Dict[str, List[str]] = collections.OrderedDict()
    for n in nodes:
        by_value.setdefault(n.facts.get(fact, "?"), []).append(n.name)
    return by_value


def run(nodes: Sequence) -> List:
    out = []
    for rid, facts in (("fleet-nccl-mismatch", ("NCCL",)), ("fleet-torch-mismatch", ("torch", "torch CUDA"))):
        for fact in facts:
            by_value = _differing(nodes, fact)
            if len(by_value) > 1:
                ranked = sorted(by_value.items(), key=lambda kv: -len(kv[1]))
                parts = ["%s %s on %s" % (fact, v, hostlist(ns, limit=4)) for v, ns in ranked]
                minority = [name for _, ns in ranked[1:] for name in ns]
                out.append(Aggregated(rid, BY_ID[rid].severity, minority, ["; ".join(parts)]))
                break
    return out
