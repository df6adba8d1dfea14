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
from typing import Callable, Dict, Iterator, Optional, Tuple

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


# -- real-size fleets with realistic variation (tests/test_fleet_identity.py, bench/fleet.py) ------

EXAMPLES = Path(__file__).resolve().parent.parent / "cudafix" / "data" / "examples"
# Two partitions of one cluster, each node one of the bundled recordings (README.md there: the same
# H200 machine, its plain env and its rich image env); what varies is stated per function below.
STACKS = ("h200-torch2.11-cu130", "h200-rich-torch2.11-cu130")


def another_torch(d: dict) -> None:
    """A node left on the previous torch release (a stale image): version and CUDA variant."""
    t = d["torch"][0]
    t["version"], t["cuda"] = "2.10.0+cu128", "12.8"
    t["dist"]["version"] = "2.10.0+cu128"


def stray_ld_library_path(d: dict) -> None:
    """A user's old CUDA 12.4 lib64 left first on LD_LIBRARY_PATH (a dotfile): nothing resolves there."""
    d["env"]["LD_LIBRARY_PATH"] = "/home/alice/cuda-12.4/lib64:" + d["env"].get("LD_LIBRARY_PATH", "")
    d["libraries"]["ld_library_path"] = ["/home/alice/cuda-12.4/lib64"] + d["libraries"]["ld_library_path"]


def missing_gpu(d: dict) -> None:
    """NVML sees no GPU (a card fallen off the bus): the node has none to give a job."""
    d["gpus"]["gpus"], d["gpus"]["visible"] = [], []


OUTLIERS = ((101, older_driver), (103, another_torch), (107, stray_ld_library_path), (211, missing_gpu))


def real_size_node(i: int, bases: Dict[str, dict]) -> dict:
    """Node ``i`` of a generated cluster: a bundled recording (7 in 10 nodes the plain stack, the
    rest the rich image) with its own identity -- hostname, Slurm node id, snapshot time, GPU UUID,
    and on every 4th node another PCI slot -- and, for about 3.5% of the nodes, one alteration
    (OUTLIERS: i % 101 == 0 another driver, i % 103 another torch, i % 107 a stray
    LD_LIBRARY_PATH, i % 211 a missing GPU)."""
    stack = STACKS[0] if i % 10 < 7 else STACKS[1]
    d = copy.deepcopy(bases[stack])
    host, d["created"], uuid, slot = real_size_node_identity(i)
    d["node"] = {"hostname": host, "engine": "slurm", "node_id": host,
                 "net_interfaces": ["eth0", "ib0", "lo"], "ib_devices": ["mlx5_0"],
                 "socket_interfaces": ["eth0", "ib0", "lo"], "ib_ports": ["mlx5_0:1"],
                 "found_via": {"hostname": "gethostname()", "node_id": "SLURMD_NODENAME"}, "unknown": {}}
    for g in d["gpus"]["gpus"]:  # one GPU, as recorded
        g["uuid"], g["pci_bus_id"] = uuid, slot
    for mod, alter in OUTLIERS:
        if i % mod == 0:
            alter(d)
            break
    return d


def real_size_bases() -> Dict[str, dict]:
    return {s: json.loads((EXAMPLES / (s + ".json")).read_text(encoding="utf-8")) for s in STACKS}


def real_size_texts(n: int) -> Iterator[Tuple[str, str]]:
    """(file name, text) of nodes 1..n as `cudafix snapshot -o` writes them (indent 2): the same
    documents as real_size_node's, made fast for 100,000 nodes -- each kind of node is dumped
    once and the next node of its kind takes its text with the identity values replaced."""
    bases = real_size_bases()
    made: Dict[Tuple[str, int], Tuple[int, str]] = {}
    for i in range(1, n + 1):
        kind = (STACKS[0] if i % 10 < 7 else STACKS[1], next((m for m, _ in OUTLIERS if i % m == 0), 0))
        if kind not in made:
            made[kind] = (i, json.dumps(real_size_node(i, bases), indent=2))
        j, text = made[kind]
        if j != i:
            a, b = real_size_node_identity(j), real_size_node_identity(i)
            for old, new in zip(a, b):
                text = text.replace(json.dumps(old), json.dumps(new))
        yield "gpu-%05d.json" % i, text


def real_size_node_identity(i: int) -> Tuple[str, ...]:
    """Node ``i``'s identity values as real_size_node sets them (hostname = node id, time, UUID, slot)."""
    return ("gpu-%05d" % i, "2026-12-01T%02d:%02d:%02d+00:00" % (i // 3600 % 24, i // 60 % 60, i % 60),
            "GPU-%08x-%04x-5a65-cc32-%012x" % (i * 2654435761 % 2 ** 32, i % 65536, i * 40503),
            "00000000:%02X:00.0" % (0x18 if i % 4 else 0x2A))
