"""NCCL rules: the library torch's collectives load, and NCCL variables that break or slow a job.

Facts and syntax: cudafix/knowledge/nccl.py (NCCL User Guide, "Environment Variables").
Rules that compare nodes with each other live with `cudafix fleet` (cudafix/fleet/checks.py).
"""

from __future__ import annotations

from typing import Iterable, List, Optional

from cudafix.knowledge import nccl as kn
from cudafix.model.findings import DISTRIBUTED, ERROR, INFO, WARNING, Outcome, Rule
from cudafix.model.fixes import UNSET, EnvOp, EnvPatch, Fix
from cudafix.model.snapshot import Snapshot
from cudafix.rules._util import ok, problem, unknown
from cudafix.rules.libs import is_nccl, shadowed

# -- nccl-shadowed ---------------------------------------------------------------------------


def check_nccl_shadowed(snap: Snapshot) -> Iterable[Outcome]:
    if snap.libraries.resolutions and not any(is_nccl(r.soname) for r in snap.libraries.resolutions):
        return [ok("torch loads no NCCL library (a build without distributed GPU support)", subject="libnccl")]
    return shadowed(snap, is_nccl, "NCCL library")


# -- nccl-interface-missing ------------------------------------------------------------------


def _devices(snap: Snapshot, field: str) -> Optional[List[str]]:
    return getattr(snap.node, field, None)


def check_nccl_interfaces(snap: Snapshot) -> Iterable[Outcome]:
    out: List[Outcome] = []
    for var, field, with_ports, implicit, sev, effect in (
        ("NCCL_SOCKET_IFNAME", "net_interfaces", False, ("lo",), ERROR,
         "NCCL finds no socket interface: bootstrap fails at init_process_group (\"Bootstrap : no socket interface found\")"),
        ("NCCL_IB_HCA", "ib_devices", True, (), WARNING,
         "NCCL's IB transport finds no device and falls back to TCP sockets: inter-node collectives run at socket speed"),
    ):
        value = snap.env.get(var)
        if value is None:
            continue
        devices = _devices(snap, field)
        if devices is None:
            why = snap.node.unknown.get(field, "the snapshot has no device list (recorded by an older cudafix)")
            out.append(unknown("%s=%r: whether it names a device on this node is unknown" % (var, value), why, subject=var))
            continue
        f = kn.parse_device_filter(value, with_ports=with_ports)
        chosen = kn.selected_devices(f, devices, implicit)
        if chosen:
            out.append(ok("%s=%r selects %s" % (var, value, ", ".join(chosen)), subject=var))
            continue
        ev = ["%s=%r %s %s %s" % (var, value, "excludes" if f.exclude else "keeps only", "exactly" if f.exact else "names starting with",
                                  ", ".join(f.tokens) or "(nothing)"),
              "this node has %s" % (", ".join(devices) if devices else "none (%s)" % snap.node.found_via.get(field, field)),
              effect]
        out.append(problem("%s=%r matches no %s on this node" % (var, value, "network interface" if field == "net_interfaces" else "InfiniBand device"),
                           ev, fix=Fix(summary="set %s to this node's devices (one of: %s), or unset it" % (var, ", ".join(devices) or "none"),
                                       commands=("unset %s" % var,)),
                           severity=sev, subject=var))
    if not out:
        return [ok("NCCL_SOCKET_IFNAME and NCCL_IB_HCA are unset: NCCL picks interfaces itself", subject="NCCL interfaces")]
    return out


# -- nccl-slow-path --------------------------------------------------------------------------


def _on(value: str) -> bool:
    """NCCL reads these as integers: any value but 0 turns the transport off."""
    v = value.strip()
    return bool(v) and v != "0"


def check_nccl_slow_path(snap: Snapshot) -> Iterable[Outcome]:
    out: List[Outcome] = []
    for sp in kn.SLOW_PATHS:
        value = snap.env.get(sp.name)
        if value is None or not _on(value):
            continue
        out.append(problem(
            "%s=%s: NCCL does not use %s" % (sp.name, value, sp.disables),
            ["%s=%s turns off %s; NCCL uses %s instead" % (sp.name, value, sp.disables, sp.falls_back_to),
             "NCCL lists it under \"Debugging\": \"should not be used in production nor retained in scripts\" (%s)" % kn.ENV_DOC],
            fix=Fix(summary="unset %s unless it works around a known fault on this machine" % sp.name,
                    env=EnvPatch((EnvOp(UNSET, sp.name),)), commands=("unset %s" % sp.name,)),
            severity=WARNING, subject=sp.name,
        ))
    return out or [ok("no NCCL transport is switched off", subject="NCCL transports")]


# -- nccl-debug-verbose ----------------------------------------------------------------------


