"""Extension-module rules: the CUDA code of torchvision's _C, xformers, flash-attn, setup.py-built
ops and torch's JIT extension cache — device code per GPU, PTX JIT, CUDA runtime major, and torch
symbols missing from the installed torch (the import's `undefined symbol`).  Facts come from the
extension scan (cudafix.probes.pyenv.extensions): the binaries themselves, never an import."""

from __future__ import annotations

import os
import shlex

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Dict, Iterable, List, Optional, Tuple

from cudafix.knowledge import gpus as kgpus
from cudafix.model.findings import ERROR, PROBLEM, WARNING, Outcome, Rule
from cudafix.model.fixes import Fix
from cudafix.model.snapshot import GPU, ExtensionModule, Snapshot
from cudafix.rules import _extload
from cudafix.rules._companions import TORCH_COMPANIONS, torch_fails_on
from cudafix.rules.torch import check_torchvision
from cudafix.knowledge import compat
from cudafix.rules._util import fmt_bytes, gpu_label, major_minor, no_nvidia, ok, problem, ptx_jit_disabled, unique, unknown
from cudafix.model import cuda as cudaver

CPP_EXT_DOC = "https://pytorch.org/docs/stable/cpp_extension.html"
NVCC_DOC = "https://docs.nvidia.com/cuda/cuda-compiler-driver-nvcc/index.html#gpu-compilation"
RUNTIME_ERRORS_DOC = "https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__TYPES.html (cudaErrorInsufficientDriver)"


def _mods(snap: Snapshot) -> List[ExtensionModule]:
    return list(snap.extensions.modules)


def _not_scanned(snap: Snapshot, subject: str) -> Optional[Outcome]:
    if not snap.extensions.scanned:
        why = snap.probe_errors.get("extensions") or "no extension scan in this snapshot"
        return unknown("extension modules not scanned: %s" % why, subject=subject)
    return None


def _name(m: ExtensionModule) -> str:
    return os.path.basename(m.path)


def _pkg(m: ExtensionModule) -> str:
    if m.package:
        return "%s %s" % (m.package, m.package_version) if m.package_version else m.package
    return "an unowned file"


def _cc(g: GPU) -> Optional[str]:
    return g.compute_capability or kgpus.compute_capability(g.name)


def _gpus(snap: Snapshot) -> List[Tuple[GPU, Optional[str]]]:
    return [(g, _cc(g)) for g in snap.visible_gpus()]


def arch_list(ccs: Iterable[str]) -> str:
    """TORCH_CUDA_ARCH_LIST for these compute capabilities ("9.0;12.0"), sorted, unique."""
    out: List[str] = []
    for cc in sorted(set(ccs), key=lambda c: major_minor(c) or (0, 0)):
        mm = major_minor(cc)
        if mm:
            out.append("%d.%d" % mm)
    return ";".join(out)


def rebuild(snap: Snapshot, m: ExtensionModule, ccs: List[str]) -> Fix:
    """The command that rebuilds ``m``'s package with native code for ``ccs``."""
    archs = arch_list(ccs)
    env = 'TORCH_CUDA_ARCH_LIST="%s"' % archs
    py = shlex.quote(snap.python.executable or "python")
    if m.location == "torch extension cache":
        d = os.path.dirname(m.path)
        return Fix(summary="delete the cached build of torch extension %s and let torch.utils.cpp_extension rebuild it with %s set in the program's environment" % (m.package or _name(m), env),
                   commands=("rm -rf %s" % shlex.quote(d), "export %s" % env))
    if (m.package or "").lower() == "torch":  # torch's own file (nvfuser/_C): never rebuilt; no torch sdist on PyPI
        return Fix(summary="reinstall torch %s from its wheel: %s is torch's own file" % (m.package_version or "", m.path))
    if m.package and (m.location == "conda lib" or m.owner_via.startswith("conda-meta/")):
        return Fix(summary="install a build of the conda package %s with code for compute capability %s (its channel's build matrix decides; rebuild from its recipe otherwise)" % (m.package, archs))
    if m.package:
        spec = "%s==%s" % (m.package, m.package_version) if m.package_version else m.package
        # --no-deps: a --force-reinstall must not reinstall (and so change) the env's torch.
        cmd = "%s %s -m pip install --no-build-isolation --force-reinstall --no-deps --no-binary %s %s" % (
            env, py, shlex.quote(m.package), shlex.quote(spec))
        return Fix(summary="rebuild %s from source for compute capability %s against the installed torch" % (m.package, archs),
                   commands=(cmd,))
    return Fix(summary="rebuild %s from its sources with %s (no package record owns it)" % (m.path, env))


