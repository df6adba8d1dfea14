"""`cudafix warm`: compile the PTX a GPU needs into the driver's JIT cache before the first run.

How (measured on an H200, docs/gpu.md): a CHILD process loads the real libraries the way the
program does — ``import torch`` for torch's own fatbins and torch extensions, ``dlopen`` for the
rest — with ``CUDA_MODULE_LOADING=EAGER``, then calls ``cudaFree(0)`` through the shared CUDA
runtime: the runtime creates the context and loads every registered module at once, so the
driver JIT-compiles all of their PTX and writes it to CUDA_CACHE_PATH (the child inherits the
program's CUDA_CACHE_PATH / CUDA_CACHE_MAXSIZE).  JIT-compiling extracted PTX text with
cuModuleLoadData does NOT produce cache entries the program's own load hits (the cache key is
the module image as the runtime registers it), hence the real libraries.  Never in the user's
process: cuInit in a parent breaks CUDA in its forked children.

One child per distinct compute capability (the cache is per arch), pinned with
CUDA_VISIBLE_DEVICES.  A module with a *static* CUDA runtime registers its kernels with its own
private copy of the runtime, which exports no cudaFree: only a call into the module itself would
load them, and cudafix does not call a module's own functions.  Such a module is listed as not
warmable (never claimed warm).
State (what was warmed, for which driver, GPU arch and cache dir) lives in the env's cache dir.

This module is the plan (what to warm, its estimate, the state); cudafix/warm/runtime.py runs it
(the child, the background job, its lock).
"""

from __future__ import annotations

import dataclasses
import os
import time
from typing import Dict, List, Mapping, Optional, Sequence

from cudafix.knowledge import compat
from cudafix.knowledge import arch as karch
from cudafix.knowledge import gpus as kgpus
from cudafix.model.snapshot import GPU, Snapshot
from cudafix.store import cachefile, safefs

STATE_FILE = "warm-state.json"
STATE_VERSION = 1
LOCK_FILE = "warm.lock"
LOG_FILE = "warm.log"
# Driver JIT throughput used only for the estimate shown before/while warming: PTX bytes per
# second, measured on the H200 (docs/gpu.md: 1.19 MB of compute_75 PTX JIT-compiled for sm_90 in
# 3.4-3.8 s by driver 580).
JIT_BYTES_PER_S = 0.33e6
# What a child that imports torch pays besides the JIT, same source: `import torch` (3.3 s) and,
# under CUDA_MODULE_LOADING=EAGER, loading all of torch's own kernels (about 3 s).
TORCH_CHILD_OVERHEAD_S = 6.0
# The findings that make activation start a background warm (cudafix/activation/runtime.py,
# cudafix/warm/runtime.py start_background): PTX JIT would stall the first run.
TRIGGER_RULES = frozenset(("arch-ptx-jit", "ext-ptx-jit"))


@dataclasses.dataclass
class WarmModule:
    """One library whose PTX a GPU needs JIT-compiled."""

    path: str
    label: str  # "torch 2.14.1 (libtorch_cuda.so)", "cfx_ptx75 (unowned)"
    ptx_bytes: Optional[int]
    via: str  # "import torch" | "dlopen"
    cudart: Optional[str]  # soname of the shared runtime that registers it
    warmable: bool = True
    why_not: str = ""
    needs_torch: bool = False  # the child must import torch first (torch's own, or a torch extension)


@dataclasses.dataclass
class WarmTarget:
    """One GPU architecture to warm and the modules it needs."""

    cc: str
    gpu: GPU
    modules: List[WarmModule]

    @property
    def ptx_bytes(self) -> int:
        return sum(m.ptx_bytes or 0 for m in self.modules if m.warmable)

    @property
    def size_known(self) -> bool:
        return all(m.ptx_bytes is not None for m in self.modules if m.warmable)

    def estimate_s(self) -> float:
        """The child's expected run time: the JIT, plus importing torch eagerly when needed."""
        torch = any(m.needs_torch for m in self.modules if m.warmable)
        return self.ptx_bytes / JIT_BYTES_PER_S + (TORCH_CHILD_OVERHEAD_S if torch else 0.0)

    def describe(self) -> str:
        """"1.2 MB of PTX, ~4 s to compile" (or why there is no estimate)."""
        if not self.size_known:
            return "PTX size not recorded (no fatbin scan), no time estimate"
        return "%s of PTX, ~%.0f s to warm" % (_mb(self.ptx_bytes), self.estimate_s())


