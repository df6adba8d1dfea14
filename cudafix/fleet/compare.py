"""Compare nodes: what a distributed job needs to agree on, grouped; findings aggregated.

Snapshots are read as plain dicts (cheap) for the facts; the rules run once per distinct
snapshot content, not once per node: the nodes of a healthy cluster are identical but for their
identity, so 1,000 nodes cost a few rule runs (docs/fleet.md, bench/fleet.py).
"""

from __future__ import annotations

import collections
import dataclasses
import hashlib
import json
import re
from typing import Dict, List, Optional, Tuple

from cudafix import rules
from cudafix.fleet import checks
from cudafix.fleet.inputs import Document
from cudafix.fleet.model import Aggregated
from cudafix.model.snapshot import Snapshot, SnapshotError

UNSET = "(unset)"
UNKNOWN = "?"
# Variables that change what CUDA, NCCL or torch do: nodes of one job should agree on them.
AGREE_ENV_PREFIXES = ("NCCL_", "CUDA_", "PYTORCH_", "TORCH_")
AGREE_ENV_NAMES = ("LD_LIBRARY_PATH", "LD_PRELOAD")
# Per-node by nature: left out of the content that decides whether two nodes are the same.
IDENTITY_NODE_FIELDS = ("hostname", "engine", "node_id", "found_via", "unknown")
IDENTITY_TOP_FIELDS = ("created", "source")
FACT_ORDER = ("driver", "driver branch", "GPUs", "torch", "torch CUDA", "NCCL", "cuDNN")


@dataclasses.dataclass
class Node:
    name: str  # the engine's node id, else hostname, else the input's name
    source: str
    hostname: Optional[str]
    engine: Optional[str]
    node_id: Optional[str]
    facts: Dict[str, str]
    content: str  # hash of the snapshot without its identity fields


@dataclasses.dataclass
class Group:
    facts: Dict[str, str]
    nodes: List[str]


@dataclasses.dataclass
class Outlier:
    node: str
    differs: Dict[str, Tuple[str, str]]  # fact -> (this node's value, the majority's)


@dataclasses.dataclass
class FleetReport:
    nodes: List[Node]
    groups: List[Group]
    outliers: List[Outlier]
    findings: List[Aggregated]
    fleet_findings: List[Aggregated]
    errors: List[Tuple[str, str]]  # (source, message): inputs that could not be used

    @property
    def agree(self) -> bool:
        return len(self.groups) <= 1

    def exit_code(self) -> int:
        if self.errors or not self.nodes:
            return 2
        bad = any(f.severity == "error" for f in self.findings + self.fleet_findings)
        return 1 if bad or not self.agree else 0


def _resolved_version(data: dict, prefix: str) -> str:
    libs = data.get("libraries") or {}
    for r in libs.get("resolutions") or ():
        if isinstance(r, dict) and str(r.get("soname", "")).startswith(prefix):
            return r.get("resolved_version") or (UNKNOWN if r.get("resolved") else "not found")
    if not data.get("torch"):
        return "none"  # no torch: nothing loads it
    return UNSET if libs.get("resolutions") else UNKNOWN


def node_facts(data: dict) -> Dict[str, str]:
    """What must agree across the nodes of one job, as display strings."""
    facts: Dict[str, str] = {}
    drv = data.get("driver") or {}
    dv = drv.get("kernel_version") or drv.get("libcuda_version")
    facts["driver"] = dv or "none"
    facts["driver branch"] = ("R" + dv.split(".")[0]) if dv else "none"
    names = collections.Counter(g.get("name", UNKNOWN) for g in (data.get("gpus") or {}).get("gpus") or () if isinstance(g, dict))
    facts["GPUs"] = ", ".join("%dx %s" % (n, name) for name, n in sorted(names.items())) or "none"
    torch = (data.get("torch") or [None])[0]
    if isinstance(torch, dict):
        facts["torch"] = torch.get("version") or (torch.get("dist") or {}).get("version") or UNKNOWN
        facts["torch CUDA"] = torch.get("cuda") or "cpu"
    else:
        facts["torch"] = facts["torch CUDA"] = "none"
    facts["NCCL"] = _resolved_version(data, "libnccl.so")
    if isinstance(torch, dict) and not torch.get("cuda") and not torch.get("hip"):
        facts["NCCL"] = "none"  # a CPU build has no NCCL: known, not "could not tell"
    facts["cuDNN"] = _resolved_version(data, "libcudnn.so.")
    for k, v in sorted((data.get("env") or {}).items()):
        if k.startswith(AGREE_ENV_PREFIXES) or k in AGREE_ENV_NAMES:
            facts["env " + k] = v
    return facts


