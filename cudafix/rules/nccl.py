"""NCCL rules: the library torch's collectives load, and NCCL variables that break or slow a job.

Facts and syntax: cudafix/knowledge/nccl.py (NCCL User Guide, "Environment Variables").
Rules that compare nodes with each other live with `cudafix fleet` (cudafix/fleet/checks.py).
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
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


def nccl_inert(snap: Snapshot) -> Optional[str]:
    """Why NCCL_* settings change nothing for this env's torch, or None: a CPU build has no NCCL.
    (A CUDA build whose libraries name no libnccl may still carry NCCL linked in statically, as
    the torch 1.x wheels did: not inert.)"""
    t = snap.primary_torch
    if t is not None and not t.cuda and not t.hip:
        return "torch %s is a CPU build: it has no NCCL, NCCL_* variables change nothing" % t.full_version
    return None


def _socket(snap: Snapshot, value: str) -> Outcome:
    var = "NCCL_SOCKET_IFNAME"
    if not kn.socket_ifname_read(value):
        return ok("%s=%r is ignored by NCCL (it reads it only when longer than one character): NCCL picks the interface itself" % (var, value), subject=var)
    f = kn.parse_device_filter(value)
    names, usable = snap.node.net_interfaces, snap.node.socket_interfaces
    if names is None and usable is None:
        why = snap.node.unknown.get("net_interfaces", "the snapshot has no interface list (recorded by an older cudafix)")
        return unknown("%s=%r: whether it names a usable interface on this node is unknown" % (var, value), why, subject=var)
    rule_text = "%s=%r %s %s %s" % (var, value, "excludes" if f.exclude else "keeps only", "exactly" if f.exact else "names starting with",
                                    ", ".join(f.tokens) or "(nothing)")
    if usable is None:
        named = kn.selected_devices(f, names or [])
        if named:
            return unknown("%s=%r names %s; whether they have an address is unknown" % (var, value, ", ".join(named)),
                           snap.node.unknown.get("socket_interfaces", "no address list in the snapshot (recorded by an older cudafix)"), subject=var)
        usable_text = "addresses not recorded"
    else:
        chosen = kn.selected_devices(f, usable)
        if chosen:
            return ok("%s=%r selects %s" % (var, value, ", ".join(chosen)), subject=var)
        usable_text = ", ".join(usable) or "none"
    ev = [rule_text, "this node has %s (with an IPv4/IPv6 address and running: %s)" % (", ".join(names or []) or "no interface", usable_text)]
    idle = [n for n in kn.selected_devices(f, names or []) if usable is not None and n not in usable]
    if idle:
        ev.append("%s exist%s but %s no IPv4/IPv6 address or %s not running: NCCL skips such interfaces" % (
            ", ".join(idle), "s" if len(idle) == 1 else "", "has" if len(idle) == 1 else "have", "is" if len(idle) == 1 else "are"))
    ev.append("NCCL finds no socket interface: init_process_group fails (\"Bootstrap : no socket interface found\")")
    fix_to = usable if usable is not None else (names or [])
    return problem("%s=%r matches no usable network interface on this node" % (var, value), ev,
                   fix=Fix(summary="set %s to this node's interfaces (one of: %s), or unset it" % (var, ", ".join(fix_to) or "none"),
                           commands=("unset %s" % var,)), severity=ERROR, subject=var)


def _ib(snap: Snapshot, value: str) -> Outcome:
    var = "NCCL_IB_HCA"
    if _on(snap.env.get("NCCL_IB_DISABLE") or "0"):
        return ok("NCCL_IB_DISABLE=%s: NCCL uses no IB device, %s changes nothing" % (snap.env.get("NCCL_IB_DISABLE"), var), subject=var)
    f = kn.parse_device_filter(value, with_ports=True)
    if not f.tokens and not f.exclude:
        return ok("%s=%r lists no device: NCCL uses every device, as when it is unset" % (var, value), subject=var)
    devices, ports = snap.node.ib_devices, snap.node.ib_ports
    if devices is None:
        why = snap.node.unknown.get("ib_devices", "the snapshot has no device list (recorded by an older cudafix)")
        return unknown("%s=%r: whether it names a device on this node is unknown" % (var, value), why, subject=var)
    if not devices or ports == []:
        return ok("%s=%r: this node has no %s, so NCCL uses sockets whatever it says" % (
            var, value, "RDMA device" if not devices else "active RDMA port"), subject=var)
    if ports is None:
        named = kn.selected_devices(f, devices)
        if named:
            return unknown("%s=%r names %s; whether their ports are active is unknown" % (var, value, ", ".join(named)),
                           snap.node.unknown.get("ib_ports", "no port list in the snapshot (recorded by an older cudafix)"), subject=var)
        have = devices
    else:
        chosen = kn.selected_devices(f, ports)
        if chosen:
            return ok("%s=%r selects %s" % (var, value, ", ".join(chosen)), subject=var)
        have = ports
    ev = ["%s=%r %s %s %s" % (var, value, "excludes" if f.exclude else "keeps only", "exactly" if f.exact else "names starting with",
                              ", ".join("%s%s" % (t, ":%d" % p if p != -1 else "") for t, p in zip(f.tokens, f.ports)) or "(nothing)"),
          "this node has %s" % ", ".join(have),
          "NCCL's IB transport finds no device (\"NET/IB : No device found.\") and falls back to TCP sockets: inter-node collectives run at socket speed"]
    return problem("%s=%r matches no InfiniBand device on this node" % (var, value), ev,
                   fix=Fix(summary="set %s to this node's devices (one of: %s), or unset it" % (var, ", ".join(have)), commands=("unset %s" % var,)),
                   severity=WARNING, subject=var)


def check_nccl_interfaces(snap: Snapshot) -> Iterable[Outcome]:
    sock, ib = snap.env.get("NCCL_SOCKET_IFNAME"), snap.env.get("NCCL_IB_HCA")
    if sock is None and ib is None:
        return [ok("NCCL_SOCKET_IFNAME and NCCL_IB_HCA are unset: NCCL picks interfaces itself", subject="NCCL interfaces")]
    inert = nccl_inert(snap)
    if inert:
        return [ok(inert, subject="NCCL interfaces")]
    out: List[Outcome] = []
    if sock is not None:
        out.append(_socket(snap, sock))
    if ib is not None:
        out.append(_ib(snap, ib))
    return out


# -- nccl-slow-path --------------------------------------------------------------------------


def _on(value: str) -> bool:
    """NCCL reads these as integers: any value but 0 turns the transport off."""
    v = value.strip()
    return bool(v) and v != "0"


def check_nccl_slow_path(snap: Snapshot) -> Iterable[Outcome]:
    inert = nccl_inert(snap)
    if inert and any(snap.env.get(sp.name) is not None for sp in kn.SLOW_PATHS):
        return [ok(inert, subject="NCCL transports")]
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
    inert = nccl_inert(snap)
    if inert:
        return [ok(inert, subject="NCCL_DEBUG")]
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
        severity_basis="error, measured on this project's dev machine: torch 2.14.1+cu130 with torch 2.5.1's NCCL 2.21.5 loaded first fails `import torch` with 'undefined symbol: nccl…' (tests/test_fleet.py, test_ld_preload_of_an_older_nccl_breaks_import_and_cudafix_says_so); the hang between nodes of different NCCL versions is cited (pytorch/pytorch#119072), not measured.",
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
        evidence_used="the variable's value parsed as NCCL parses it (^ exclude, = exact, prefixes, :port; a NCCL_SOCKET_IFNAME of at most one character is ignored), against the interfaces NCCL can use (getifaddrs: an IPv4/IPv6 address and running; /sys/class/net for the names) and the active ports under /sys/class/infiniband; nothing when torch has no NCCL (a CPU build) or NCCL_IB_DISABLE is set",
        fix_text="set the variable to an interface that exists on every node (or a prefix that matches on each), or unset it and let NCCL choose.",
        sources=(kn.ENV_DOC, kn.SOURCE_REPO + " src/os/linux.cc (ncclOsFindInterfaces), src/misc/socket.cc (ncclFindInterfaces), src/misc/utils.cc (parseStringList, matchIfList), src/bootstrap.cc, src/transport/net_ib/init.cc"),
        severity_basis="NCCL_SOCKET_IFNAME: error, measured here with the real NCCL 2.30.7 of torch-cu's nvidia-nccl-cu13 wheel in a network namespace (tests/test_nccl_netns.py): a filter that keeps no usable interface makes ncclGetUniqueId fail with ncclInvalidUsage (5) and 'NCCL WARN Bootstrap : no socket interface found' (src/bootstrap.cc), so no communicator is created. NCCL_IB_HCA: warning, cited, not measured (no RDMA hardware here): NCCL's IB transport then reports 'NET/IB : No device found.' (src/transport/net_ib/init.cc) and NCCL falls back to its socket transport; the job runs, slower.",
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
        severity_basis="warning, cited, not measured: NCCL's documentation lists these switches under 'Debugging' (\"should not be used in production nor retained in scripts ... may result in sub-optimal behavior, crashes, or hangs\"); the job still runs, on a slower transport.",
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
        severity_basis="info, cited: NCCL's documentation lists NCCL_DEBUG under 'Debugging'; INFO only adds log lines from every rank (seen here: NCCL_DEBUG=INFO printed NCCL's 'NCCL INFO …' lines from ncclGetUniqueId in tests/test_nccl_netns.py), nothing fails.",
        needs=("env",),
        scope=DISTRIBUTED,
    ),
)
