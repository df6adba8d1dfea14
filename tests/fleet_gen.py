"""Synthetic fleets for the `cudafix fleet` tests and bench/fleet.py.

Generator, not a recording: every node is the real H200 recording
(tests/fixtures/h200/snapshot.json: recorded on an NVIDIA H200 machine, driver 580.159.04,
2026-11-30, `cudafix snapshot`) with a node identity added and, for the nodes named in
``alter``, the stated overrides applied.  The expected outliers are the altered nodes: the test
knows them from its own input, not from cudafix.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Callable, Dict, Optional

BASE = Path(__file__).resolve().parent / "fixtures" / "h200" / "snapshot.json"
Alter = Callable[[dict], None]


def base() -> dict:
    return json.loads(BASE.read_text(encoding="utf-8"))


def node_name(i: int) -> str:
    return "node%04d" % i


def make_fleet(n: int, alter: Optional[Dict[int, Alter]] = None) -> Dict[str, dict]:
    """{node name: snapshot dict} for nodes 1..n."""
    b = base()
    out = {}
    for i in range(1, n + 1):
        d = copy.deepcopy(b)
        d["node"] = {"hostname": node_name(i), "engine": "slurm", "node_id": node_name(i),
                     "net_interfaces": ["eth0", "ib0", "lo"], "ib_devices": ["mlx5_0"],
                     "socket_interfaces": ["eth0", "ib0", "lo"], "ib_ports": ["mlx5_0:1"]}
        if alter and i in alter:
            alter[i](d)
        out[node_name(i)] = d
    return out


def foreign_nccl(d: dict) -> None:
    """A site libnccl 2.18.1 first on LD_LIBRARY_PATH (as an HPC module would put it)."""
    d["env"]["LD_LIBRARY_PATH"] = "/opt/nccl-2.18.1/lib:" + d["env"].get("LD_LIBRARY_PATH", "")
    for r in d["libraries"]["resolutions"]:
        if r["soname"].startswith("libnccl.so"):
            r["resolved"] = "/opt/nccl-2.18.1/lib/libnccl.so.2.18.1"
            r["resolved_via"] = "LD_LIBRARY_PATH"
            r["resolved_version"] = "2.18.1"


def older_driver(d: dict) -> None:
    """A node left on the R570 branch after a partial upgrade (kernel module and libraries)."""
    d["driver"]["kernel_version"] = d["driver"]["libcuda_version"] = d["driver"]["nvml_version"] = "570.86.15"
    d["driver"]["cuda_version"] = 12080
    d["driver"]["libcuda_path"] = "/usr/local/nvidia/lib64/libcuda.so.570.86.15"


def write(fleet: Dict[str, dict], directory: Path) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for name, d in fleet.items():
        (directory / (name + ".json")).write_text(json.dumps(d), encoding="utf-8")