def _has_code(m: ExtensionModule) -> bool:
    return bool(m.sass or m.ptx)


def _no_gpu(snap: Snapshot, subject: str) -> Outcome:
    if snap.gpus.gpus and not snap.visible_gpus():
        return ok("no visible GPU: extension device code is not needed", subject=subject)
    why = snap.gpus.unknown.get("gpus")
    if why and not no_nvidia(snap):
        return unknown("GPU list unknown: %s" % why, subject=subject)
    return ok("no NVIDIA GPU: extension device code is not needed", subject=subject)


def _code_text(m: ExtensionModule) -> str:
    ptx = " ".join("%s (ISA %s)" % (p, m.ptx_isa[p]) if p in m.ptx_isa else p for p in m.ptx)
    return "%s (%s, %s): SASS %s; PTX %s (%s)" % (_name(m), _pkg(m), m.owner_via or m.location, " ".join(m.sass) or "none",
                                                 ptx or "none", m.fatbin_via or ".nv_fatbin")


# The compatibility model's ways of failing or stalling, per rule (cudafix.knowledge.compat).
_WANT = {
    "none": (compat.NO_KERNEL_IMAGE, compat.JIT_DISABLED),
    "ptx": (compat.PTX_JIT,),
    "unsupported": (compat.UNSUPPORTED_PTX,),
}


def _by_package(mods: Iterable[ExtensionModule]) -> "Dict[str, List[ExtensionModule]]":
    """One cause, one finding: the files of one package (or one unowned file) together."""
    groups: "Dict[str, List[ExtensionModule]]" = {}
    for m in mods:
        groups.setdefault(m.package or m.path, []).append(m)
    return groups


def _files(group: List[ExtensionModule]) -> str:
    return "%d files" % len(group) if len(group) > 1 else _name(group[0])


