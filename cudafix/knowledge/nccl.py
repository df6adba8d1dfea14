"""NCCL facts: how its interface filters are read, and which of its variables are debugging knobs.

Source: NCCL User Guide, "Environment Variables"
(https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html):
- NCCL_SOCKET_IFNAME: "a list of prefixes to filter interfaces ... separated by the , symbol.
  Using the ^ symbol, NCCL will exclude interfaces starting with any prefix in that list. To match
  (or not) an exact interface name, begin the prefix string with the = character."
  (`^=docker0`: not docker0.)  NCCL's source (NVIDIA/nccl src/os/linux.cc, src/misc/socket.cc)
  adds: only interfaces with an IPv4/IPv6 address that are running are candidates; a value of at
  most one character is ignored (NCCL then picks the interface itself, and only that automatic
  choice avoids docker* and lo); a user list excludes nothing implicitly (`^docker` can pick lo).
- NCCL_IB_HCA: the same list syntax for RDMA devices, each token optionally ``:port``
  (`=mlx5_0:1,mlx5_1:1`, `^=mlx5_1`).
- "Other parameters listed in the 'Debugging' section should not be used in production nor
  retained in scripts ... Keeping them set may result in sub-optimal behavior, crashes, or hangs."
  NCCL_P2P_DISABLE, NCCL_SHM_DISABLE, NCCL_IB_DISABLE and NCCL_DEBUG are in that section.
"""

from __future__ import annotations

import re

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import List, Optional, Sequence, Tuple

from cudafix.model.record import record

ENV_DOC = "https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html"
SOURCE_REPO = "NVIDIA/nccl"
TROUBLESHOOTING_DOC = "https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/troubleshooting.html"


@record(frozen=True)
class SlowPathVariable:
    """A transport switch that, left on, forces NCCL onto a slower path."""

    name: str
    disables: str  # what it turns off
    falls_back_to: str  # what NCCL uses instead


SLOW_PATHS: Tuple[SlowPathVariable, ...] = (
    SlowPathVariable("NCCL_P2P_DISABLE", "direct GPU-to-GPU transfers (NVLink / PCI peer-to-peer)",
                     "copies through host shared memory or the network"),
    SlowPathVariable("NCCL_SHM_DISABLE", "shared-memory transport between processes of one node",
                     "the network (IB or sockets) inside the node"),
    SlowPathVariable("NCCL_IB_DISABLE", "InfiniBand / RoCE (IB verbs)",
                     "TCP sockets (NCCL_SOCKET_IFNAME)"),
)
VERBOSE_DEBUG_LEVELS = ("INFO", "TRACE")  # NCCL_DEBUG levels that log per operation/connection


@record(frozen=True)
class DeviceFilter:
    """NCCL_SOCKET_IFNAME / NCCL_IB_HCA parsed as NCCL parses them (NVIDIA/nccl src/misc/utils.cc
    parseStringList / matchIfList; the ^ and = prefixes in src/os/linux.cc ncclOsFindInterfaces and
    src/transport/net_ib/init.cc): an optional "^" (exclude), then an optional "=" (exact names),
    then ","-separated entries (empty ones skipped), each "<name>[:<port>]"."""

    exclude: bool  # leading ^
    exact: bool  # = after the optional ^
    tokens: Tuple[str, ...]  # names or prefixes, the :port part removed
    ports: Tuple[int, ...] = ()  # per token: its port, -1 when none (matches every port)


def _atoi(text: str) -> int:
    """C atoi: the leading decimal digits (after an optional sign), else 0."""
    m = re.match(r"\s*([+-]?\d+)", text)
    return int(m.group(1)) if m else 0


def parse_device_filter(value: str, with_ports: bool = False) -> DeviceFilter:
    """``with_ports`` is kept for callers: NCCL splits off ":port" for both variables."""
    s = value
    exclude = s.startswith("^")
    if exclude:
        s = s[1:]
    exact = s.startswith("=")
    if exact:
        s = s[1:]
    tokens, ports = [], []
    for entry in s.split(","):
        name, _, rest = entry.partition(":")
        if not name:
            continue  # strtok skips empty entries; an entry without a name is dropped
        port = rest.split(":", 1)[0]
        tokens.append(name)
        ports.append(_atoi(port) if port else -1)
    return DeviceFilter(exclude, exact, tuple(tokens), tuple(ports))


def _matches(name: str, tok: str, exact: bool) -> bool:
    return name == tok if exact else name.startswith(tok)


def matches(f: DeviceFilter, name: str, port: int = -1) -> bool:
    """Whether NCCL uses device ``name`` (``port``: an IB port, -1 for a socket interface)."""
    if not f.tokens:  # "an exception for the case where no user list is defined": all match
        hit = True
    else:
        ports = f.ports or (-1,) * len(f.tokens)
        hit = any(_matches(name, t, f.exact) and (port == -1 or p == -1 or port == p) for t, p in zip(f.tokens, ports))
    return hit != f.exclude


def selected_devices(f: DeviceFilter, devices: Sequence[str], implicit_excludes: Sequence[str] = ()) -> List[str]:
    """The devices NCCL may use under filter ``f``; a device "<name>:<port>" is matched with its port.
    With a user list NCCL excludes nothing implicitly (the loopback is skipped only by its
    automatic choice, when NCCL_SOCKET_IFNAME is unset); ``implicit_excludes`` stays for callers."""
    out = []
    for d in devices:
        name, _, port = d.partition(":")
        if d in implicit_excludes:
            continue
        if matches(f, name, int(port) if port.isdigit() else -1):
            out.append(d)
    return out


def socket_ifname_read(value: Optional[str]) -> bool:
    """NCCL reads NCCL_SOCKET_IFNAME only when it is longer than one character (src/misc/socket.cc
    ncclFindInterfaces: ``env && strlen(env) > 1``); otherwise it picks the interface itself."""
    return value is not None and len(value) > 1
