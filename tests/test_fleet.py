"""`cudafix fleet` from gathered snapshots; the NCCL rules (docs/fleet.md).

Engines (Slurm, Ray, NHC) are tested with the real programs in tests/test_fleet_engines.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from cudafix.fleet import compare, render
from cudafix.fleet.inputs import parse_stream
from cudafix.fleet.model import hostlist
from cudafix.knowledge import nccl as kn
from cudafix.model.snapshot import Snapshot
from cudafix.rules import nccl as rnccl
from tests import fleet_gen
from tests.conftest import REPO, VENVS, run_dev_cudafix, venv_site_packages


def _report(fleet):
    docs, errors = [], []
    for name, d in fleet.items():
        got, err = parse_stream(json.dumps(d), name)
        docs += got
        errors += err
    return compare.compare(docs, [(e.source, e.message) for e in errors])


def test_a_thousand_nodes_two_altered_exactly_those_two_are_named(tmp_path):
    fleet = fleet_gen.make_fleet(1000, {17: fleet_gen.foreign_nccl, 233: fleet_gen.older_driver})
    fleet_gen.write(fleet, tmp_path)
    out = run_dev_cudafix("fleet", "--from", str(tmp_path), "--json", timeout=300)
    assert out.returncode == 1, out.stderr
    doc = json.loads(out.stdout)
    assert doc["schema"] == "cudafix.fleet/1"
    assert len(doc["nodes"]) == 1000
    assert len(doc["groups"][0]["nodes"]) == 998
    assert sorted(o["node"] for o in doc["outliers"]) == ["node0017", "node0233"]
    by_node = {o["node"]: o["differs"] for o in doc["outliers"]}
    assert by_node["node0017"]["NCCL"] == {"node": "2.18.1", "majority": "2.28.9"}
    assert by_node["node0017"]["env LD_LIBRARY_PATH"]["node"].startswith("/opt/nccl-2.18.1/lib:")
    assert by_node["node0233"]["driver"] == {"node": "570.86.15", "majority": "580.159.04"}
    rules_nodes = {f["rule"]: f["nodes"] for f in doc["findings"] + doc["fleet_findings"]}
    assert rules_nodes["nccl-shadowed"] == ["node0017"]
    assert rules_nodes["fleet-nccl-mismatch"] == ["node0017"]
    assert rules_nodes["driver-too-old"] == ["node0233"]  # R570 reports CUDA 12.8; torch 2.11.0+cu130 needs 13.0
    assert all(set(n) <= {"node0017", "node0233"} for n in rules_nodes.values()), rules_nodes


def test_identical_nodes_agree_and_exit_0_when_clean(tmp_path):
    rep = _report(fleet_gen.make_fleet(5))
    assert rep.agree and not rep.outliers and len(rep.groups) == 1
    assert rep.exit_code() == (1 if any(f.severity == "error" for f in rep.findings) else 0)
    text = render.render_text(rep)
    assert "every node (5): node[0001-0005]" in text


def test_the_recorded_h200_node_is_clean_so_a_fleet_of_it_exits_0():
    rep = _report(fleet_gen.make_fleet(3))
    assert [f.rule for f in rep.findings if f.severity == "error"] == []
    assert rep.exit_code() == 0


def test_stream_formats(tmp_path):
    fleet = fleet_gen.make_fleet(3)
    docs = [json.dumps(d, indent=1) for d in fleet.values()]
    # concatenated documents, as `cat *.json` gives
    got, err = parse_stream("\n".join(docs), "<stdin>")
    assert [d.data["node"]["node_id"] for d in got] == ["node0001", "node0002", "node0003"] and not err
    # pdsh prefixes every line with "host: "
    pdsh = "\n".join("%s: %s" % (name, line) for name, d in zip(fleet, docs) for line in d.splitlines())
    got, err = parse_stream(pdsh, "pdsh")
    assert len(got) == 3 and not err
    # a `cudafix status --json` document carries the snapshot
    status = json.dumps({"schema": "cudafix.status/1", "snapshot": fleet["node0001"], "findings": []})
    got, err = parse_stream(status, "status")
    assert len(got) == 1
    # not a snapshot, and truncated JSON: named errors, exit 2
    got, err = parse_stream('{"schema": "something/1"}\n{"schema": "cudafix.snapshot/1", "dri', "bad")
    assert not got and [e.source for e in err] == ["bad#1", "bad#2"]
    rep = compare.compare(got, [(e.source, e.message) for e in err])
    assert rep.exit_code() == 2


def test_cli_from_stdin_and_bad_usage(tmp_path):
    fleet = fleet_gen.make_fleet(2)
    run = subprocess.run([sys.executable, "-m", "cudafix", "fleet", "--from", "-"], input="".join(json.dumps(d) for d in fleet.values()),
                         capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=str(REPO)), timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "2 nodes, all nodes agree" in run.stdout
    bad = run_dev_cudafix("fleet")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "one of --from" in bad.stderr
    missing = run_dev_cudafix("fleet", "--from", str(tmp_path / "nope"))
    assert missing.returncode == 2 and "cannot read" in missing.stdout


def test_hostlist():
    assert hostlist(["node0001", "node0002", "node0003", "node0005", "gpu7"]) == "node[0001-0003,0005], gpu7"
    assert hostlist(["a"]) == "a"


# -- NCCL's list syntax: the examples of NCCL's own documentation (knowledge/nccl.py ENV_DOC) --

IFACES = ["docker0", "docker1", "eth0", "eth1", "ib0", "lo"]


@pytest.mark.parametrize("value, want", [
    ("eth", ["eth0", "eth1"]),            # "Use all interfaces starting with eth"
    ("=eth0", ["eth0"]),                  # "Use only interface eth0"
    ("=eth0,eth1", ["eth0", "eth1"]),     # "Use only interfaces eth0 and eth1"
    # "Do not use any interface starting with docker": with a user list NCCL excludes nothing else,
    # lo included (NVIDIA/nccl src/os/linux.cc; measured: tests/test_nccl_netns.py, "^eth" used lo)
    ("^docker", ["eth0", "eth1", "ib0", "lo"]),
    ("^=docker0", ["docker1", "eth0", "eth1", "ib0", "lo"]),  # "Do not use interface docker0"
    ("lo", ["lo"]),
])
def test_socket_ifname_as_nccl_documents_it(value, want):
    assert kn.selected_devices(kn.parse_device_filter(value), IFACES) == want


def test_ib_hca_ports_are_not_part_of_the_name():
    f = kn.parse_device_filter("=mlx5_0:1,mlx5_1:1", with_ports=True)
    assert f.exact and f.tokens == ("mlx5_0", "mlx5_1")
    assert kn.selected_devices(f, ["mlx5_0", "mlx5_10"]) == ["mlx5_0"]


def _snap(alter) -> Snapshot:
    d = fleet_gen.make_fleet(1, {1: alter})["node0001"]
    return Snapshot.from_dict(d)


def test_interface_rule_verdicts():
    def env(**kv):
        return lambda d: d["env"].update(kv)

    [o] = rnccl.check_nccl_interfaces(_snap(env(NCCL_SOCKET_IFNAME="ens")))
    assert o.verdict == "problem" and o.severity == "error" and "eth0, ib0, lo" in " ".join(o.evidence)
    [o] = rnccl.check_nccl_interfaces(_snap(env(NCCL_SOCKET_IFNAME="=eth0")))
    assert o.verdict == "ok"
    [o] = rnccl.check_nccl_interfaces(_snap(env(NCCL_IB_HCA="mlx4")))
    assert o.verdict == "problem" and o.severity == "warning"

    def no_device_list(d):  # a snapshot from before the node probe: unknown, never ok
        d["env"]["NCCL_SOCKET_IFNAME"] = "eth0"
        del d["node"]

    [o] = rnccl.check_nccl_interfaces(_snap(no_device_list))
    assert o.verdict == "unknown"


def test_slow_path_and_debug_rules():
    s = _snap(lambda d: d["env"].update(NCCL_P2P_DISABLE="1", NCCL_IB_DISABLE="0", NCCL_DEBUG="INFO"))
    slow = list(rnccl.check_nccl_slow_path(s))
    assert [o.subject for o in slow] == ["NCCL_P2P_DISABLE"]
    [dbg] = rnccl.check_nccl_debug(s)
    assert dbg.verdict == "problem"
    [dbg] = rnccl.check_nccl_debug(_snap(lambda d: d["env"].update(NCCL_DEBUG="WARN")))
    assert dbg.verdict == "ok"


# -- a real foreign NCCL: torch 2.14.1+cu130 with torch 2.5.1's NCCL 2.21.5 --------------------


def _old_nccl() -> str:
    py = VENVS / "torch-251" / "bin" / "python"
    if not py.exists():
        pytest.fail("test venv %s missing: run tests/make_venvs.sh (CI does)" % py)
    return str(venv_site_packages(py) / "nvidia" / "nccl" / "lib")


def _import_and_check(torch_cu_python, env_extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("LD_")}
    env.update(env_extra)
    real = subprocess.run([str(torch_cu_python), "-c", "import torch"], capture_output=True, text=True, env=env, timeout=300, cwd="/")
    check = run_dev_cudafix("check", "--python", str(torch_cu_python), "--only", "nccl-shadowed", "--json", env=env, timeout=300)
    return real, json.loads(check.stdout)


def test_ld_preload_of_an_older_nccl_breaks_import_and_cudafix_says_so(torch_cu_python):
    real, doc = _import_and_check(torch_cu_python, {"LD_PRELOAD": _old_nccl() + "/libnccl.so.2"})
    assert real.returncode != 0 and "undefined symbol: nccl" in real.stderr  # the truth: a real import
    [f] = [f for f in doc["findings"] if f["rule"] == "nccl-shadowed"]
    assert f["severity"] == "error" and "LD_PRELOAD" in " ".join(f["evidence"])
    assert not f["fix"]["auto"] and "unset LD_PRELOAD" in f["fix"]["commands"]


def test_an_older_nccl_on_ld_library_path_does_not_shadow_a_wheel_torch(torch_cu_python):
    # torch's wheels reach nvidia/nccl through DT_RPATH, searched before LD_LIBRARY_PATH
    real, doc = _import_and_check(torch_cu_python, {"LD_LIBRARY_PATH": _old_nccl()})
    assert real.returncode == 0, real.stderr
    assert not [f for f in doc["findings"] if f["rule"] == "nccl-shadowed"]


def test_distributed_findings_never_reach_the_import_hook():
    """NCCL settings matter only to a process that runs collectives: `check` reports them, the
    `import torch` hook of every other process stays silent about them (docs/hook.md)."""
    from cudafix import rules
    from cudafix.hook import plan as hookplan
    from cudafix.model.findings import DISTRIBUTED

    s = _snap(lambda d: d["env"].update(NCCL_SOCKET_IFNAME="ens", NCCL_P2P_DISABLE="1"))
    found = rules.findings(rules.run(s))
    nccl = [f for f in found if f.rule in ("nccl-interface-missing", "nccl-slow-path")]
    assert sorted(f.rule for f in nccl) == ["nccl-interface-missing", "nccl-slow-path"]
    assert all(f.scope == DISTRIBUTED for f in nccl)
    assert not [w for w in hookplan.build_entry(found, {}, []).warns if w[0].startswith("nccl-")]