def _per_gpu(snap: Snapshot, want: str) -> Iterable[Outcome]:
    """Outcomes of ext-arch-unsupported (want="none"), ext-ptx-jit ("ptx") and
    ext-ptx-unsupported ("unsupported"): the compatibility model's answer for each module's
    device code on each visible GPU, one outcome per package."""
    subject = "extensions"
    skipped = _not_scanned(snap, subject)
    if skipped:
        return [skipped]
    mods = [m for m in _mods(snap) if _has_code(m) or "device_code" in m.unknown]
    if not mods:
        return [ok("no extension module with CUDA device code", subject=subject)]
    gpus = _gpus(snap)
    if not gpus:
        return [_no_gpu(snap, subject)]
    drv = compat.driver_of(snap)
    jit_off = ptx_jit_disabled(snap)
    out: List[Outcome] = []
    for _key, group in _by_package(mods).items():
        answers: List[Tuple[ExtensionModule, GPU, str, compat.Answer]] = []
        for m in group:
            if "device_code" in m.unknown:
                out.append(unknown("%s: device code unreadable" % _name(m), m.unknown["device_code"], subject=_name(m)))
                continue
            answers += [(m, g, cc, compat.device_code(drv, cc, m.sass, m.ptx, m.ptx_isa, bool(jit_off))) for g, cc in gpus if cc]
            undecided = [g for g, cc in gpus if cc is None]
            if undecided and not any(x[0] is m and x[3].how in _WANT[want] for x in answers):
                out.append(unknown("%s: compute capability of %s unknown" % (_name(m), ", ".join(g.name for g in undecided)), subject=_name(m)))
        hits = [x for x in answers if x[3].how in _WANT[want]]
        # PTX whose ISA was not read (an older snapshot): the stall is certain, a JIT failure unknown
        unread = [x for x in answers if x[3].how == compat.PTX_JIT and x[3].state == compat.UNKNOWN]
        first = group[0]
        if want == "unsupported" and not hits and unread:
            m, _g, _cc, a = unread[0]
            out.append(unknown("%s (%s): whether the driver can JIT its PTX is unknown: %s" % (_pkg(m), _files(group), a.why),
                               _code_text(m), subject=_name(m)))
            continue
        if not hits:
            out.append(ok("%s (%s): %s" % (_pkg(first), _files(group), "code for every visible GPU" if want == "none" else (
                "no PTX JIT needed" if want == "ptx" else "no PTX newer than the driver is needed")), subject=_name(first)))
            continue
        hit_mods = []
        for m, _g, _cc, _a in hits:
            if m not in hit_mods:
                hit_mods.append(m)
        lead = hit_mods[0]
        if lead.package in TORCH_COMPANIONS:
            torch_fails = torch_fails_on(snap)
            if all(g.index in torch_fails for _m, g, _cc, _a in hits):
                rule = torch_fails[hits[0][1].index]
                out.append(ok("%s (%s): fails or stalls where torch itself cannot run; one cause, reported by %s" % (
                    _pkg(lead), _files(hit_mods), rule), subject=_name(lead)))
                continue
        ccs = sorted({cc for _m, _g, cc, _a in hits})
        labels = ", ".join(unique(gpu_label(g) for _m, g, _cc, _a in hits))
        files = _files(hit_mods)
        fix = rebuild(snap, lead, ccs)
        ev = [_code_text(m) for m in hit_mods]
        ev += unique("%s on %s: %s" % (_name(m), gpu_label(g), compat.summary(a)) for m, g, _cc, a in hits)
        if want == "none":
            if jit_off and all(a.how == compat.JIT_DISABLED for _m, _g, _cc, a in hits):
                ev.append(jit_off)
            out.append(problem("%s (%s) has no code for %s: its kernels fail with '%s'"
                               % (_pkg(lead), files, labels, compat.ERRORS[compat.NO_KERNEL_IMAGE]), ev, fix=fix, subject=_name(lead)))
        elif want == "unsupported":
            out.append(problem("%s (%s) has only PTX for %s, written by a newer CUDA toolkit than the driver's: its kernels fail with '%s'"
                               % (_pkg(lead), files, labels, compat.ERRORS[compat.UNSUPPORTED_PTX]), ev,
                               fix=Fix(summary="%s (or upgrade the driver to one whose CUDA is at least the PTX's)" % fix.summary, commands=fix.commands),
                               severity=ERROR, subject=_name(lead)))
        else:
            entries = {(m.path, a.entry or "") for m, _g, _cc, a in hits}
            sized = all(e in m.ptx_bytes for m in hit_mods for (p, e) in entries if p == m.path)
            size = sum(m.ptx_bytes.get(e, 0) for m in hit_mods for (p, e) in entries if p == m.path) if sized else None
            if any(x in unread for x in hits):
                ev.append("the PTX ISA version was not read (a snapshot taken before cudafix read it): should it be newer than the "
                          "driver's CUDA, loading fails with '%s' instead (ext-ptx-unsupported)" % compat.ERRORS[compat.UNSUPPORTED_PTX])
            ev.append("%s: no SASS of its major; the driver JIT-compiles the PTX (%s) at the module's first load, "
                      "then caches it in CUDA_CACHE_PATH up to CUDA_CACHE_MAXSIZE" % (labels, fmt_bytes(size)))
            if all(m.cudart_linkage == "shared" for m in hit_mods):
                fix = Fix(summary="`cudafix warm` compiles it ahead of the first run; native: " + fix.summary, commands=("cudafix warm",) + fix.commands)
            else:  # its own runtime copy loads its kernels; cudafix cannot call it (cudafix/warm/plan.py)
                fix = Fix(summary="%s (its CUDA runtime is %s: `cudafix warm` cannot make it load)" % (
                    fix.summary, "linked statically" if lead.cudart_linkage == "static" else "not linked"), commands=fix.commands)
            out.append(problem("%s (%s) runs on %s only through PTX JIT of %s: stall at first load"
                               % (_pkg(lead), files, labels, fmt_bytes(size)), ev, fix=fix, subject=_name(lead)))
    return out


