"""Library resolution rules (glibc ld.so search order, https://man7.org/linux/man-pages/man8/ld.so.8.html;
the reports each rule cites, docs/rules.md)."""

from __future__ import annotations

import os
import shlex

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable, Iterable, List

from cudafix.model.findings import ERROR, WARNING, Outcome, Rule
from cudafix.model.fixes import REMOVE_PATH, EnvOp, EnvPatch, Fix, Preload
from cudafix.rules._util import ok, problem, unknown, vtuple
from cudafix.model.snapshot import LibraryResolution, Snapshot

# Driver libraries are the driver rules' business (driver-library-mismatch, forward-compat-mismatch).
_DRIVER_SONAMES = ("libcuda.so", "libnvidia-")


def _is_driver_lib(soname: str) -> bool:
    return any(soname.startswith(p) for p in _DRIVER_SONAMES)


def _ld_entry_for(r: LibraryResolution, snap: Snapshot) -> str:
    """The LD_LIBRARY_PATH entry that supplied ``r.resolved`` ('' when not from LD_LIBRARY_PATH)."""
    if r.resolved_via != "LD_LIBRARY_PATH" or not r.resolved:
        return ""
    d = os.path.dirname(r.resolved)
    entries = snap.libraries.ld_library_path or [p for p in snap.env.get("LD_LIBRARY_PATH", "").split(":") if p]
    for e in entries:
        if e.rstrip("/") == d.rstrip("/") or os.path.normpath(e) == os.path.normpath(d):
            return e
    return ""


def is_nccl(soname: str) -> bool:
    """NCCL has a rule of its own (nccl-shadowed, cudafix/rules/nccl.py): a multi-node concern."""
    return soname.startswith("libnccl.so")


def check_lib_shadowed(snap: Snapshot) -> Iterable[Outcome]:
    return shadowed(snap, lambda soname: not _is_driver_lib(soname) and not is_nccl(soname), "CUDA library")


def shadowed(snap: Snapshot, include: Callable[[str], bool], what: str) -> List[Outcome]:
    """lib-shadowed's judgement for the sonames ``include`` accepts (``what`` names them)."""
    libs = snap.libraries
    if not libs.resolutions:
        why = libs.unknown.get("resolutions") or next(iter(libs.unknown.values()), "")
        t = snap.primary_torch
        if t is None or not t.cuda:
            return [ok("no CUDA torch build: no CUDA libraries to resolve", subject="libraries")]
        if libs.found_via.get("nothing to resolve") and not libs.unknown:
            # The simulation ran and torch's libraries request no CUDA library by a shared soname
            # (torch <= 1.x bundles them under hashed names, e.g. libcudart-80664282.so.10.2,
            # found through its RPATH $ORIGIN): there is nothing another copy could shadow.
            return [ok("nothing to shadow: %s" % libs.found_via["nothing to resolve"], subject="libraries")]
        return [unknown("which CUDA libraries torch would load is unknown", why or "the snapshot has no library resolutions", subject="libraries")]
    out: List[Outcome] = []
    seen = set()
    for r in libs.resolutions:
        if not include(r.soname) or r.soname in seen:
            continue
        seen.add(r.soname)
        if r.unknown:
            out.append(unknown("%s: resolution unknown" % r.soname, r.unknown, subject=r.soname))
            continue
        if not r.resolved:
            # Not found at all is a different failure (missing library), not shadowing.
            continue
        if not r.expected or os.path.normpath(r.expected) == os.path.normpath(r.resolved):
            continue
        if not r.resolved_version or not r.expected_version:
            out.append(unknown(
                "%s resolves to %s, not torch's %s; versions unknown" % (r.soname, r.resolved, r.expected),
                subject=r.soname,
            ))
            continue
        if vtuple(r.resolved_version) == vtuple(r.expected_version):
            continue  # another copy of the same version: harmless
        older = vtuple(r.resolved_version) < vtuple(r.expected_version)
        entry = _ld_entry_for(r, snap)
        ev = [
            "%s (requested by %s) resolves via %s to %s, version %s" % (r.soname, os.path.basename(r.requested_by), r.resolved_via or "?", r.resolved, r.resolved_version),
            "torch's own copy is %s, version %s" % (r.expected, r.expected_version),
            "the %s copy is %s than torch's: %s" % (
                r.resolved_via or "other", "older" if older else "newer",
                "symbols torch's libraries need can be missing (undefined symbol at import)" if older
                else "not the copy torch was built and tested with"),
        ]
        ops = ()
        if entry:
            ops = (EnvOp(REMOVE_PATH, "LD_LIBRARY_PATH", entry),)
            ev.append("LD_LIBRARY_PATH entry %s is searched before torch's RUNPATH for this library" % entry)
        # Safe: preloading torch's own copy by absolute path is exactly what `import torch` expects
        # to load (a loaded soname satisfies later lookups); dropping the LD_LIBRARY_PATH entry only
        # removes the copy that wins over torch's own.  Neither can make torch load something worse.
        summary = "load torch's own %s (%s)" % (r.soname, r.expected)
        if entry:
            summary += " and drop %s from LD_LIBRARY_PATH on activation" % entry
        fix = Fix(summary=summary, auto=True, env=EnvPatch(ops), preload=(Preload(r.soname, r.expected),), applies_in="both")
        if r.resolved_via == "LD_PRELOAD":
            # Loaded by ld.so before the interpreter starts: no preload in the process can undo it.
            rest = [e for e in snap.env.get("LD_PRELOAD", "").replace(":", " ").split()
                    if e != r.resolved and e not in r.preloaded_as]
            ev.append("LD_PRELOAD loads it before Python starts: nothing in the process can replace it")
            fix = Fix(summary="remove %s from LD_PRELOAD" % r.resolved,
                      commands=(("export LD_PRELOAD=%s" % shlex.quote(" ".join(rest))) if rest else "unset LD_PRELOAD",))
        out.append(problem(
            "%s is shadowed: %s %s wins over torch's %s %s" % (r.soname, r.resolved, r.resolved_version, r.expected, r.expected_version),
            ev, fix=fix, severity=ERROR if older else WARNING, subject=r.soname,
        ))
    if not out:
        n = len(seen)
        out.append(ok("every %s torch needs (%d) resolves to torch's own copy or one of the same version" % (what, n), subject="libraries"))
    return out


