"""`cudafix fleet` by content (issue 37): nodes equal apart from their identity are one stack.

- grouping on and off print the same cudafix.fleet/1 document for a real-size mixed fleet (the
  bundled recordings with per-node hostname, node id, snapshot time, GPU UUID and PCI slot, and
  ~3.5% outliers: tests/fleet_gen.py real_size_node), and the rules run once per stack;
- no rule reads an identity field (else leaving it out of the content could change a finding);
- bad input with no node at all (an empty directory, empty stdin) is one line and exit 2;
- `--from -` is read document by document as it arrives.
"""

from __future__ import annotations

import ast
import io
import json
import os
import subprocess
import sys

from cudafix.fleet import compare, identity, render
from cudafix.fleet.inputs import Document, iter_reader
from tests import fleet_gen
from tests.conftest import REPO

N = 600  # every outlier kind appears (101, 103, 107, 211 divide some i <= 600), both stacks


def _fleet():
    bases = fleet_gen.real_size_bases()
    return [Document("gpu-%05d.json" % i, fleet_gen.real_size_node(i, bases)) for i in range(1, N + 1)]


def test_grouping_on_and_off_print_the_same_document():
    docs = _fleet()
    on = render.render_json(compare.compare(iter(docs), group=True))
    off = render.render_json(compare.compare(iter(docs), group=False))
    assert on == off
    got = json.loads(on)
    assert len(got["nodes"]) == N and len(got["groups"]) >= 5  # two stacks and the outliers' facts
    rules = {f["rule"] for f in got["findings"]}
    assert "driver-too-old" in rules, rules
    # the missing GPU is named as what differs, on exactly the nodes that lost theirs
    missing = sorted(o["node"] for o in got["outliers"] if o["differs"].get("GPUs", {}).get("node") == "none")
    assert missing == ["gpu-%05d" % i for i in range(1, N + 1) if i % 211 == 0 and i % 101 and i % 103 and i % 107]


def test_the_rules_run_once_per_stack_whatever_the_identity(monkeypatch):
    judged = []
    real = compare._judge
    monkeypatch.setattr(compare, "_judge", lambda data: judged.append(1) or real(data))
    docs = _fleet()
    rep = compare.compare(iter(docs))
    # two stacks, four alterations (one on both stacks: two contents), counted from the input
    stacks = {json.dumps(identity.split(d.data), sort_keys=True) for d in docs}
    assert len(judged) == len(stacks) == 8, (len(judged), len(stacks))
    assert len(rep.nodes) == N


def test_a_node_whose_identity_field_has_the_wrong_type_is_judged_alone():
    docs = _fleet()[:3]
    docs[1].data["gpus"]["gpus"][0]["uuid"] = 7  # the content apart, the node equals its neighbours
    rep = compare.compare(iter(docs))
    assert [s for s, _ in rep.errors] == ["gpu-00002.json"] and len(rep.nodes) == 2
    assert rep.errors[0][1] == compare.compare(iter(docs[1:2]), group=False).errors[0][1]


# Attribute names that only an identity field has (``found_via`` and ``source`` are common words:
# checked as ``.node.found_via`` and ``snap.source``).
_IDENTITY_ATTRS = set(identity.GPU_FIELDS) | {"hostname", "node_id", "engine", "created"}


def test_no_rule_reads_an_identity_field():
    bad = []
    for path in sorted((REPO / "cudafix" / "rules").glob("*.py")) + [REPO / "cudafix" / "fleet" / "checks.py"]:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute):
                chain = ast.unparse(node) if hasattr(ast, "unparse") else ""
                if node.attr in _IDENTITY_ATTRS or chain.endswith((".node.found_via", "snap.source")):
                    bad.append("%s:%d %s" % (path.name, node.lineno, node.attr))
            elif isinstance(node, ast.Constant) and node.value in _IDENTITY_ATTRS:
                bad.append("%s:%d %r" % (path.name, node.lineno, node.value))
    assert not bad, bad


def _run(*args, stdin=""):
    return subprocess.run([sys.executable, "-m", "cudafix", "fleet"] + list(args), input=stdin, capture_output=True,
                          text=True, env=dict(os.environ, PYTHONPATH=str(REPO)), timeout=120, cwd="/")


def test_no_node_at_all_is_one_line_and_exit_2(tmp_path):
    for args, stdin in ((["--from", str(tmp_path)], ""), (["--from", "-"], ""), (["--from", "-", "--json"], " \n")):
        run = _run(*args, stdin=stdin)
        assert run.returncode == 2, (args, run.stderr)
        assert run.stdout == "" and run.stderr.count("\n") == 1 and "no snapshots found" in run.stderr, (args, run.stderr)


class _Pipe(io.RawIOBase):
    """A stream that says how much of it was read when."""

    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def read(self, n: int = -1) -> bytes:
        got = self.data[self.pos:self.pos + (n if n >= 0 else len(self.data))]
        self.pos += len(got)
        return got


def test_a_stream_is_read_document_by_document():
    docs = _fleet()[:40]
    text = "".join(json.dumps(d.data, indent=2) + "\n" for d in docs).encode()
    pipe = _Pipe(text)
    seen = []
    for item in iter_reader(lambda n: pipe.read(min(n, 65536)), "<stdin>"):
        assert isinstance(item, Document), item
        seen.append(pipe.pos)
    assert len(seen) == 40
    assert seen[0] < 4 * 65536 + 60000, seen[:3]  # the first node was handed on before the stream's end
    # one node's file read in small pieces is the same document as read whole
    assert [d.data for d in iter_reader(_Pipe(text).read, "x")] == [d.data for d in docs]
