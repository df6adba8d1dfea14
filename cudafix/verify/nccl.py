"""`cudafix verify --nccl`: do NCCL collectives across this machine's GPUs take the fast path?

One child per local GPU (cudafix/verify/nccl_child.py), torch.distributed with the NCCL backend,
a loopback rendezvous (tcp://127.0.0.1:<free port>).  Each child times an all-reduce and an
all-gather over a few sizes; NCCL's own log (NCCL_DEBUG=INFO, set in the children only and read
from their stderr) gives the NCCL version and the transport each channel took.  Verdicts:

  fast path   bus bandwidth of the largest size >= FAST_FRACTION of the link NVML reports     exit 0
  single GPU  one GPU: NCCL init and a self all-reduce worked; no link to measure             exit 0
  degraded    slower than the link allows (the transport or a setting named as the cause)     exit 1
  failed      NCCL init or a collective failed (NCCL's WARN lines name the cause)              exit 1
  CPU fallback / no torch: as plain `verify` (exit 3 / 4).

NVLink multicast (NVLS) is always off in the children: NCCL_NVLS_ENABLE=0,
TORCH_SYMM_MEM_DISABLE_MULTICAST=1, NVSHMEM_DISABLE_NVLS=1.
"""

from __future__ import annotations

import json
import os
import re
import socket
import sys
from typing import Any, Dict, List, Optional, Tuple

from cudafix.knowledge import interconnect
from cudafix.store import runner
from cudafix.store.safefs import env_owners

CHILD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "nccl_child.py")
FAST, SINGLE, DEGRADED, FAILED = "fast path", "single GPU", "degraded", "failed"
EXIT_CODES = {FAST: 0, SINGLE: 0, DEGRADED: 1, FAILED: 1, "CPU fallback": 3, "no torch": 4}
CHILD_ENV = {"NCCL_DEBUG": "INFO", "NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
             "NVSHMEM_DISABLE_NVLS": "1", "PYTHONUNBUFFERED": "1"}
# settings that force NCCL off its fast transports (named as the cause of a degraded run)
SLOW_SETTINGS = ("NCCL_P2P_DISABLE", "NCCL_SHM_DISABLE", "NCCL_IB_DISABLE", "NCCL_P2P_LEVEL", "NCCL_ALGO", "NCCL_PROTO")

_VERSION = re.compile(r"NCCL version ([0-9][^\s]*)")
_VIA = re.compile(r"\bvia (\S+)")
_NET = re.compile(r"Using network (\S+)")


class NcclError(RuntimeError):
    """The check could not run (one line for the user)."""


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def parse_log(text: str) -> Dict[str, Any]:
    """NCCL's INFO log -> its version, the transports its channels took, the network, its WARN lines."""
    ver = _VERSION.search(text)
    transports: List[str] = []
    for m in _VIA.finditer(text):
        t = m.group(1).rstrip(",.")
        if t not in transports:
            transports.append(t)
    net = _NET.search(text)
    warns = [ln.split("NCCL WARN", 1)[1].strip() for ln in text.splitlines() if "NCCL WARN" in ln]
    return {"version": ver.group(1) if ver else None, "transports": transports, "network": net.group(1) if net else None,
            "warnings": warns[:10]}


def expected_link(topology: Dict[str, Any], cc_major: Optional[int]) -> Dict[str, Any]:
    """The nominal per-direction bandwidth between GPUs from NVML's topology: NVLink if every GPU has links up."""
    gpus = topology.get("gpus") or []
    if not gpus or any("error" in g for g in gpus):
        return {"kind": None, "gbs": None, "why": topology.get("error") or "NVML topology unavailable"}
    links = min(g.get("nvlinks_up", 0) for g in gpus)
    if links > 0 and cc_major is not None:
        gbs = interconnect.nvlink_gbs(cc_major, links)
        if gbs:
            return {"kind": "NVLink", "links": links, "gbs": gbs}
    pcie = [interconnect.pcie_gbs(g.get("pcie_gen"), g.get("pcie_width")) for g in gpus]
    known = [p for p in pcie if p]
    return {"kind": "PCIe", "gbs": min(known) if known else None,
            "gen": min(g.get("pcie_gen", 0) for g in gpus), "width": min(g.get("pcie_width", 0) for g in gpus)}


