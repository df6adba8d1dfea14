"""How each visible GPU runs torch's own device code: the coverage of torch's CUDA libraries
(scanned .nv_fatbin, else the published arch list) fitted per GPU -- native SASS, PTX JIT, or
none -- for the arch rules (rules/arch.py) and the rules that defer to them (one cause)."""

from __future__ import annotations

import dataclasses

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Dict, List, Optional, Tuple

from cudafix.knowledge import arch as karch
from cudafix.knowledge import compat
from cudafix.knowledge import gpus as kgpus
from cudafix.knowledge import torch_builds as tb
from cudafix.model import cuda as cudaver
from cudafix.model.record import record
from cudafix.model.snapshot import GPU, Snapshot, TorchBuild
from cudafix.rules._util import base_version, major_minor, ptx_jit_disabled, torch_label

@record
class Coverage:
    """The device code a torch build carries, merged over its scanned libraries."""

    library: str
    sass: List[str]
    ptx: List[str]
    ptx_bytes: Dict[str, int]
    how: str  # "scanned" evidence or "published arch list ..."


@record
class GpuFit:
    """How one GPU runs the build: native SASS, PTX JIT, or not at all."""

    gpu: GPU
    cc: Optional[str]
    kind: str  # "sass" | "ptx" | "none" | "unknown"
    entries: List[Tuple[str, str, Optional[str]]]  # (library, kind, entry)
    ptx_need: Optional[int]  # bytes of PTX JIT-compiled for this GPU (None: unknown)
    why: str = ""
    aux_missing: List[str] = dataclasses.field(default_factory=list)  # auxiliary libraries with no code for it


_MAIN_LIBS = ("libtorch_cuda.so", "libtorch_cuda_cu.so", "libtorch_cuda_cpp.so", "libtorch_cuda")


def _is_main(library: str) -> bool:
    """torch's core CUDA library (split in two for 1.9-1.12 wheels); others (linalg...) are auxiliary."""
    return library.rsplit("/", 1)[-1] in _MAIN_LIBS


def _coverage(t: TorchBuild) -> Tuple[List[Coverage], str]:
    """Device code of torch's CUDA libraries: the fatbin scan, else the published arch list."""
    scanned = [a for a in t.arch if not a.unknown and (a.sass or a.ptx)]
    if scanned:
        return [Coverage(a.library, list(a.sass), list(a.ptx), dict(a.ptx_bytes), a.found_via or "scanned .nv_fatbin") for a in scanned], ""
    why = "; ".join(a.unknown for a in t.arch if a.unknown) or t.unknown.get("arch") or "no .nv_fatbin scan in the snapshot"
    version = base_version(t.full_version)
    if t.dist.origin == "conda":
        lists = tb.conda_arch_list(version, t.cuda or "")
        label = "pytorch-channel conda build"
    else:
        lists = tb.wheel_arch_list(version, cudaver.tag(t.cuda) if t.cuda else "cu")
        label = "official wheel"
    if lists is None:
        return [], why + "; no published arch list for %s (%s)" % (torch_label(t), label)
    sass, ptx = lists
    return [Coverage("libtorch_cuda", sass, ptx, {}, "published arch list of the %s %s+cu%s (not scanned: %s)" % (
        label, version, (t.cuda or "").replace(".", ""), why))], ""


def _ptx_blocked(snap: Snapshot, t: TorchBuild) -> Optional[str]:
    """Why the driver cannot JIT torch's PTX here: the JIT is off, or torch's PTX (written by the
    toolkit of torch.version.cuda, whose PTX ISA the compatibility model knows) is newer than the
    driver JIT-compiles (cudafix.knowledge.compat)."""
    off = ptx_jit_disabled(snap)
    if off:
        return off
    tmm = major_minor(t.cuda)
    if tmm is None:
        return None
    isa = compat.toolkit_isa(tmm[0] * 1000 + tmm[1] * 10)
    a = compat.ptx_jit(compat.driver_of(snap), "torch's PTX", isa)
    if a.fails:
        return "%s (CUDA %d.%d writes PTX ISA %s): %s" % (a.why.split(":", 1)[0], tmm[0], tmm[1], isa, a.why.split(": ", 1)[-1])
    return None


def _gpu_cc(g: GPU) -> Tuple[Optional[str], str]:
    if g.compute_capability:
        return g.compute_capability, ""
    cc = kgpus.compute_capability(g.name)
    if cc:
        return cc, "compute capability %s from the GPU table (%s)" % (cc, g.name)
    return None, "compute capability of %s unknown" % g.name


def _fits(snap: Snapshot) -> Tuple[Optional[TorchBuild], List[Coverage], List[GpuFit], str]:
    t = snap.primary_torch
    if t is None or not t.cuda:
        return None, [], [], ""
    covs, why = _coverage(t)
    blocked = _ptx_blocked(snap, t)
    fits: List[GpuFit] = []
    for g in snap.visible_gpus():
        cc, cc_note = _gpu_cc(g)
        if cc is None or not covs:
            fits.append(GpuFit(g, cc, "unknown", [], None, cc_note or why))
            continue
        entries = []
        need = 0
        need_known = True
        worst = "sass"
        aux_missing = []
        main = [c for c in covs if _is_main(c.library)] or covs
        for c in covs:
            f = karch.fit(c.sass, [] if blocked else c.ptx, cc)
            if f.kind == "none" and blocked and karch.fit([], c.ptx, cc).kind == "ptx":
                entries.append((c.library, "none", "blocked"))
            else:
                entries.append((c.library, f.kind, f.entry))
            if f.kind == "none" and c not in main:
                aux_missing.append(c.library)
                continue
            if f.kind == "none":
                worst = "none"
            elif f.kind == "ptx":
                if worst == "sass":
                    worst = "ptx"
                size = c.ptx_bytes.get(f.entry or "")
                if size is None:
                    need_known = False
                else:
                    need += size
        fits.append(GpuFit(g, cc, worst, entries, need if (worst == "ptx" and need_known) else None, cc_note, aux_missing))
    return t, covs, fits, blocked or ""