def _cc(g: GPU) -> Optional[str]:
    return g.compute_capability or kgpus.compute_capability(g.name)


def load_refusal(path: str, owners: Sequence[int], at_load: bool = True) -> Optional[str]:
    """Why the warm child must not load the module at ``path`` (None: it may).  The child runs as
    whoever activated, root included: a module another user owns or can write (a shared
    TORCH_EXTENSIONS_DIR, a world-writable directory on sys.path) would run its constructors as
    them.  The preloads' trust check (store/safefs.py), a sticky /tmp allowed above the module's
    own directory; docs/security.md.  ``at_load=False`` (the plan): a file that is not on this
    machine (a recorded snapshot) is judged only when the child would load it."""
    if not at_load and not os.path.lexists(path):
        return None
    why = safefs.safe_to_load(path, tuple(owners), sticky_ok=True)
    return None if why is None else "not loaded: %s (a module another user owns or can write never is)" % why


def load_spec(path: str, owners: Sequence[int]):
    """(what the warm child needs to load ``path``, None) or (None, why not): :func:`load_refusal`'s
    check by the trusted loader (store/trustload.py), resolved once; the child loads exactly the
    file checked (its real path and identity) or nothing."""
    from cudafix.store import trustload

    spec, why = trustload.spec_of(path, tuple(owners), sticky_ok=True)
    return (spec, None) if why is None else (None, "not loaded: %s (a module another user owns or can write never is)" % why)


def targets(snap: Snapshot) -> List[WarmTarget]:
    """What needs PTX JIT on each visible GPU architecture: from the snapshot, plus the trust check
    of each module to dlopen on this machine (:func:`load_refusal`)."""
    targets: Dict[str, WarmTarget] = {}
    owners = safefs.env_owners(snap.python.prefix) if snap.python.prefix else ()
    refusals: Dict[str, Optional[str]] = {}
    t = snap.primary_torch
    cudart_major = None
    if t is not None and t.cuda:
        cudart_major = t.cuda.split(".", 1)[0]
    drv = compat.driver_of(snap)
    for g in snap.visible_gpus():
        cc = _cc(g)
        if cc is None or cc in targets:
            continue
        mods: List[WarmModule] = []
        if t is not None and t.cuda:
            for a in t.arch:
                if a.unknown:
                    continue
                f = karch.fit(a.sass, a.ptx, cc)
                if f.kind == "ptx":
                    mods.append(WarmModule(a.library, "torch %s (%s)" % (t.full_version, os.path.basename(a.library)),
                                           a.ptx_bytes.get(f.entry or ""), "import torch",
                                           "libcudart.so.%s" % cudart_major if cudart_major else None, needs_torch=True))
        for m in snap.extensions.modules:
            f = karch.fit(m.sass, m.ptx, cc)
            if f.kind != "ptx":
                continue
            jit = compat.ptx_jit(drv, f.entry or "", m.ptx_isa.get(f.entry or ""))
            label = "%s (%s)" % (os.path.basename(m.path), m.package or "unowned")
            wm = WarmModule(m.path, label, m.ptx_bytes.get(f.entry or ""), "dlopen",
                            "libcudart.so.%s" % m.cudart if m.cudart_linkage == "shared" and m.cudart else None,
                            needs_torch=m.torch_linked)
            if jit.fails:  # warming it would fail as the program does (ext-ptx-unsupported)
                wm.warmable, wm.why_not = False, "its PTX cannot be JIT-compiled by this driver: %s" % jit.why
            elif m.cudart_linkage != "shared":
                wm.warmable, wm.why_not = False, "its CUDA runtime is %s: its kernels load only through its own runtime copy, which cudafix cannot call" % (
                    "linked statically" if m.cudart_linkage == "static" else "unknown")
            elif m.missing_torch_symbols_count:
                wm.warmable, wm.why_not = False, "it cannot be loaded: undefined symbol %s (ext-torch-symbols)" % m.missing_torch_symbols[0]
            else:
                if m.path not in refusals:
                    refusals[m.path] = load_refusal(m.path, owners, at_load=False)
                if refusals[m.path]:
                    wm.warmable, wm.why_not = False, refusals[m.path] or ""
            mods.append(wm)
        if mods:
            targets[cc] = WarmTarget(cc, g, mods)
    return list(targets.values())