def judge(children: List[Dict[str, Any]], logs: List[str], env: Dict[str, str], cc_major: Optional[int]) -> Dict[str, Any]:
    log = parse_log("\n".join(logs))
    rep: Dict[str, Any] = {"nccl": log, "ranks": children}
    r0 = children[0] if children else {}
    if r0.get("torch_import_error") or ("torch" not in r0 and "child_error" not in r0):
        rep.update(verdict="no torch", reasons=["import torch failed: %s" % r0.get("torch_import_error", "not installed")])
        return rep
    if r0.get("cuda_available") is False:
        rep.update(verdict="CPU fallback", reasons=[
            "torch %s sees no GPU: NCCL init, the collectives and the link bandwidth were not checked" % r0.get("torch")])
        return rep
    errors = [c.get("init_error") or c.get("child_error") for c in children if c.get("init_error") or c.get("child_error")]
    if any(c.get("nccl_available") is False for c in children):
        errors.append("this torch build has no NCCL backend (torch.distributed.is_nccl_available() is False)")
    if errors or any(c.get("rc") for c in children):
        reasons = errors[:2] + ["NCCL WARN: %s" % w for w in log["warnings"][:3]]
        if not reasons:
            reasons = ["rank %d exited with %s" % (c.get("rank", -1), c.get("rc")) for c in children if c.get("rc")]
        rep.update(verdict=FAILED, reasons=reasons)
        return rep
    world = r0.get("world_size", 1)
    rep["nccl_version"] = log["version"] or r0.get("nccl_version_torch")
    if world == 1:
        ok = r0.get("self_all_reduce_ok")
        rep.update(verdict=SINGLE if ok else FAILED, reasons=[
            "one GPU: NCCL %s initialised and a self all-reduce returned %s in %.2f s; bandwidth between GPUs, the "
            "transport between them and NVLink vs PCIe were not checked (there is no second GPU)"
            % (rep["nccl_version"], "the right value" if ok else "a wrong value", r0.get("init_s", 0))])
        return rep
    link = expected_link(r0.get("topology") or {}, cc_major)
    rep["link"] = link
    largest = max(r0.get("sizes", []), key=lambda s: s["bytes"]) if r0.get("sizes") else {}
    bw = min(largest.get("all_reduce_busbw_gbs", 0), largest.get("all_gather_busbw_gbs", 0)) if largest else None
    rep["busbw_gbs"] = bw
    reasons: List[str] = []
    slow = ["%s=%s" % (k, env[k]) for k in SLOW_SETTINGS if env.get(k)]
    if link.get("gbs") and bw is not None and bw < interconnect.FAST_FRACTION * link["gbs"]:
        reasons.append("bus bandwidth %.1f GB/s is under %d%% of the %s link's %.0f GB/s" % (
            bw, interconnect.FAST_FRACTION * 100, link["kind"], link["gbs"]))
    if link.get("kind") == "NVLink" and log["transports"] and not any(t.startswith("P2P") or t.startswith("NVLS")
                                                                       for t in log["transports"]):
        reasons.append("NCCL took %s although the GPUs have NVLink" % "/".join(log["transports"]))
    if reasons and slow:
        reasons.append("set in the env: %s" % ", ".join(slow))
    if not link.get("gbs"):
        reasons.append("the link's bandwidth is unknown (%s): bandwidth not judged" % link.get("why", "no NVML figure"))
        rep.update(verdict=DEGRADED if len(reasons) > 1 else FAST, reasons=reasons)
        return rep
    rep.update(verdict=DEGRADED if reasons else FAST, reasons=reasons or [
        "bus bandwidth %.1f GB/s over %s (nominal %.0f GB/s), transport %s" % (
            bw or 0, link["kind"], link["gbs"], "/".join(log["transports"]) or "not logged")])
    return rep