def check_ext_arch_unsupported(snap: Snapshot) -> Iterable[Outcome]:
    return _per_gpu(snap, "none")


def check_ext_ptx_jit(snap: Snapshot) -> Iterable[Outcome]:
    return _per_gpu(snap, "ptx")


def check_ext_ptx_unsupported(snap: Snapshot) -> Iterable[Outcome]:
    return _per_gpu(snap, "unsupported")


def check_ext_cuda_major(snap: Snapshot) -> Iterable[Outcome]:
    subject = "extensions"
    skipped = _not_scanned(snap, subject)
    if skipped:
        return [skipped]
    t = snap.primary_torch
    mods = [m for m in _mods(snap) if (m.cudart_linkage == "shared" and m.cudart) or m.cudart_linkage == "static"]
    if not mods:
        return [ok("no extension module links a CUDA runtime", subject=subject)]
    if t is None or not t.cuda:
        return [ok("no CUDA torch build to compare the extensions' CUDA runtime with", subject=subject)]
    tmm = major_minor(t.cuda)
    out: List[Outcome] = []
    for _key, group in _by_package(mods).items():
        static = [m for m in group if m.cudart_linkage == "static"]
        if static:
            out.extend(_static_runtime(snap, static))
        shared = [m for m in group if m.cudart_linkage != "static"]
        if not shared:
            continue
        undecided = [m for m in shared if tmm is None or not (m.cudart or "").isdigit()]
        for m in undecided:
            out.append(unknown("%s: CUDA major unknown" % _name(m), subject=_name(m)))
        other = [m for m in shared if m not in undecided and int(m.cudart or 0) != tmm[0]]
        same = [m for m in shared if m not in undecided and m not in other]
        if same and not other:
            out.append(ok("%s (%s): CUDA runtime %s, as torch's CUDA %s" % (_pkg(same[0]), _files(same), same[0].cudart, t.cuda), subject=_name(same[0])))
        if not other:
            continue
        m = other[0]
        ev = [_code_text(x) for x in other]
        ev += ["%s needs libcudart.so.%s (%s); torch %s ships and loads the CUDA %s runtime" % (
            _files(other), m.cudart, m.cudart_via, t.full_version, t.cuda),
              "a second CUDA runtime must be found by the loader (else: 'libcudart.so.%s: cannot open shared object file') and supported by the driver; "
              "CUDA objects (streams, events, memory pools) do not cross between runtimes" % m.cudart]
        gpus_ccs = [cc for _, cc in _gpus(snap) if cc]
        fix = rebuild(snap, m, gpus_ccs) if gpus_ccs else rebuild(snap, m, [])
        out.append(problem("%s (%s) was built against CUDA %s; torch is CUDA %s" % (_pkg(m), _files(other), m.cudart, t.cuda),
                           ev, fix=Fix(summary=fix.summary.replace("rebuild ", "rebuild (with the CUDA %s toolkit) " % t.cuda, 1), commands=fix.commands),
                           subject=_name(m)))
    return out


