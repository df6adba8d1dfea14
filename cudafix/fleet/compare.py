"""Compare nodes: what a distributed job needs to agree on, grouped; findings aggregated.

Snapshots are read as plain dicts (cheap) for the facts; the record is built and the rules run
once per distinct stack, not once per node: the nodes of a healthy cluster are identical but for
their identity (fleet/identity.py: hostname, node id, GPU UUIDs and bus ids, time), so 10,000
nodes cost a few rule runs (docs/fleet.md, bench/fleet.py).
"""

from __future__ import annotations

import collections
import dataclasses
import gc
import hashlib
import re
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

from cudafix import rules
from cudafix.fleet import checks, identity
from cudafix.fleet.inputs import Document, in_stream
from cudafix.fleet.model import Aggregated, hostlist
from cudafix.model.snapshot import Snapshot, SnapshotError

UNSET = "(unset)"
UNKNOWN = "?"
# Variables that change what CUDA, NCCL or torch do: nodes of one job should agree on them.
AGREE_ENV_PREFIXES = ("NCCL_", "CUDA_", "PYTORCH_", "TORCH_")
AGREE_ENV_NAMES = ("LD_LIBRARY_PATH", "LD_PRELOAD")
FACT_ORDER = ("driver", "driver branch", "GPUs", "torch", "torch CUDA", "NCCL", "cuDNN")


@dataclasses.dataclass
class Node:
    name: str  # the engine's node id, else hostname, else the input's name
    source: str
    hostname: Optional[str]
    engine: Optional[str]
    node_id: Optional[str]
    facts: Dict[str, str]
    content: str  # which distinct content (the snapshot without its identity fields) the node has


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
    # nodes named only by their own document, one of several in a plain stream (`cat` | fleet
    # --from -): nothing vouches that each came from the node it names (pdsh's prefix, one file
    # per node, Slurm's and Ray's per-node outputs do)
    self_named: int = 0

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


@dataclasses.dataclass
class _Content:
    """What one distinct content gives: judged once, shared by every node that has it."""

    facts: Dict[str, str]
    findings: List[Tuple[str, str, List[str]]]  # (rule, severity, messages in order)
    error: Optional[str] = None  # the snapshot is unusable (malformed): the node cannot be judged
    rule_errors: Tuple[str, ...] = ()  # rules that crashed on it: not judged either
    id: Optional[str] = None  # "c0", "c1", ...: Node.content of the nodes that have it


def _judge(data: dict) -> _Content:
    try:
        snap = Snapshot.from_dict(data)
        facts = node_facts(data)
    except (SnapshotError, TypeError, ValueError, AttributeError, RecursionError) as exc:
        return _Content({}, [], error="unusable snapshot: %s" % (str(exc) or type(exc).__name__)[:300])
    runs = rules.run(snap)
    grouped: "collections.OrderedDict[Tuple[str, str], List[str]]" = collections.OrderedDict()
    for f in rules.findings(runs):
        grouped.setdefault((f.rule, f.severity), []).append(f.message)
    crashed = tuple("%s (%s)" % (r.rule.id, (r.error or "")[:200]) for r in runs if r.error)
    return _Content(facts, [(r, s, m) for (r, s), m in grouped.items()], rule_errors=crashed)


def _name(d: Document) -> Tuple[str, Optional[str], Optional[str], Optional[str]]:
    node = d.data.get("node") if isinstance(d.data.get("node"), dict) else {}
    host, engine, nid = node.get("hostname"), node.get("engine"), node.get("node_id")
    short = nid[:12] if engine == "ray" and nid else nid  # Ray's node ids are 56 hex digits; 12 are unique
    # the transport's name (pdsh's host prefix) wins: a node cannot name itself another node
    return (d.name or short or host or d.source), host, engine, nid


_DIGITS = re.compile(r"(\d+)")


def _natural(s: str) -> List[object]:
    return [int(p) if p.isdigit() else p for p in _DIGITS.split(s)]


@dataclasses.dataclass
class Keyed:
    """One node's document reduced to what the comparison keeps: where from, who, which content."""

    source: str
    ident: Tuple[str, Optional[str], Optional[str], Optional[str]] = ("", None, None, None)  # name, host, engine, id
    key: Optional[bytes] = None  # the content's digest (identity.content_bytes); None: judged on its own
    data: Optional[dict] = None  # the document, when its content may not have been judged yet
    error: Optional[str] = None  # the input is unusable: not judged


_RECENT: List[Tuple[bytes, bytes]] = []  # the last contents' bytes and digests, newest first


def _digest(content: bytes) -> bytes:
    """SHA-256 of the content's bytes (a chosen collision cannot merge a node into another's
    content), computed once for the few contents a run of files alternates between."""
    for i, (b, dg) in enumerate(_RECENT):
        if b == content:  # unequal bytes differ in length or early: a short compare
            if i:
                _RECENT.insert(0, _RECENT.pop(i))
            return dg
    dg = hashlib.sha256(content).digest()
    _RECENT.insert(0, (content, dg))
    del _RECENT[8:]
    return dg


_NOBODY = ("", None, None, None)


