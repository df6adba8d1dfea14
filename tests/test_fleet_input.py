"""`cudafix fleet`'s inputs, hardened (issue 21 item 4) and its aggregation, linear (issue 23).

- pdsh: real pdsh (its `exec` rcmd module runs each "node" locally, %h = the host) interleaves the
  lines of 8 real-size snapshots; each node's document is reassembled from its own lines, the host
  prefix names the node, and a hostile node cannot swallow another's document.
- malformed but valid JSON (hypothesis: type-mutated copies of the bundled H200 recording): one
  line, exit 2, never a traceback; a FIFO in --from DIR is not opened.
- the grouped aggregation (rules once per distinct content) gives what a per-node evaluation gives,
  serial and parallel reads agree, and the cost is linear in the nodes.
"""

from __future__ import annotations

import collections
import copy
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from cudafix import rules
from cudafix.cli.fleet import fleet as fleet_cmd
from cudafix.fleet import compare, render
from cudafix.fleet.inputs import Document, parse_stream
from cudafix.model.snapshot import Snapshot
from tests import fleet_gen
from tests.conftest import REPO, require

RECORDING = REPO / "cudafix" / "data" / "examples" / "h200-torch2.11-cu130.json"


def _recording() -> dict:
    return json.loads(RECORDING.read_text(encoding="utf-8"))


def _node(i: int, alter=None) -> dict:
    d = _recording()
    d["node"] = {"hostname": "node%d" % i, "engine": None, "node_id": None,
                 "net_interfaces": ["eth0", "ib0", "lo"], "ib_devices": ["mlx5_0"]}
    if alter:
        alter(d)
    return d


def _cli(*args, env=None, input=None):
    """The real command in-process (click's runner): exit code, output, and any exception."""
    res = CliRunner().invoke(fleet_cmd, list(args), input=input, env=env, catch_exceptions=True)
    return res


# -- pdsh ------------------------------------------------------------------------------------------