def content_key(data: dict) -> str:
    rest = {k: v for k, v in data.items() if k not in IDENTITY_TOP_FIELDS}
    node = rest.get("node")
    if isinstance(node, dict):
        rest["node"] = {k: v for k, v in node.items() if k not in IDENTITY_NODE_FIELDS}
    # Key order as written: snapshots written by cudafix share it; another order only costs a rule run.
    return hashlib.sha1(json.dumps(rest, default=str, separators=(",", ":")).encode("utf-8")).hexdigest()


def _name(data: dict, source: str) -> Tuple[str, Optional[str], Optional[str], Optional[str]]:
    node = data.get("node") if isinstance(data.get("node"), dict) else {}
    host, engine, nid = node.get("hostname"), node.get("engine"), node.get("node_id")
    short = nid[:12] if engine == "ray" and nid else nid  # Ray's node ids are 56 hex digits; 12 are unique
    return (short or host or source), host, engine, nid


def _natural(s: str) -> List[object]:
    return [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", s)]


def compare(docs: List[Document], errors: List[Tuple[str, str]] = ()) -> FleetReport:
    errors = list(errors)
    nodes: List[Node] = []
    reps: Dict[str, dict] = {}  # content -> one representative document
    seen_names: Dict[str, int] = {}
    for d in docs:
        name, host, engine, nid = _name(d.data, d.source)
        if name in seen_names:  # two snapshots of one node: keep both, told apart
            seen_names[name] += 1
            name = "%s (%s)" % (name, d.source)
        else:
            seen_names[name] = 1
        key = content_key(d.data)
        reps.setdefault(key, d.data)
        nodes.append(Node(name, d.source, host, engine, nid, node_facts(d.data), key))
    nodes.sort(key=lambda n: _natural(n.name))

    # groups: identical facts; the largest first (ties: the group of the first node by name)
    keys = sorted({k for n in nodes for k in n.facts}, key=lambda k: (FACT_ORDER.index(k) if k in FACT_ORDER else len(FACT_ORDER), k))
    by_facts: "collections.OrderedDict[Tuple[str, ...], List[Node]]" = collections.OrderedDict()
    for n in nodes:
        by_facts.setdefault(tuple(n.facts.get(k, UNSET) for k in keys), []).append(n)
    ordered = sorted(by_facts.items(), key=lambda kv: -len(kv[1]))
    groups = [Group(dict(zip(keys, fk)), [n.name for n in ns]) for fk, ns in ordered]
    outliers: List[Outlier] = []
    if groups:
        major = groups[0].facts
        for g in groups[1:]:
            diff = {k: (g.facts[k], major[k]) for k in keys if g.facts[k] != major[k]}
            outliers += [Outlier(n, diff) for n in g.nodes]

    # findings: the rules once per distinct content
    per_content: Dict[str, List[Tuple[str, str, str]]] = {}
    for key, data in reps.items():
        try:
            snap = Snapshot.from_dict(data)
        except SnapshotError as exc:
            per_content[key] = [("snapshot-unreadable", "error", str(exc))]
            continue
        per_content[key] = [(f.rule, f.severity, f.message) for f in rules.findings(rules.run(snap))]
    agg: "collections.OrderedDict[Tuple[str, str], Aggregated]" = collections.OrderedDict()
    for n in nodes:
        for rid, sev, msg in per_content.get(n.content, ()):
            a = agg.setdefault((rid, sev), Aggregated(rid, sev, [], []))
            if n.name not in a.nodes:
                a.nodes.append(n.name)
            if msg not in a.messages and len(a.messages) < 3:
                a.messages.append(msg)
    order = {"error": 0, "warning": 1, "info": 2}
    findings = sorted(agg.values(), key=lambda a: (order.get(a.severity, 3), -len(a.nodes), a.rule))

    return FleetReport(nodes, groups, outliers, findings, checks.run(nodes), errors)
