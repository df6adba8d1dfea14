"""nccl-interface-missing against NCCL itself.

Sockets: real interfaces made in a private network namespace (`unshare -n -m` with its own sysfs; veth pairs and a
bridge: this kernel has no dummy module), and the real NCCL of torch-cu's nvidia-nccl wheel
calling ncclGetUniqueId (its bootstrap interface search needs no GPU).  For each NCCL_SOCKET_IFNAME
value the truth is what NCCL did: the interface it used ("Bootstrap: Using X"), or its failure
("Bootstrap : no socket interface found").  cudafix's verdict, from its own probe run in the same
namespace, must agree.

IB: no RDMA hardware here, so a synthetic /sys/class/infiniband tree (written by this test: device
names, port states and link layers as the kernel lays them out) and the examples of NCCL's
documentation for NCCL_IB_HCA (knowledge/nccl.py ENV_DOC).
"""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

from cudafix.model.findings import OK, PROBLEM
from cudafix.model.snapshot import PythonDist, Snapshot, TorchBuild
from cudafix.probes.machine.node import probe_node
from cudafix.rules import nccl as rnccl
from tests.conftest import require

REPO = pathlib.Path(__file__).resolve().parent.parent
VENVS = pathlib.Path.home() / ".cache" / "cudafix-venvs"
SETUP = " && ".join([
    "mount -t sysfs sysfs /sys",  # this namespace's /sys/class/net (needs -m: a private mount namespace)
    "ip link set lo up",
    "ip link add eth7 type veth peer name ens5",  # eth7: IPv4; ens5: up, no address at all
    "ip link set eth7 up", "ip link set ens5 up",
    "sysctl -qw net.ipv6.conf.ens5.disable_ipv6=1",
    "ip addr add 10.9.0.1/24 dev eth7",
    "ip link add br9 type bridge", "ip addr add 10.8.0.1/24 dev br9",  # an address, but down
    "sleep 0.3",
])
VALUES = ["ens", "=eth7", "^eth", "eth7:1", "e", "^", "br", "^=eth7", "=eth", "docker,eth7", "^eth,lo", "=ens5"]