def _pdsh(tmp_path: Path, docs: dict, program: str) -> str:
    require(shutil.which("pdsh"), "pdsh (apt-get install pdsh; ./run installs it)")
    for host, text in docs.items():
        (tmp_path / (host + ".txt")).write_text(text, encoding="utf-8")
    script = tmp_path / "node.py"
    script.write_text(program, encoding="utf-8")
    hosts = ",".join(docs)
    out = subprocess.run(["pdsh", "-R", "exec", "-f", str(len(docs)), "-w", hosts, sys.executable, str(script),
                          str(tmp_path / "%h.txt")], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout


# each "node" writes its snapshot line by line, flushing and pausing now and then: pdsh interleaves
DRIP = """import sys, time
for i, line in enumerate(open(sys.argv[1])):
    sys.stdout.write(line)
    sys.stdout.flush()
    if i % 40 == 0:
        time.sleep(0.002)
"""


def _interleaved(stream: str) -> bool:
    hosts = [ln.split(":", 1)[0] for ln in stream.splitlines() if ln]
    runs = sum(1 for a, b in zip(hosts, hosts[1:]) if a != b)
    return runs > len(set(hosts))  # more host changes than hosts: some node's lines were split up


def test_pdsh_from_8_nodes_with_real_snapshots(tmp_path):
    docs = {"node%d" % i: json.dumps(_node(i, fleet_gen.older_driver if i == 5 else None), indent=2) + "\n"
            for i in range(1, 9)}
    stream = _pdsh(tmp_path, docs, DRIP)
    assert _interleaved(stream), "pdsh did not interleave the nodes' lines: the test tests nothing"
    res = _cli("--from", "-", "--json", input=stream)
    assert res.exception is None or isinstance(res.exception, SystemExit), res.output
    doc = json.loads(res.output)
    assert sorted(n["name"] for n in doc["nodes"]) == sorted(docs)  # named by pdsh's prefix
    assert doc["errors"] == []
    assert [o["node"] for o in doc["outliers"]] == ["node5"]
    assert {f["rule"]: f["nodes"] for f in doc["findings"]}["driver-too-old"] == ["node5"]
    assert res.exit_code == 1


def test_a_hostile_node_cannot_swallow_another_nodes_document(tmp_path):
    """node2 opens an array before node5's (broken) lines and closes it after: concatenated after
    the prefixes are stripped, node5's document becomes an element of node2's.  Each node's own
    lines form its own document: node5 is judged, the fleet is not clean."""
    good = json.dumps(_node(2), indent=2).splitlines()
    broken = json.dumps(_node(5, fleet_gen.older_driver), indent=2).splitlines()
    head, tail = good[:-1] + ['  , "pad": ['], [']', '}']
    lines = (["node2: " + ln for ln in head] + ["node5: " + ln for ln in broken] + ["node2: " + ln for ln in tail]
             + ["node1: " + ln for ln in json.dumps(_node(1), indent=2).splitlines()])
    res = _cli("--from", "-", "--json", input="\n".join(lines) + "\n")
    doc = json.loads(res.output)
    assert sorted(n["name"] for n in doc["nodes"]) == ["node1", "node2", "node5"]
    assert {f["rule"]: f["nodes"] for f in doc["findings"]}["driver-too-old"] == ["node5"]
    assert res.exit_code == 1


def test_pdsh_a_node_with_two_documents_or_none_is_not_judged():
    one = json.dumps(_node(1))
    stream = "node1: %s\nnode2: %s\nnode2: %s\nnode3: {\"schema\": \"cudafix.snapshot/1\", \"dri\n" % (one, one, one)
    docs, errors = parse_stream(stream, "<stdin>")
    assert [d.name for d in docs] == ["node1"]
    assert sorted(e.source for e in errors) == ["<stdin>:node2", "<stdin>:node3"]
    rep = compare.compare(docs, [(e.source, e.message) for e in errors])
    assert rep.exit_code() == 2


def test_two_files_claiming_one_node_cannot_be_judged(tmp_path):
    for f in ("a.json", "b.json"):
        (tmp_path / f).write_text(json.dumps(_node(7)), encoding="utf-8")
    res = _cli("--from", str(tmp_path))
    assert res.exit_code == 2, res.output
    assert "2 snapshots name this node" in res.output


def test_a_node_file_holds_one_document(tmp_path):
    (tmp_path / "node1.json").write_text(json.dumps(_node(1)), encoding="utf-8")
    (tmp_path / "node2.json").write_text(json.dumps(_node(2)) + json.dumps(_node(3)), encoding="utf-8")
    res = _cli("--from", str(tmp_path), "--json")
    doc = json.loads(res.output)
    assert [n["name"] for n in doc["nodes"]] == ["node1"] and res.exit_code == 2
    assert "2 documents in one node's file" in doc["errors"][0]["message"]


def test_a_fifo_in_the_directory_is_not_opened(tmp_path):
    (tmp_path / "node1.json").write_text(json.dumps(_node(1)), encoding="utf-8")
    os.mkfifo(str(tmp_path / "node2.json"))  # nobody ever writes: opening it for reading blocks
    run = subprocess.run([sys.executable, "-m", "cudafix", "fleet", "--from", str(tmp_path)], capture_output=True,
                         text=True, env=dict(os.environ, PYTHONPATH=str(REPO)), timeout=120, cwd=str(tmp_path))
    assert run.returncode == 2, run.stdout + run.stderr
    assert "node2.json: not a regular file" in run.stdout


# -- malformed input: one line, exit 2 ------------------------------------------------------------

def _paths(v, path=()):
    """Every value's path in the recording (the fields of schema cudafix.snapshot/1 it holds)."""
    yield path
    if isinstance(v, dict):
        for k, x in v.items():
            yield from _paths(x, path + (k,))
    elif isinstance(v, list):
        for i, x in enumerate(v):
            yield from _paths(x, path + (i,))


def _kind(v) -> str:
    return {bool: "bool", int: "number", float: "number", str: "str", list: "list", dict: "dict"}.get(type(v), "null")


REC = _recording()


def _get(d, path):
    for p in path:
        d = d[p]
    return d


PATHS = [p for p in _paths(REC) if len(p) >= 1 and p != ("schema",) and _get(REC, p) is not None]
junk = st.recursive(st.none() | st.booleans() | st.integers(min_value=-(10 ** 40), max_value=10 ** 40) | st.floats()
                    | st.text(max_size=20), lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=5), c, max_size=3),
                    max_leaves=8)