def check_nccl_debug(snap: Snapshot) -> Iterable[Outcome]:
    value = snap.env.get("NCCL_DEBUG")
    if value is None or value.strip().upper() not in kn.VERBOSE_DEBUG_LEVELS:
        return [ok("NCCL_DEBUG is %s" % ("unset" if value is None else repr(value)), subject="NCCL_DEBUG")]
    return [problem(
        "NCCL_DEBUG=%s: every rank logs NCCL's %s messages" % (value, value.strip().upper()),
        ["NCCL_DEBUG=%s prints initialisation and connection details from every rank (TRACE: per call, where the build has tracing)" % value,
         "NCCL lists it under \"Debugging\": \"should not be used in production nor retained in scripts\" (%s)" % kn.ENV_DOC],
        fix=Fix(summary="unset NCCL_DEBUG (or NCCL_DEBUG=WARN) outside a debugging session", commands=("unset NCCL_DEBUG",)),
        severity=INFO, subject="NCCL_DEBUG",
    )]


RULES = (
    Rule(
        id="nccl-shadowed",
        severity=ERROR,
        title="The NCCL library torch loads is another copy than torch's own, with a different version",
        check=check_nccl_shadowed,
        auto=True,
        cause="A system NCCL (Debian/Ubuntu libnccl2, an HPC module, a toolkit's lib dir) on LD_LIBRARY_PATH is searched before torch's own nvidia-nccl wheel or conda nccl. torch then runs its collectives on another NCCL than it was built with: an older one lacks symbols torch calls; nodes of one job that load different NCCL versions can fail or hang in collectives.",
        symptoms=(
            "ImportError: .../torch/lib/libtorch_cuda.so: undefined symbol: ncclMemFree",
            "ImportError: .../torch/lib/libtorch_cuda.so: undefined symbol: ncclCommRegister",
            "a multi-node job hangs in its first all_reduce on one node only",
        ),
        evidence_used="the libnccl.so.2 the loader would pick (simulated from the ELF headers and LD_LIBRARY_PATH), torch's own copy, both versions",
        fix_text="automatic: torch's own libnccl is preloaded by absolute path before torch loads, and the shadowing LD_LIBRARY_PATH entry is removed on activation.",
        sources=(kn.TROUBLESHOOTING_DOC, "pytorch/pytorch#119072"),
        needs=("torch", "libraries"),
    ),
    Rule(
        id="nccl-interface-missing",
        severity=ERROR,
        title="NCCL_SOCKET_IFNAME / NCCL_IB_HCA names no device that exists on this node",
        check=check_nccl_interfaces,
        cause="Job scripts and images carry NCCL_SOCKET_IFNAME / NCCL_IB_HCA values written for one machine type (eth0, ib0, mlx5_0). On a node whose interfaces are named differently (ens*, enp*, bond0, no IB), the filter selects nothing: with sockets NCCL cannot bootstrap; with IB it falls back to TCP.",
        symptoms=(
            "NCCL WARN Bootstrap : no socket interface found",
            "NCCL WARN NET/Socket : No usable listening interface found",
            "NCCL INFO NET/IB : No device found.",
        ),
        evidence_used="the variable's value parsed with NCCL's list syntax (^ exclude, = exact, :port), against /sys/class/net and /sys/class/infiniband of the node",
        fix_text="set the variable to an interface that exists on every node (or a prefix that matches on each), or unset it and let NCCL choose.",
        sources=(kn.ENV_DOC,),
        needs=("env", "node"),
        scope=DISTRIBUTED,
    ),
    Rule(
        id="nccl-slow-path",
        severity=WARNING,
        title="An NCCL transport is switched off (NCCL_P2P_DISABLE, NCCL_SHM_DISABLE, NCCL_IB_DISABLE)",
        check=check_nccl_slow_path,
        cause="These switches are debugging workarounds (for a broken P2P topology, a faulty IB fabric, a container without enough /dev/shm). Left in a script or image they force NCCL onto host copies or TCP for every job.",
        symptoms=("all_reduce bandwidth a fraction of the interconnect's (nccl-tests busbw far below NVLink / IB line rate)",),
        evidence_used="the NCCL_*_DISABLE variables set in the environment",
        fix_text="unset the variable once the fault it worked around is fixed; activation does not remove it on its own.",
        sources=(kn.ENV_DOC,),
        needs=("env",),
        scope=DISTRIBUTED,
    ),
    Rule(
        id="nccl-debug-verbose",
        severity=INFO,
        title="NCCL_DEBUG=INFO/TRACE left on outside a debugging session",
        check=check_nccl_debug,
        cause="NCCL_DEBUG=INFO is the first step of every NCCL debugging guide and often stays in job scripts: every rank then logs its topology, channels and connections.",
        symptoms=("job logs dominated by 'NCCL INFO' lines from every rank",),
        evidence_used="the NCCL_DEBUG variable",
        fix_text="unset NCCL_DEBUG, or NCCL_DEBUG=WARN.",
        sources=(kn.ENV_DOC,),
        needs=("env",),
        scope=DISTRIBUTED,
    ),
)
