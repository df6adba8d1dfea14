"""Which node of a cluster this is, and the network devices NCCL can be pointed at.

Identity: the hostname, and the cluster engine's own node id where the process runs under one —
Slurm sets SLURMD_NODENAME in every task's environment (https://slurm.schedmd.com/srun.html,
"OUTPUT ENVIRONMENT VARIABLES"); `cudafix fleet --ray` and the Kubernetes manifest in deploy/
pass CUDAFIX_NODE_ENGINE / CUDAFIX_NODE_ID explicitly (Ray's node id, the downward API's
spec.nodeName).  Devices: /sys/class/net (socket interfaces, NCCL_SOCKET_IFNAME) and
/sys/class/infiniband (HCAs, NCCL_IB_HCA).
"""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import List, Mapping, Optional, Tuple

from cudafix.model.snapshot import NodeInfo
from cudafix.probes.machine.host import describe_oserror, join_root
from cudafix.probes.machine.ifaddrs import active_ib_ports, socket_interfaces

MAX_DEVICES = 1024
NET_DIR = "/sys/class/net"
IB_DIR = "/sys/class/infiniband"


def _list_dir(root: str, path: str) -> Tuple[Optional[List[str]], str]:
    full = join_root(root, path)
    try:
        names = sorted(os.listdir(full))[:MAX_DEVICES]
    except FileNotFoundError:
        return [], "%s absent: none" % path
    except OSError as exc:
        return None, "%s: %s" % (path, describe_oserror(exc))
    return names, path


def engine_identity(env: Mapping[str, str]) -> Tuple[Optional[str], Optional[str], str]:
    """(engine, node id, found via) from the environment the engine gave this process."""
    if env.get("CUDAFIX_NODE_ENGINE") or env.get("CUDAFIX_NODE_ID"):
        return env.get("CUDAFIX_NODE_ENGINE") or None, env.get("CUDAFIX_NODE_ID") or None, "CUDAFIX_NODE_ENGINE / CUDAFIX_NODE_ID"
    if env.get("SLURMD_NODENAME"):
        return "slurm", env["SLURMD_NODENAME"], "SLURMD_NODENAME"
    return None, None, "no cluster engine in the environment (SLURMD_NODENAME, CUDAFIX_NODE_ID unset)"


def probe_node(env: Mapping[str, str], root: str = "/") -> NodeInfo:
    info = NodeInfo()
    try:
        # gethostname(2) is uname(2)'s nodename on Linux (glibc): os.uname spares importing socket
        info.hostname = (os.uname().nodename if hasattr(os, "uname") else _gethostname()) or None
        info.found_via["hostname"] = "gethostname()"
    except OSError as exc:
        info.unknown["hostname"] = describe_oserror(exc)
    info.engine, info.node_id, info.found_via["node_id"] = engine_identity(env)
    for field, path in (("net_interfaces", NET_DIR), ("ib_devices", IB_DIR)):
        names, via = _list_dir(root, path)
        setattr(info, field, names)
        (info.found_via if names is not None else info.unknown)[field] = via
    if root in ("", "/"):
        usable, via = socket_interfaces()
    else:
        usable, via = None, "not read under a test root (getifaddrs reads this machine)"
    info.socket_interfaces = usable
    (info.found_via if usable is not None else info.unknown)["socket_interfaces"] = via
    if info.ib_devices is not None:
        ports, via = active_ib_ports(root, info.ib_devices)
        info.ib_ports = ports
        (info.found_via if ports is not None else info.unknown)["ib_ports"] = via
    return info


def node_name(info: NodeInfo) -> str:
    """How reports name a node: the engine's id, else the hostname."""
    return info.node_id or info.hostname or "?"


def _gethostname() -> str:
    import socket

    return socket.gethostname()