huge = st.sampled_from([10 ** 30, 2 ** 64, -(2 ** 63) - 1, 1e308, 10 ** 4000 // 10 ** 3700])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(path=st.sampled_from(PATHS), value=st.one_of(junk, huge), with_good_node=st.booleans())
def test_a_type_mutated_snapshot_is_one_line_and_exit_2(tmp_path_factory, path, value, with_good_node):
    original = _get(REC, path)
    # the same JSON type, or null (allowed for optional fields): not a malformed file
    assume(_kind(value) != _kind(original) and _kind(value) != "null")
    d = copy.deepcopy(REC)
    _get(d, path[:-1])[path[-1]] = value
    tmp = tmp_path_factory.mktemp("mut")
    (tmp / "bad.json").write_text(json.dumps(d), encoding="utf-8")
    if with_good_node:  # a node of the recording's content read just before: the bad one never rides on it
        (tmp / "a-good.json").write_text(json.dumps(REC), encoding="utf-8")
    res = _cli("--from", str(tmp))
    assert isinstance(res.exception, SystemExit), "crashed on %r = %r: %r" % (path, value, res.exception)
    assert res.exit_code == 2, (path, value, res.output)
    bad = [ln for ln in res.output.splitlines() if "could not use" in ln]
    assert len(bad) == 1 and "bad.json" in bad[0], (path, value, res.output)


@pytest.mark.parametrize("text", [
    "[" * 100000 + "]" * 100000,                                  # nesting deeper than the decoder's stack
    '{"schema": "cudafix.snapshot/1", "driver": %s}' % ("[" * 50000 + "]" * 50000),
    '{"schema": "cudafix.snapshot/1", "driver": {"cuda_version": %s}}' % ("9" * 5000),  # > int digits limit
    '{"schema": "cudafix.snapshot/1", "driver": null}',
    '{"schema": "cudafix.snapshot/1", "node": {"hostname": ["a"]}}',
    '{"schema": "cudafix.snapshot/1", "node": {"node_id": 7, "engine": "ray"}}',
    '{"schema": "cudafix.snapshot/1", "created": 5}',
    '{"schema": ["cudafix.snapshot/1"]}',
    '"cudafix.snapshot/1"',
    '{"schema": "cudafix.snapshot/1", "torch": [{"dist": null}]}',
    '{"schema": "cudafix.snapshot/1", "gpus": {"gpus": [{"index": true, "name": "x"}]}}',
    '{"schema": "cudafix.snapshot/1", "env": {"NCCL_DEBUG": {"x": [1, {"y": null}]}}}',
])
def test_nested_junk_and_huge_numbers_are_one_line_and_exit_2(tmp_path, text):
    (tmp_path / "n.json").write_text(text, encoding="utf-8")
    for args in (["--from", str(tmp_path)], ["--from", "-"]):
        res = _cli(*args, input=text if args[-1] == "-" else None)
        assert isinstance(res.exception, SystemExit), repr(res.exception)
        assert res.exit_code == 2, res.output
        assert len([ln for ln in res.output.splitlines() if "could not use" in ln]) == 1, res.output


# -- the grouped aggregation is the per-node evaluation ------------------------------------------

def _per_node_reference(fleet: dict) -> dict:
    """Every node evaluated on its own (its own Snapshot, the rules run for it), then aggregated
    the plain way: what cudafix fleet must print, without any grouping by content."""
    nodes = []
    for name, d in fleet.items():
        facts = compare.node_facts(d)
        found = [(f.rule, f.severity, f.message) for f in rules.findings(rules.run(Snapshot.from_dict(d)))]
        nodes.append((d["node"]["node_id"], facts, found))
    nodes.sort(key=lambda n: compare._natural(n[0]))
    keys = sorted({k for _, f, _ in nodes for k in f},
                  key=lambda k: (compare.FACT_ORDER.index(k) if k in compare.FACT_ORDER else len(compare.FACT_ORDER), k))
    by = collections.OrderedDict()
    for name, facts, _ in nodes:
        by.setdefault(tuple(facts.get(k, compare.UNSET) for k in keys), []).append(name)
    groups = sorted(by.items(), key=lambda kv: -len(kv[1]))
    agg = collections.OrderedDict()
    for name, _, found in nodes:
        for rid, sev, msg in found:
            a = agg.setdefault((rid, sev), {"rule": rid, "severity": sev, "nodes": [], "messages": []})
            if name not in a["nodes"]:
                a["nodes"].append(name)
            if msg not in a["messages"] and len(a["messages"]) < 3:
                a["messages"].append(msg)
    order = {"error": 0, "warning": 1, "info": 2}
    return {"nodes": [n for n, _, _ in nodes], "groups": [{"facts": dict(zip(keys, fk)), "nodes": ns} for fk, ns in groups],
            "findings": sorted(agg.values(), key=lambda a: (order.get(a["severity"], 3), -len(a["nodes"]), a["rule"]))}


def _mixed_fleet() -> dict:
    def env(**kv):
        return lambda d: d["env"].update(kv)

    alter = {3: fleet_gen.foreign_nccl, 4: fleet_gen.older_driver, 9: env(NCCL_SOCKET_IFNAME="ens-absent0"),
             10: env(NCCL_DEBUG="INFO"), 11: env(NCCL_DEBUG="INFO"), 15: fleet_gen.foreign_nccl,
             16: lambda d: d["env"].pop("TORCH_CUDA_ARCH_LIST"), 20: env(NCCL_P2P_DISABLE="1")}
    return fleet_gen.make_fleet(24, alter)


def test_grouped_aggregation_equals_a_per_node_evaluation(tmp_path):
    fleet = _mixed_fleet()
    for i, (name, d) in enumerate(fleet.items()):  # the ways a file is written: all must agree
        text = json.dumps(d) if i % 6 < 4 else json.dumps(d, indent=2) if i % 6 == 4 else \
            json.dumps(dict(reversed(list(d.items()))))  # another key order: another content key, the same verdicts
        (tmp_path / (name + ".json")).write_text(text, encoding="utf-8")
    want = _per_node_reference(fleet)
    res = _cli("--from", str(tmp_path), "--json")
    got = json.loads(res.output)
    assert [n["name"] for n in got["nodes"]] == want["nodes"]
    assert got["groups"] == want["groups"]
    assert got["findings"] == want["findings"]
    assert len(got["groups"]) > 3 and {f["rule"] for f in got["findings"]} >= {"nccl-shadowed", "driver-too-old"}
    assert res.exit_code == 1


def test_parallel_and_serial_reads_print_the_same_document(tmp_path):
    fleet = fleet_gen.make_fleet(450, {17: fleet_gen.foreign_nccl, 233: fleet_gen.older_driver})
    fleet_gen.write(fleet, tmp_path)
    (tmp_path / "node0300.json").write_text("{not json", encoding="utf-8")
    outs = {}
    for jobs in ("1", "2", "3"):
        run = subprocess.run([sys.executable, "-m", "cudafix", "fleet", "--from", str(tmp_path), "--json"], capture_output=True,
                             text=True, env=dict(os.environ, PYTHONPATH=str(REPO), CUDAFIX_JOBS=jobs), timeout=300,
                             cwd=str(tmp_path))
        assert run.returncode == 2, run.stderr
        outs[jobs] = run.stdout
    assert outs["1"] == outs["2"] == outs["3"]
    doc = json.loads(outs["1"])
    assert len(doc["nodes"]) == 449 and sorted(o["node"] for o in doc["outliers"]) == ["node0017", "node0233"]


def test_render_json_is_json_dumps_of_the_document():
    rep = compare.compare(Document(n, d) for n, d in _mixed_fleet().items())
    assert render.render_json(rep) == json.dumps(render.to_json(rep), indent=2) + "\n"


def _cpu(n: int) -> float:
    base = {"schema": "cudafix.snapshot/1", "env": {"NCCL_DEBUG": "INFO"}}  # a finding on every node
    docs = [Document("n%d" % i, dict(base, node={"hostname": "n%d" % i})) for i in range(n)]
    best = float("inf")
    for _ in range(3):
        t = time.process_time()
        rep = compare.compare(iter(docs))
        best = min(best, time.process_time() - t)
    assert len(rep.findings[0].nodes) == n
    return best


def test_the_aggregation_is_linear_in_the_nodes():
    """6x the nodes costs ~6x (a quadratic aggregation: ~36x; main 51656f0's took 74 s at 30,000)."""
    small, large = _cpu(2500), _cpu(15000)
    assert large < 12 * small, (small, large)


# -- who names a node (issue 36, Low: one plain stream could claim 100 nodes) ----------------------

def test_a_plain_stream_of_many_nodes_says_nothing_vouches_for_their_names(tmp_path):
    """100 documents back to back on stdin are 100 nodes only by their own word: the report says
    so on its first lines; the same nodes from pdsh or from one file each carry no such line."""
    stream = "".join(json.dumps(_node(i)) + "\n" for i in range(100))
    res = _cli("--from", "-", input=stream)
    head = res.output.splitlines()[:3]
    assert head[0].startswith("cudafix fleet: 100 nodes"), head
    assert any(ln.strip().startswith("100 nodes are named only by their own snapshots") for ln in head), head
    pdsh = "".join("node%d: %s\n" % (i, json.dumps(_node(i))) for i in range(5))
    for f in range(5):
        (tmp_path / ("n%d.json" % f)).write_text(json.dumps(_node(f)), encoding="utf-8")
    for args, text in ((("--from", "-"), pdsh), (("--from", str(tmp_path)), None)):
        out = _cli(*args, input=text).output
        assert out.startswith("cudafix fleet: 5 nodes") and "named only by their own" not in out, out[:400]


def test_a_ray_node_output_is_one_node_named_by_ray():
    """A Ray task's output on one node (cudafix/fleet/engine_ray.py): one document, named by the
    node Ray ran it on whatever it says of itself; two documents are that node's error, not two nodes."""
    from cudafix.fleet.engine_ray import node_output
    from cudafix.fleet.inputs import InputError

    nid = "ab" * 28
    liar = _node(9)  # says it is node9
    got = node_output(nid, json.dumps(liar))
    assert isinstance(got, Document) and got.name == nid[:12]
    rep = compare.compare([got])
    assert [n.name for n in rep.nodes] == [nid[:12]] and rep.self_named == 0
    two = node_output(nid, json.dumps(_node(1)) + json.dumps(_node(2)))
    assert isinstance(two, InputError) and "2 documents in one node's file" in two.message