def run_ranks(python: str, world: int, timeout: float,
              env: Optional[Dict[str, str]] = None) -> Tuple[List[Dict[str, Any]], List[str]]:
    base = dict(os.environ if env is None else env)
    base.update(CHILD_ENV)
    base.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()), WORLD_SIZE=str(world))
    owners = env_owners(os.path.dirname(os.path.dirname(python)))
    # the trusted runner, all ranks at once: -I, from /, stdin closed, each its own process group
    # (all killed on the timeout, SIGTERM or SIGINT), bounded output
    jobs = [runner.Job(runner.python_argv(python, CHILD), dict(base, RANK=str(r), LOCAL_RANK=str(r)), owners=owners)
            for r in range(world)]
    try:
        results = runner.run_all(jobs, timeout)
    except OSError as exc:
        raise NcclError("cannot run %s: %s" % (python, exc)) from None
    if any(p.timed_out for p in results):
        raise NcclError("the NCCL check did not finish within %ds (a rendezvous or a collective hung)" % timeout)
    children: List[Dict[str, Any]] = []
    logs: List[str] = []
    for p in results:
        out, err = p.stdout, p.stderr
        text = out.decode(errors="replace").splitlines()
        lines = [ln for ln in text if ln.startswith("{")]
        try:
            c = json.loads(lines[-1]) if lines else {"child_error": "no output: %s" % (
                (err.decode(errors="replace").strip().splitlines() or ["nothing on stderr"])[-1])}
        except ValueError:
            c = {"child_error": "unreadable output"}
        c["rc"] = p.returncode
        children.append(c)
        # NCCL writes its debug log to stdout unless NCCL_DEBUG_FILE says otherwise (NVIDIA/nccl
        # src/debug.cc: `ncclDebugFile = stdout`); the H200 run of 2026-12-01 read stderr alone and
        # logged nothing.  Both streams, the child's JSON line left out.
        logs.append("\n".join([ln for ln in text if not ln.startswith("{")] + [err.decode(errors="replace")]))
    return children, logs


def verify_nccl(python: Optional[str] = None, timeout: float = 300.0) -> Dict[str, Any]:
    python = python or sys.executable
    world, cc_major = 1, None
    try:
        from cudafix.probes import take_snapshot

        snap = take_snapshot(python=None if python == sys.executable else python)
        gpus = snap.visible_gpus()
        world = max(1, len(gpus))
        cc = gpus[0].compute_capability if gpus else None
        cc_major = int(cc.split(".")[0]) if cc else None
    except Exception:  # the count is a convenience: one rank still reports what torch sees
        pass
    children, logs = run_ranks(python, world, timeout)
    rep = judge(children, logs, dict(os.environ), cc_major)
    rep.update(schema="cudafix.verify.nccl/1", world_size=world, child_env=CHILD_ENV,
               exit_code=EXIT_CODES[rep["verdict"]], log_tail=[ln for ln in "\n".join(logs).splitlines() if "NCCL" in ln][-40:])
    return rep


def render_text(rep: Dict[str, Any]) -> str:
    out = ["cudafix verify --nccl: %s" % rep["verdict"]]
    out += ["  - %s" % r for r in rep.get("reasons", [])]
    log = rep.get("nccl", {})
    if log.get("version") or log.get("transports"):
        out.append("NCCL %s, transport: %s" % (log.get("version") or "?", "/".join(log.get("transports") or []) or "not logged"))
    r0 = (rep.get("ranks") or [{}])[0]
    for s in r0.get("sizes", []):
        out.append("  %7.1f MiB  all-reduce %8.3f ms  busbw %7.1f GB/s   all-gather %8.3f ms  busbw %7.1f GB/s" % (
            s["bytes"] / 2 ** 20, s["all_reduce_ms"], s["all_reduce_busbw_gbs"], s["all_gather_ms"], s["all_gather_busbw_gbs"]))
    return "\n".join(out)