RULES = (
    Rule(
        id="lib-shadowed",
        severity=ERROR,
        title="A library torch needs resolves to another copy than torch's own, with a different version",
        check=check_lib_shadowed,
        needs=("torch", "libraries"),
        auto=True,
        cause="The glibc loader searches LD_LIBRARY_PATH before a library's DT_RUNPATH (and for second-level dependencies of the nvidia-* wheels, before anything torch controls), and an already-loaded soname wins outright. A system toolkit on LD_LIBRARY_PATH, a conda lib dir or ld.so.cache then supplies an older cuBLASLt / nvJitLink / cuDNN / NCCL than torch's. Libraries of a different soname major (libcublas.so.11 vs .so.12) never collide.",
        symptoms=(
            "ImportError: .../nvidia/cusparse/lib/libcusparse.so.12: undefined symbol: __nvJitLinkAddData_12_1, version libnvJitLink.so.12",
            "OSError: .../nvidia/cublas/lib/libcublas.so.11: undefined symbol: cublasLtGetStatusString, version libcublasLt.so.11",
            "RuntimeError: cuDNN version incompatibility: PyTorch was compiled against (8, 7, 0) but found runtime version (8, 2, 4). PyTorch already comes bundled with cuDNN. One option to resolving this error is to ensure PyTorch can find the bundled cuDNN. one possibility is that there is a conflicting cuDNN in LD_LIBRARY_PATH.",
            "ImportError: .../torch/lib/libtorch_cuda.so: undefined symbol: ncclMemFree",
        ),
        evidence_used="for each soname torch needs: the file the loader would pick (simulated from the ELF DT_RPATH/DT_RUNPATH, LD_LIBRARY_PATH, ld.so.cache), torch's own copy, and both versions from the file names",
        fix_text="automatic: torch's own copy is preloaded by absolute path before torch loads (in-process), and the shadowing LD_LIBRARY_PATH entry is removed on activation.",
        sources=("pytorch/pytorch#111469", "pytorch/pytorch#134929", "infiniflow/ragflow#4466", "pytorch/pytorch#91067",
                 "bmaltais/kohya_ss#1096", "pytorch/pytorch#119072", "rwth-i6/returnn#1802"),
    ),
)