def keyed(d: Document, group: bool = True) -> Keyed:
    """``group=False``: every node judged on its own (what grouping must equal, tests/test_fleet_identity.py)."""
    try:
        content = identity.content_bytes(d.data)
    except (ValueError, TypeError, RecursionError):  # nesting too deep to marshal: judged alone, named there
        content = None
    if content is None:  # an identity field of the wrong type: judged alone, its own type check names it
        return Keyed(d.source, _NOBODY, None, d.data)
    return Keyed(d.source, _name(d), _digest(content) if group else None, d.data)


def compare(docs: Iterable[Document], errors: Sequence[Tuple[str, str]] = (), group: bool = True) -> FleetReport:
    return compare_keyed((keyed(d, group) for d in docs), errors)


def compare_keyed(items: Iterable[Keyed], errors: Sequence[Tuple[str, str]] = ()) -> FleetReport:
    """Linear in the nodes: each node costs its identity and its content key; the snapshot is
    built and the rules run once per distinct content (the nodes of a healthy cluster differ only
    in identity).  ``items`` may be a generator: one parsed document is held at a time."""
    errors = list(errors)
    nodes: List[Node] = []
    contents: Dict[object, _Content] = {}
    by_id: Dict[str, _Content] = {}  # Node.content -> what that content gave
    seen_names: Dict[str, List[str]] = {}
    last: Tuple[object, Optional[_Content]] = (None, None)
    collecting = gc.isenabled()
    gc.disable()  # the documents are acyclic (refcounting frees each); the collector would only re-walk the nodes kept
    try:
        for k in items:
            if k.error:
                errors.append((k.source, k.error))
                continue
            if k.key is None:  # judged on its own (grouping off, or an identity field of the wrong type)
                content = _judge(k.data) if k.data is not None else _Content({}, [], error="internal: no document")
                if content.error is None and identity.problem(k.data):
                    content.error = "unusable snapshot: an identity field (%s) of the wrong type" % ", ".join(
                        identity.TOP_FIELDS + identity.NODE_FIELDS + identity.GPU_FIELDS)
            else:
                content = last[1] if k.key == last[0] else contents.get(k.key)  # neighbours share content: a compare, no hash
                if content is None:
                    if k.data is None:
                        errors.append((k.source, "internal: content seen before its document"))
                        continue
                    content = contents[k.key] = _judge(k.data)
                last = (k.key, content)
            if content.error:
                errors.append((k.source, content.error))
                continue
            name, host, engine, nid = k.ident
            sources = seen_names.setdefault(name, [])
            sources.append(k.source)
            if len(sources) > 1:  # two snapshots of one node: keep both, told apart; not judged
                name = "%s (%s)" % (name, k.source)
            if content.id is None:
                content.id = "c%d" % len(by_id)
                by_id[content.id] = content
            nodes.append(Node(name, k.source, host, engine, nid, content.facts, content.id))
    finally:
        if collecting:
            gc.enable()
    for name, sources in seen_names.items():
        if len(sources) > 1:
            errors.append((name, "%d snapshots name this node (%s): cannot tell which is the node's"
                           % (len(sources), ", ".join(sources[:3]) + (", ..." if len(sources) > 3 else ""))))
    nodes.sort(key=lambda n: _natural(n.name))

    # groups: identical facts; the largest first (ties: the group of the first node by name)
    keys = sorted({k for c in by_id.values() for k in c.facts}, key=lambda k: (FACT_ORDER.index(k) if k in FACT_ORDER else len(FACT_ORDER), k))
    fact_keys = {cid: tuple(c.facts.get(k, UNSET) for k in keys) for cid, c in by_id.items()}
    by_facts: "collections.OrderedDict[Tuple[str, ...], List[Node]]" = collections.OrderedDict()
    for n in nodes:
        by_facts.setdefault(fact_keys[n.content], []).append(n)
    ordered = sorted(by_facts.items(), key=lambda kv: -len(kv[1]))
    groups = [Group(dict(zip(keys, fk)), [n.name for n in ns]) for fk, ns in ordered]
    outliers: List[Outlier] = []
    if groups:
        major = groups[0].facts
        for g in groups[1:]:
            diff = {k: (g.facts[k], major[k]) for k in keys if g.facts[k] != major[k]}
            outliers += [Outlier(n, diff) for n in g.nodes]

    # findings: judged once per content, aggregated over the nodes in name order
    agg: "collections.OrderedDict[Tuple[str, str], Aggregated]" = collections.OrderedDict()
    crashed: "collections.OrderedDict[str, List[str]]" = collections.OrderedDict()
    for n in nodes:
        judged = by_id[n.content]
        for rid, sev, msgs in judged.findings:
            a = agg.get((rid, sev))
            if a is None:
                a = agg[(rid, sev)] = Aggregated(rid, sev, [], [])
            a.nodes.append(n.name)
            if len(a.messages) < 3:
                a.messages.extend(m for m in dict.fromkeys(msgs) if m not in a.messages)
                del a.messages[3:]
        for r in judged.rule_errors:
            crashed.setdefault(r, []).append(n.name)
    for r, names in crashed.items():  # a rule that crashed judged nothing on those nodes
        errors.append((hostlist(names, limit=4), "rule %s could not run" % r))
    order = {"error": 0, "warning": 1, "info": 2}
    findings = sorted(agg.values(), key=lambda a: (order.get(a.severity, 3), -len(a.nodes), a.rule))

    self_named = sum(1 for n in nodes if in_stream(n.source))
    return FleetReport(nodes, groups, outliers, findings, checks.run(nodes), errors, self_named)
