"""NCCL facts: how its interface filters are read, and which of its variables are debugging knobs.

Source: NCCL User Guide, "Environment Variables"
(https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html):
- NCCL_SOCKET_IFNAME: "a list of prefixes to filter interfaces ... separated by the , symbol.
  Using the ^ symbol, NCCL will exclude interfaces starting with any prefix in that list. To match
  (or not) an exact interface name, begin the prefix string with the = character."
  (`^=docker0`: not docker0.)  Loopback is used only when named explicitly.
- NCCL_IB_HCA: the same list syntax for RDMA devices, each token optionally ``:port``
  (`=mlx5_0:1,mlx5_1:1`, `^=mlx5_1`).
- "Other parameters listed in the 'Debugging' section should not be used in production nor
  retained in scripts ... Keeping them set may result in sub-optimal behavior, crashes, or hangs."
  NCCL_P2P_DISABLE, NCCL_SHM_DISABLE, NCCL_IB_DISABLE and NCCL_DEBUG are in that section.
"""

from __future__ import annotations

from typing import List, Sequence, Tuple

from cudafix.model.record import record

ENV_DOC = "https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html"
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
    """NCCL_SOCKET_IFNAME / NCCL_IB_HCA parsed as NCCL does."""

    exclude: bool  # leading ^
    exact: bool  # = after the optional ^
    tokens: Tuple[str, ...]  # names or prefixes (IB: the :port part removed)


def parse_device_filter(value: str, with_ports: bool = False) -> DeviceFilter:
    s = value.strip()
    exclude = s.startswith("^")
    if exclude:
        s = s[1:]
    exact = s.startswith("=")
    if exact:
        s = s[1:]
    tokens = []
    for tok in s.split(","):
        tok = tok.strip()
        if with_ports:
            tok = tok.split(":", 1)[0]
        if tok:
            tokens.append(tok)
    return DeviceFilter(exclude, exact, tuple(tokens))


def _matches(name: str, tok: str, exact: bool) -> bool:
    return name == tok if exact else name.startswith(tok)


def selected_devices(f: DeviceFilter, devices: Sequence[str], implicit_excludes: Sequence[str] = ()) -> List[str]:
    """The devices NCCL may use under filter ``f``.  ``implicit_excludes``: names NCCL skips unless
    named (the loopback "lo" for sockets)."""
    out = []
    for d in devices:
        hit = any(_matches(d, t, f.exact) for t in f.tokens)
        if f.exclude:
            if not hit and d not in implicit_excludes:
                out.append(d)
        elif hit:
            out.append(d)
    return out