def _static_runtime(snap: Snapshot, group: List[ExtensionModule]) -> List[Outcome]:
    """Modules of one package with their own static CUDA runtime load no second libcudart; the
    compatibility model says whether the driver runs that runtime (natively, under minor-version
    compatibility, or not: cudaErrorInsufficientDriver, RUNTIME_ERRORS_DOC)."""
    drv = compat.driver_of(snap)
    out: List[Outcome] = []
    undecided = [m for m in group if not m.cudart_version]
    for m in undecided:
        out.append(unknown("%s: statically linked CUDA runtime of unknown version" % _name(m),
                           m.unknown.get("cudart") or m.cudart_via, subject=_name(m)))
    known = [m for m in group if m.cudart_version]
    if not known:
        return out
    # The newest runtime of the package decides: the driver must run every one of them.
    m = max(known, key=lambda x: x.cudart_version or 0)
    label = cudaver.version_text(m.cudart_version or 0)
    a = compat.runtime(drv, m.cudart_version)
    files = _files(known)
    ev = [x.cudart_via for x in known] + [compat.summary(a)]
    if a.state == compat.UNKNOWN:
        out.append(unknown("%s (%s): whether the driver runs its static CUDA %s runtime is unknown: %s" % (_pkg(m), files, label, a.why),
                           "; ".join(ev), subject=_name(m)))
    elif a.runs:
        out.append(ok("%s (%s): its own static CUDA %s runtime (no second libcudart loaded) runs %s" % (
            _pkg(m), files, label, "natively" if a.how == compat.NATIVE else "under " + a.how), "; ".join(ev), subject=_name(m)))
    elif compat.runtime(drv, compat.torch_cuda(snap)).fails:
        # One cause, one finding: the driver is too old for torch as well; driver-too-old names it
        # and lists this package as evidence.
        out.append(ok("%s (%s): its static CUDA %s runtime fails on this driver too; one cause, reported by driver-too-old" % (
            _pkg(m), files, label), "; ".join(ev), subject=_name(m)))
    else:
        out.append(problem("%s (%s) carries a static CUDA %s runtime the driver cannot run: its CUDA calls fail with '%s'" % (
            _pkg(m), files, label, a.error), ev, severity=ERROR, subject=_name(m)))
    return out


def driver_failures(snap: Snapshot) -> List[str]:
    """Evidence for driver-too-old: the extension modules whose own static CUDA runtime the same
    driver cannot run either (their findings are this one cause, not more errors)."""
    if not snap.extensions.scanned:
        return []
    drv = compat.driver_of(snap)
    out: List[str] = []
    for _key, group in _by_package(m for m in _mods(snap) if m.cudart_linkage == "static" and m.cudart_version).items():
        m = max(group, key=lambda x: x.cudart_version or 0)
        if compat.runtime(drv, m.cudart_version).fails:
            out.append("%s (%s): its static CUDA %s runtime fails on this driver as well" % (
                _pkg(m), _files(group), cudaver.version_text(m.cudart_version or 0)))
    return out


def check_ext_torch_symbols(snap: Snapshot) -> Iterable[Outcome]:
    """One finding per package (one cause): every failing file as evidence, and the first error
    the loader really reports (a missing DT_NEEDED library before any undefined symbol)."""
    subject = "extensions"
    skipped = _not_scanned(snap, subject)
    if skipped:
        return [skipped]
    mods = [m for m in _mods(snap) if m.torch_linked]
    if not mods:
        return [ok("no extension module links torch", subject=subject)]
    t = snap.primary_torch
    label = "torch %s" % t.full_version if t else "the installed torch"
    out: List[Outcome] = []
    groups: "dict[str, List[ExtensionModule]]" = {}
    for m in mods:
        if "torch_symbols" in m.unknown:
            out.append(unknown("%s: whether the installed torch has its symbols is unknown" % _name(m), m.unknown["torch_symbols"], subject=_name(m)))
        elif not _extload.fails(m):
            out.append(ok("%s: all %d torch symbols it imports are defined by %s" % (_name(m), m.torch_symbols_checked, m.checked_against), subject=_name(m)))
        else:
            groups.setdefault(m.package or m.path, []).append(m)
    tv_reported = "torchvision" in groups and any(
        o.verdict == PROBLEM for o in check_torchvision(snap))
    for key, group in groups.items():
        first = group[0]
        if key == "torchvision" and tv_reported:
            out.append(ok("%s: %d file(s) fail to load; one cause, reported by torchvision-mismatch" % (_pkg(first), len(group)),
                          subject=_name(first)))
            continue
        ev = [_extload.file_evidence(m) for m in group]
        ev.append("ld.so maps every DT_NEEDED library (breadth first) before it binds a symbol: a missing library is the error "
                  "the user sees, an undefined symbol only when every library is found")
        ev.append("built against another torch: a C++ extension runs only with the torch release (and C++ ABI) it was compiled with (%s)" % CPP_EXT_DOC)
        undecided = [m for m in group if "needed_libraries" in m.unknown]
        if undecided:
            ev.append("which DT_NEEDED library fails first is undecided for %s: %s" % (
                ", ".join(_name(m) for m in undecided), undecided[0].unknown["needed_libraries"]))
        ccs = [cc for _, cc in _gpus(snap) if cc]
        fix = rebuild(snap, first, ccs)
        files = "%d files" % len(group) if len(group) > 1 else _name(first)
        what = ("needs %s, which %s does not ship" % (first.missing_needed, label) if first.missing_needed
                else "needs %s, which %s does not define" % (first.missing_demangled or (first.missing_torch_symbols or ["?"])[0], label))
        out.append(problem("%s (%s) %s: loading %s fails with '%s'" % (
            _pkg(first) if first.package else _name(first), files, what, _name(first), _extload.load_error(first)), ev,
            fix=Fix(summary=fix.summary + " (or install the torch it was built for)", commands=fix.commands),
            subject=_name(first)))
    return out