def child_spec(target: WarmTarget, snap: Snapshot) -> Dict[str, object]:
    ext = [m for m in target.modules if m.warmable and m.via == "dlopen"]
    torch_needed = any(m.warmable and m.needs_torch for m in target.modules)
    cudarts: List[str] = []
    for m in target.modules:
        if m.warmable and m.cudart and m.cudart not in cudarts:
            cudarts.append(m.cudart)
    return {"import_torch": bool(torch_needed), "libs": [m.path for m in ext], "cudarts": cudarts}


def child_env(target: WarmTarget, env: Mapping[str, str]) -> Dict[str, str]:
    """The program's environment (same JIT cache path and size), pinned to one GPU, loading eagerly."""
    e = dict(env)
    e["CUDA_MODULE_LOADING"] = "EAGER"
    e["CUDAFIX_DISABLE"] = "1"  # the child must not start another warm or print hook notes
    g = target.gpu
    if g.uuid:
        e["CUDA_VISIBLE_DEVICES"] = g.uuid
    else:
        e["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"
        e["CUDA_VISIBLE_DEVICES"] = str(g.index)
    return e


def dir_bytes(path: Optional[str]) -> int:
    total = 0
    if not path:
        return 0
    for root, _dirs, files in os.walk(path):
        for f in files:
            try:
                total += os.lstat(os.path.join(root, f)).st_size
            except OSError:
                pass
    return total


def cache_path(env: Mapping[str, str]) -> str:
    return env.get("CUDA_CACHE_PATH") or os.path.join(env.get("HOME") or os.path.expanduser("~"), ".nv", "ComputeCache")


# -- state ------------------------------------------------------------------------------------


def state_key(snap: Snapshot, cc: str, env: Mapping[str, str]) -> str:
    drv = snap.driver.kernel_version or snap.driver.libcuda_version or "?"
    return "%s|%s|%s" % (drv, cc, cache_path(env))


def module_sigs(target: WarmTarget) -> Dict[str, object]:
    return {m.path: cachefile.stat_sig(m.path) for m in target.modules if m.warmable}


def is_warm(state: Dict[str, object], key: str, target: WarmTarget, env: Mapping[str, str]) -> Dict[str, bool]:
    """Per module path: warmed by cudafix for this driver, arch and cache dir, unchanged since,
    and the cache dir still exists."""
    ent = state.get(key)
    mods = ent.get("modules") if isinstance(ent, dict) else None
    alive = os.path.isdir(cache_path(env))
    out = {}
    for m in target.modules:
        out[m.path] = bool(m.warmable and alive and isinstance(mods, dict) and mods.get(m.path) == cachefile.stat_sig(m.path))
    return out


def load_state(cache_dir: str) -> Dict[str, object]:
    return cachefile.load(cache_dir, STATE_FILE, STATE_VERSION)


def record(cache_dir: str, key: str, target: WarmTarget, result: Dict[str, object]) -> None:
    state = load_state(cache_dir)
    state[key] = {"modules": module_sigs(target), "when": time.time(), "result": result}
    cachefile.store(cache_dir, STATE_FILE, STATE_VERSION, state)


# -- running ----------------------------------------------------------------------------------


# -- background start from activation -----------------------------------------------------------


def plan_lines(targets: Sequence[WarmTarget], snap: Snapshot, state: Dict[str, object], env: Mapping[str, str]) -> List[str]:
    """`cudafix warm --status`: per GPU arch, each module needing JIT and whether it is warm."""
    if not targets:
        return ["nothing to warm: no visible GPU needs PTX JIT for torch or an extension module"]
    lines = ["JIT cache: %s" % cache_path(env)]
    for t in targets:
        warm = is_warm(state, state_key(snap, t.cc, env), t, env)
        lines.append("GPU%d %s (CC %s): %d module(s), %s" % (t.gpu.index, t.gpu.name, t.cc, len(t.modules), t.describe()))
        for m in t.modules:
            st = "warm" if warm.get(m.path) else ("not warmable: " + m.why_not if not m.warmable else "cold")
            size = "%s PTX" % _mb(m.ptx_bytes) if m.ptx_bytes is not None else "PTX size unknown"
            lines.append("  %-5s %s  %s  %s" % (st.split(":")[0] if st.startswith("not") else st, m.label, size,
                                                (m.why_not if not m.warmable else m.path)))
    return lines


def _mb(n: int) -> str:
    return "%.1f MB" % (n / 1e6)
