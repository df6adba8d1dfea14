"""`cudafix fleet` output: one screen of text, or JSON (schema cudafix.fleet/1, docs/fleet.md)."""

from __future__ import annotations

import json
from typing import Dict, List

from cudafix.fleet.compare import FleetReport
from cudafix.fleet.model import hostlist
from cudafix.render.text import printable

SCHEMA = "cudafix.fleet/1"
MAX_OUTLIER_LINES = 50


def _facts_lines(facts: Dict[str, str]) -> List[str]:
    main = ["%s %s" % (k, v) for k, v in facts.items() if not k.startswith("env ")]
    env = ["%s=%s" % (k[4:], v) for k, v in facts.items() if k.startswith("env ")]
    return ["      " + "; ".join(main)] + (["      env: " + ", ".join(env)] if env else [])


def render_text(rep: FleetReport) -> str:
    out: List[str] = []
    n = len(rep.nodes)
    verdict = ("no usable snapshot" if not n else "all nodes agree" if rep.agree
               else "%d groups: the nodes DISAGREE" % len(rep.groups))
    out.append("cudafix fleet: %d node%s, %s" % (n, "" if n == 1 else "s", verdict))
    for src, msg in rep.errors:
        out.append("  could not use %s: %s" % (src, msg))
    if rep.self_named > 1:
        out.append("  %d nodes are named only by their own snapshots, documents of one plain stream: nothing vouches"
                   " that each came from the node it names (pdsh -w, one file per node, --slurm or --ray do)" % rep.self_named)
    if rep.groups:
        g = rep.groups[0]
        out.append("")
        out.append("%s (%d): %s" % ("majority" if len(rep.groups) > 1 else "every node", len(g.nodes), hostlist(g.nodes)))
        out.extend(_facts_lines(g.facts))
    if rep.outliers:
        out.append("")
        out.append("outliers (%d, what differs from the majority):" % len(rep.outliers))
        for o in rep.outliers[:MAX_OUTLIER_LINES]:
            diffs = "; ".join("%s %s (majority: %s)" % (k, mine, major) for k, (mine, major) in o.differs.items())
            out.append("  %s: %s" % (o.node, diffs))
        if len(rep.outliers) > MAX_OUTLIER_LINES:
            out.append("  ... %d more (see --json)" % (len(rep.outliers) - MAX_OUTLIER_LINES))
    if rep.fleet_findings or rep.findings:
        out.append("")
        out.append("findings (rule x nodes):")
        for a in rep.fleet_findings + rep.findings:
            out.append("  %-7s %-28s %s" % (a.severity, a.rule, hostlist(a.nodes)))
            for m in a.messages:
                out.append("          %s" % m)
    else:
        out.append("")
        out.append("findings: none on any node")
    code = rep.exit_code()
    out.append("")
    out.append("exit %d: %s" % (code, {0: "the fleet is consistent and clean", 1: "errors or disagreement: see above",
                                        2: "cudafix could not judge every node"}[code]))
    # every name, version and value here comes from a node's snapshot: written out, never acted on
    return "\n".join(printable(ln) for ln in out) + "\n"


def to_json(rep: FleetReport, nodes: bool = True) -> dict:
    return {
        "schema": SCHEMA,
        "nodes": [{"name": n.name, "hostname": n.hostname, "engine": n.engine, "node_id": n.node_id, "source": n.source,
                   "facts": n.facts} for n in rep.nodes] if nodes else [],
        "groups": [{"facts": g.facts, "nodes": g.nodes} for g in rep.groups],
        "outliers": [{"node": o.node, "differs": {k: {"node": a, "majority": b} for k, (a, b) in o.differs.items()}}
                     for o in rep.outliers],
        "findings": [{"rule": a.rule, "severity": a.severity, "nodes": a.nodes, "messages": a.messages} for a in rep.findings],
        "fleet_findings": [{"rule": a.rule, "severity": a.severity, "nodes": a.nodes, "messages": a.messages}
                           for a in rep.fleet_findings],
        "errors": [{"source": s, "message": m} for s, m in rep.errors],
        "exit_code": rep.exit_code(),
    }


_NODES = "\x00nodes\x00"  # stands for the nodes[] array in the document's first dump
_enc = json.encoder.encode_basestring_ascii  # json.dumps's own encoding of a str (ensure_ascii)


def _nodes_json(rep: FleetReport) -> str:
    """nodes[] exactly as json.dumps(..., indent=2) writes it, each distinct facts object encoded
    once (the nodes that share a content share it): the pure-Python indenting encoder would
    otherwise spend as long on 10,000 nodes' facts as reading them took."""
    if not rep.nodes:
        return "[]"
    facts_text: Dict[int, str] = {}

    def val(v: object) -> str:
        return "null" if v is None else _enc(v) if isinstance(v, str) else json.dumps(v)

    entries = []
    for n in rep.nodes:
        ft = facts_text.get(id(n.facts))
        if ft is None:
            ft = facts_text[id(n.facts)] = json.dumps(n.facts, indent=2).replace("\n", "\n      ")
        entries.append('    {\n      "name": %s,\n      "hostname": %s,\n      "engine": %s,\n      "node_id": %s,\n'
                       '      "source": %s,\n      "facts": %s\n    }' % (val(n.name), val(n.hostname), val(n.engine),
                                                                       val(n.node_id), val(n.source), ft))
    return "[\n" + ",\n".join(entries) + "\n  ]"


def _names_json(names: List[str], indent: int) -> str:
    """A list of node names as json.dumps(..., indent=2) writes it at ``indent``."""
    if not names:
        return "[]"
    pad = "\n" + " " * (indent + 2)
    return "[" + pad + ("," + pad).join(map(_enc, names)) + "\n" + " " * indent + "]"


def render_json(rep: FleetReport) -> str:
    """The cudafix.fleet/1 document, byte for byte json.dumps(to_json(rep), indent=2); nodes[]
    and the node lists of groups and findings (100,000 names each at most) are written here, not
    by the pure-Python indenting encoder."""
    doc = to_json(rep, nodes=False)
    doc["nodes"] = _NODES
    lists: List[List[str]] = []
    for section in ("groups", "findings", "fleet_findings"):
        for entry in doc[section]:
            lists.append(entry["nodes"])
            entry["nodes"] = "\x00names%d\x00" % (len(lists) - 1)
    text = json.dumps(doc, indent=2)
    for i, names in enumerate(lists):  # each list is a member of an object in a top-level list: indent 6
        text = text.replace(_enc("\x00names%d\x00" % i), _names_json(names, 6), 1)
    return text.replace(_enc(_NODES), _nodes_json(rep), 1) + "\n"