RULES = (
    Rule(
        id="ext-arch-unsupported",
        severity=ERROR,
        title="An extension module has neither SASS nor usable PTX for a visible GPU",
        check=check_ext_arch_unsupported,
        cause="Extensions carry their own device code, built for TORCH_CUDA_ARCH_LIST / -gencode at build time (setup.py ops, wheels like torchvision, xformers, flash-attn, the torch extension cache). Code for sm_80 only does not run on sm_90; torch itself may be fine.",
        symptoms=("RuntimeError: CUDA error: no kernel image is available for execution on the device",
                  "error in ms_deformable_im2col_cuda: no kernel image is available for execution on the device",
                  "error in modulated_deformable_im2col_cuda: no kernel image is available for execution on the device"),
        evidence_used="the SASS and PTX entries of each extension's .nv_fatbin, each visible GPU's compute capability",
        fix_text="rebuild the owning package for this GPU: TORCH_CUDA_ARCH_LIST=\"X.Y\" python -m pip install --no-build-isolation --force-reinstall --no-deps --no-binary PKG PKG==VER (exact command per package); torch extension cache: delete the build dir.",
        sources=(CPP_EXT_DOC, NVCC_DOC, "facebookresearch/detectron2#251", "fundamentalvision/Deformable-DETR#48", "CharlesShang/DCNv2#113"),
        needs=("extensions", "gpus"),
    ),
    Rule(
        id="ext-ptx-jit",
        severity=WARNING,
        title="An extension module runs on a visible GPU only through PTX JIT (stall at first load)",
        check=check_ext_ptx_jit,
        cause="An extension built with PTX only for an older arch (e.g. TORCH_CUDA_ARCH_LIST=\"7.5+PTX\") is JIT-compiled by the driver when its module loads; the result is cached in CUDA_CACHE_PATH up to CUDA_CACHE_MAXSIZE.",
        symptoms=("first inference hangs for seconds to minutes, GPU idle, one CPU core busy",),
        evidence_used="PTX entries and sizes of each extension's .nv_fatbin, each visible GPU's compute capability",
        fix_text="`cudafix warm` fills the JIT cache ahead of the first run (activation starts it in the background); the real fix is a native rebuild (exact command).",
        sources=(NVCC_DOC, "https://docs.nvidia.com/cuda/cuda-programming-guide/05-appendices/environment-variables.html"),
        needs=("extensions", "gpus", "jit_cache"),
    ),
    Rule(
        id="ext-ptx-unsupported",
        severity=ERROR,
        title="An extension module has only PTX for a visible GPU, written by a newer CUDA toolkit than the driver JIT-compiles",
        check=check_ext_ptx_unsupported,
        cause="A driver JIT-compiles PTX up to the PTX ISA of its own CUDA release. A module built PTX-only (or whose only code for this GPU is PTX) by a newer toolkit fails to load on an older driver, also where its CUDA runtime runs under minor-version compatibility: NVIDIA's guide says applications that compile device code to PTX will not work on older drivers. The PTX ISA version is read from each PTX entry of the module's .nv_fatbin.",
        symptoms=("RuntimeError: CUDA error: the provided PTX was compiled with an unsupported toolchain.",
                  "CUDA_ERROR_UNSUPPORTED_PTX_VERSION",
                  "cudaErrorUnsupportedPtxVersion"),
        evidence_used="the PTX entries and their PTX ISA versions in each extension's .nv_fatbin, the SASS entries, each visible GPU's compute capability, the driver's CUDA version (cudafix/knowledge/compat.py)",
        fix_text="rebuild the package with SASS for this GPU (TORCH_CUDA_ARCH_LIST=\"X.Y\", exact command per package), or upgrade the driver to one whose CUDA release is at least the PTX's.",
        sources=(compat.PTX_DOC, compat.PTX_MAP_DOC, compat.MINOR_DOC, "docs/compat.md (measured on an H200)"),
        needs=("extensions", "gpus", "driver"),
    ),
    Rule(
        id="ext-cuda-major",
        severity=WARNING,
        title="An extension module was built against another CUDA major than torch's",
        check=check_ext_cuda_major,
        cause="An extension linking libcudart.so.12 beside a CUDA 13 torch loads a second runtime: it must be on the loader path and supported by the driver, and CUDA objects do not cross between the two runtimes. torch's cpp_extension refuses such builds ('The detected CUDA version mismatches the version that was used to compile PyTorch'); prebuilt wheels don't ask. A module with the static runtime (nvcc's default) loads no second libcudart; its runtime's version (read from the constant its cudaRuntimeGetVersion returns) must run on the driver -- natively or under CUDA minor-version compatibility (a 13.2 runtime runs on any R580+ driver), as the compatibility model (cudafix/knowledge/compat.py) answers -- else every CUDA call it makes fails (cudaErrorInsufficientDriver, an error); when the driver is too old for torch as well, that is one cause and driver-too-old reports it; unknown when the runtime's version cannot be read (a stripped module). One finding per package, every file as evidence.",
        symptoms=("ImportError: libcudart.so.12: cannot open shared object file: No such file or directory",),
        evidence_used="DT_NEEDED libcudart.so.N of each extension, or the version of its static runtime (cudafix/probes/binfmt/cudart_static.py), torch's CUDA version (version.py), the driver's CUDA version",
        fix_text="rebuild the package with the toolkit of torch's CUDA major (exact command), or install its wheel for torch's CUDA.",
        sources=(CPP_EXT_DOC, RUNTIME_ERRORS_DOC, compat.MINOR_DOC),
        needs=("extensions", "torch"),
    ),
    Rule(
        id="ext-torch-symbols",
        severity=ERROR,
        title="An extension module imports torch symbols the installed torch does not define",
        check=check_ext_torch_symbols,
        cause="C++ extensions bind to mangled c10/at/torch symbols of the torch they were compiled against; torch has no stable C++ ABI across releases, so an extension built for another torch fails at import.",
        symptoms=("OSError: libc10_cuda.so: cannot open shared object file: No such file or directory",
                  "ImportError: .../activation_ops.cpython-310-x86_64-linux-gnu.so: undefined symbol: _ZN3c106detail14torchCheckFailEPKcS2_jRKSs",
                  "OSError: .../_core.cpython-312-x86_64-linux-gnu.so: undefined symbol: _ZNK3c106SymInt22maybe_as_int_slow_pathEv"),
        evidence_used="each torch-linked extension's undefined dynamic symbols (relocation order) looked up in the .gnu.hash tables of the installed torch's libraries; for one with missing symbols, its DT_NEEDED libraries resolved breadth first as ld.so maps them after `import torch` (the first one found nowhere is the error the user sees). One finding per package, every failing file as evidence; a torchvision that torchvision-mismatch reports is left to that finding (one cause).",
        fix_text="rebuild the extension against the installed torch (exact command), or install the torch it was built for.",
        sources=(CPP_EXT_DOC, "vllm-project/vllm#1344", "HazyResearch/ThunderKittens#143", "leonardodalinky/pytorch_fpsample#8"),
        needs=("extensions", "torch"),
    ),
)