DRIVER = r"""
import ctypes, json, os, subprocess, sys
from cudafix.model.snapshot import Snapshot
from cudafix.probes.machine.node import probe_node
from cudafix.rules import nccl as rnccl
lib, values = sys.argv[1], json.loads(sys.argv[2])
call = "import ctypes,sys; b=ctypes.create_string_buffer(128); sys.exit(ctypes.CDLL(sys.argv[1]).ncclGetUniqueId(b))"
node = probe_node(os.environ)
out = {"node": {"net": node.net_interfaces, "usable": node.socket_interfaces}, "cases": {}}
for v in values:
    env = dict(os.environ, NCCL_SOCKET_IFNAME=v, NCCL_DEBUG="INFO")
    p = subprocess.run([sys.executable, "-c", call, lib], env=env, capture_output=True, text=True, timeout=60)
    text = p.stdout + p.stderr
    used = [l.split("Bootstrap: Using ", 1)[1].split(":", 1)[0] for l in text.splitlines() if "Bootstrap: Using " in l]
    snap = Snapshot()
    snap.env = {"NCCL_SOCKET_IFNAME": v}
    snap.node = node
    [o] = rnccl.check_nccl_interfaces(snap)
    out["cases"][v] = {"nccl_rc": p.returncode, "used": used,
                       "nccl_failed": "no socket interface found" in text, "info_lines": text.count("NCCL INFO"),
                       "verdict": o.verdict, "message": o.message, "evidence": list(o.evidence)}
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def netns_results(tmp_path_factory):
    for tool in ("unshare", "ip", "sysctl"):
        require(shutil.which(tool) is not None, tool)
    libs = sorted((VENVS / "torch-cu").glob("lib/python3*/site-packages/nvidia/nccl/lib/libnccl.so.2"))
    require(libs, "torch-cu venv with nvidia/nccl/lib/libnccl.so.2")
    probe = subprocess.run(["unshare", "-n", "-m", "sh", "-c", "mount -t sysfs sysfs /sys"], capture_output=True)
    require(probe.returncode == 0, "unshare -n -m and a sysfs mount (private network and mount namespaces: root)")
    driver = tmp_path_factory.mktemp("netns") / "driver.py"
    driver.write_text(DRIVER)
    cmd = "%s && exec %s %s %s %s" % (SETUP, sys.executable, driver, libs[0], "'%s'" % json.dumps(VALUES))
    env = dict(os.environ, PYTHONPATH=str(REPO))
    p = subprocess.run(["unshare", "-n", "-m", "sh", "-c", cmd], capture_output=True, text=True, env=env, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


def test_probe_sees_what_getifaddrs_offers(netns_results):
    node = netns_results["node"]
    assert {"eth7", "ens5", "br9", "lo"} <= set(node["net"])
    assert set(node["usable"]) == {"eth7", "lo"}  # ens5: no address; br9: not running


@pytest.mark.parametrize("value", VALUES)
def test_verdict_agrees_with_nccl(netns_results, value):
    c = netns_results["cases"][value]
    if c["nccl_failed"]:
        assert c["verdict"] == PROBLEM, c
        assert c["nccl_rc"] == 5  # ncclInvalidUsage
    else:
        assert c["nccl_rc"] == 0 and len(c["used"]) == 1, c
        assert c["verdict"] == OK, c
        if len(value) > 1:
            assert c["used"][0] in c["message"], c  # the interface NCCL used is one cudafix names
        else:
            assert "ignored" in c["message"]  # NCCL read no list: it chose by itself


def test_exists_without_an_address_is_named(netns_results):
    c = netns_results["cases"]["ens"]
    assert c["verdict"] == PROBLEM and any("ens5 exists but has no IPv4/IPv6 address" in e for e in c["evidence"])


def test_nccl_debug_info_really_logs(netns_results):
    # the basis of nccl-debug-verbose's severity: INFO adds lines, nothing fails
    c = netns_results["cases"]["=eth7"]
    assert c["info_lines"] > 0 and c["nccl_rc"] == 0


# -- NCCL_IB_HCA: NCCL's documented examples over a synthetic sysfs -----------------------------

PORTS = {  # device -> {port: (state, link_layer)}
    "mlx5_0": {"1": ("4: ACTIVE", "InfiniBand")},
    "mlx5_1": {"1": ("4: ACTIVE", "Ethernet")},
    "mlx5_4": {"1": ("1: DOWN", "InfiniBand")},
    "mlx5_10": {"1": ("4: ACTIVE", "InfiniBand"), "2": ("4: ACTIVE", "InfiniBand")},
}


def _ib_root(tmp_path: pathlib.Path, ports=PORTS) -> str:
    for dev, pp in ports.items():
        for port, (state, layer) in pp.items():
            d = tmp_path / "sys" / "class" / "infiniband" / dev / "ports" / port
            d.mkdir(parents=True)
            (d / "state").write_text(state + "\n")
            (d / "link_layer").write_text(layer + "\n")
    (tmp_path / "sys" / "class" / "net").mkdir(parents=True, exist_ok=True)
    return str(tmp_path)


def _ib(tmp_path, value, extra_env=None, torch_cuda="13.0"):
    s = Snapshot()
    s.env = dict({"NCCL_IB_HCA": value}, **(extra_env or {}))
    s.node = probe_node(s.env, root=_ib_root(tmp_path))
    s.torch = [TorchBuild(dist=PythonDist(name="torch", version="2.14.1"), version="2.14.1", cuda=torch_cuda)]
    return list(rnccl.check_nccl_interfaces(s))


def test_ib_ports_probed(tmp_path):
    node = probe_node({}, root=_ib_root(tmp_path))
    assert node.ib_ports == ["mlx5_0:1", "mlx5_1:1", "mlx5_10:1", "mlx5_10:2"]


@pytest.mark.parametrize("value, selects", [
    ("mlx5", ["mlx5_0:1", "mlx5_1:1", "mlx5_10:1", "mlx5_10:2"]),  # "Use all ports of all cards starting with mlx5"
    ("=mlx5_0:1,mlx5_1:1", ["mlx5_0:1", "mlx5_1:1"]),              # "Use ports 1 of cards mlx5_0 and mlx5_1"
    ("^=mlx5_1,mlx5_4", ["mlx5_0:1", "mlx5_10:1", "mlx5_10:2"]),   # "Do not use cards mlx5_1 and mlx5_4"
    ("mlx5_10:2", ["mlx5_10:2"]),                                   # a port: only that one
])
def test_ib_hca_documented_examples(tmp_path, value, selects):
    [o] = _ib(tmp_path, value)
    assert o.verdict == OK and o.message.endswith("selects " + ", ".join(selects))


def test_ib_hca_no_match_inactive_port_and_inert_cases(tmp_path):
    [o] = _ib(tmp_path / "a", "mlx4")
    assert o.verdict == PROBLEM and o.severity == "warning"
    [o] = _ib(tmp_path / "b", "=mlx5_4")  # exists, its only port is down: NCCL skips it
    assert o.verdict == PROBLEM
    [o] = _ib(tmp_path / "c", "mlx4", {"NCCL_IB_DISABLE": "1"})  # IB off: the list changes nothing
    assert o.verdict == OK and "changes nothing" in o.message
    [o] = _ib(tmp_path / "d", "mlx4", torch_cuda=None)  # a CPU torch has no NCCL
    assert o.verdict == OK and "CPU build" in o.message
