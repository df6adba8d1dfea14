"""Driver rules: presence, user-space vs kernel module, CUDA version vs torch's, forward compat
(the documents and reports each rule cites in ``sources``, docs/rules.md)."""

from __future__ import annotations

import os
import re

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Iterable, List, Optional, Tuple

from cudafix.model.findings import ERROR, INFO, WARNING, Outcome, Rule
from cudafix.model.fixes import REMOVE_PATH, EnvOp, EnvPatch, Fix, Preload
from cudafix.knowledge import compat, cuda_driver
from cudafix.rules import extensions as rext
from cudafix.rules import gpu_driver
from cudafix.rules._util import (
    driver_cuda_int,
    driver_version,
    gpu_label,
    hardware_evidence,
    major_minor,
    nvidia_hardware,
    ok,
    problem,
    recommend_commands,
    torch_label,
    unknown,
    vtuple,
)
from cudafix.model.snapshot import Snapshot
from cudafix.model import cuda as cudaver

MINOR_DOC = "https://docs.nvidia.com/deploy/cuda-compatibility/minor-version-compatibility.html"
FWD_DOC = "https://docs.nvidia.com/deploy/cuda-compatibility/forward-compatibility.html"
RN_DOC = "https://docs.nvidia.com/cuda/cuda-toolkit-release-notes/index.html"


def _cuda_torch(snap: Snapshot):
    t = snap.primary_torch
    return t if (t is not None and t.cuda) else None


def _windows(snap: Snapshot) -> bool:
    """A native Windows snapshot: the driver is nvcuda.dll (cudafix.probes.loader.windows), never a kernel module."""
    return (snap.python.platform or "").startswith("win")


def _assumed_gpus_only(snap: Snapshot) -> bool:
    keys = set(k.lower() for k in snap.assumed)
    return any("gpu" in k for k in keys) and not any("driver" in k for k in keys)


# -- no-driver -----------------------------------------------------------------------------


def check_no_driver(snap: Snapshot) -> Iterable[Outcome]:
    d = snap.driver
    gpus = snap.gpus.gpus
    t = _cuda_torch(snap)
    hw = nvidia_hardware(snap)
    if not gpus and t is None:
        if d.kernel_version or d.libcuda_path:
            return [ok("driver %s present" % (d.kernel_version or d.libcuda_version or d.libcuda_path), subject="driver")]
        if hw:
            return [ok("no CUDA torch build in this env: it needs no driver", hardware_evidence(snap), subject="driver")]
        return [ok("no CUDA torch build and no NVIDIA GPU: no driver needed", subject="driver")]
    if "driver" in snap.assumed and d.kernel_version:
        return [ok("driver %s assumed (--assume-driver): a machine with that driver installed" % d.kernel_version, subject="driver")]
    if (d.kernel_version or d.wsl or _windows(snap)) and d.libcuda_path:
        return [ok("driver %s: kernel module and %s" % (d.kernel_version or d.libcuda_version or "?", d.libcuda_path), subject="driver")]
    if _assumed_gpus_only(snap) and not d.kernel_version and not d.libcuda_path:
        return [unknown("GPUs assumed without a driver: pass --assume-driver VERSION to judge the driver", subject="driver")]
    if "driver" in snap.probe_errors:
        return [unknown("driver probe failed", snap.probe_errors["driver"], subject="driver")]
    if not gpus and not d.kernel_version and hw is False:
        # Nothing is wrong: PyPI's default Linux torch is a CUDA build, and on a laptop or CI
        # runner without NVIDIA hardware it simply runs on the CPU.  A note, never a warning.
        return [problem(
            "CPU-only machine; this CUDA build of torch runs on the CPU",
            [hardware_evidence(snap),
             "%s is a CUDA %s build: torch.cuda.is_available() is False here and tensors stay on the CPU; no driver is needed" % (torch_label(t), t.cuda)
             if t is not None else ""],
            severity=INFO, subject="driver",
        )]
    if not gpus and hw is None and not d.kernel_version and not d.libcuda_path:
        return [unknown("no NVIDIA driver; whether this machine has an NVIDIA GPU is unknown", hardware_evidence(snap), subject="driver")]
    need = []
    if gpus:
        need.append("NVIDIA GPU(s): %s" % ", ".join(gpu_label(g) for g in gpus))
    if t is not None:
        need.append("%s is a CUDA %s build" % (torch_label(t), t.cuda))
    floor = cuda_driver.min_driver(t.cuda) if t is not None else None
    want = "an NVIDIA driver%s" % (" >= %s (CUDA %s)" % (floor, t.cuda) if floor and t is not None else "")
    if hw:
        need.append(hardware_evidence(snap))
    severity = ERROR if (gpus or hw) else WARNING
    if d.kernel_version and not d.libcuda_path:
        why = d.unknown.get("libcuda_path") or "the loader finds no libcuda.so.1"
        if "not searched" in why or "failed" in why:
            return [unknown("kernel module %s loaded; libcuda not probed" % d.kernel_version, why, subject="driver")]
        return [problem(
            "NVIDIA kernel module %s is loaded but no libcuda.so.1 is found: CUDA cannot start" % d.kernel_version,
            need + ["kernel module %s (%s)" % (d.kernel_version, d.found_via.get("kernel_version", "/sys/module/nvidia/version")), why],
            fix=Fix(summary="install the user-space driver %s (in a container: run it with the NVIDIA runtime, e.g. docker run --gpus all)" % d.kernel_version),
            severity=severity, subject="driver",
        )]
    if d.libcuda_path and not d.kernel_version and not d.wsl and not _windows(snap):
        why = d.unknown.get("kernel_version") or "no /sys/module/nvidia/version or /proc/driver/nvidia/version"
        return [problem(
            "%s is present but no NVIDIA kernel module is loaded: CUDA cannot start" % d.libcuda_path,
            need + [why],
            fix=Fix(summary="load the NVIDIA kernel module (install the driver %s, or reboot after installing it)" % (d.libcuda_version or "")),
            severity=severity, subject="driver",
        )]
    why = "; ".join(v for k, v in sorted(d.unknown.items()) if k in ("kernel_version", "libcuda_path")) or "no kernel module and no libcuda.so.1"
    return [problem(
        "no NVIDIA driver: %s cannot use a GPU" % (torch_label(t) if t is not None else "CUDA"),
        need + [why],
        fix=Fix(summary="install %s%s" % (want, "; in a container, run it with the NVIDIA runtime (docker run --gpus all)")),
        severity=severity, subject="driver",
    )]


# -- driver-library-mismatch ---------------------------------------------------------------


def _is_compat_path(snap: Snapshot, path: Optional[str]) -> bool:
    if not path:
        return False
    if "/compat/" in path or os.path.basename(os.path.dirname(path)) == "compat":
        return True
    real = [os.path.normpath(p) for p in snap.driver.compat_libcuda]
    return os.path.normpath(path) in real


def check_library_mismatch(snap: Snapshot) -> Iterable[Outcome]:
    d = snap.driver
    if d.wsl or _windows(snap):
        return [ok("WSL / Windows: the driver's libraries are the Windows driver's, no Linux kernel module to match", subject="driver")]
    if not d.kernel_version:
        if d.libcuda_version or d.nvml_version:
            return [unknown("user-space driver %s found but the kernel module version is unknown" % (d.libcuda_version or d.nvml_version),
                            d.unknown.get("kernel_version", ""), subject="driver")]
        return [ok("no NVIDIA driver: nothing to mismatch (see no-driver)", subject="driver")]
    out: List[Outcome] = []
    checked = []
    libs = []
    if d.libcuda_version and not _is_compat_path(snap, d.libcuda_path):
        libs.append(("libcuda", d.libcuda_version, d.libcuda_path or "libcuda.so.1", "CUDA init fails: Error 803: system has unsupported display driver / cuda driver combination"))
    if d.nvml_version:
        libs.append(("libnvidia-ml", d.nvml_version, "libnvidia-ml.so.%s" % d.nvml_version, "nvidia-smi: Failed to initialize NVML: Driver/library version mismatch"))
    bad = {}
    for name, ver, path, effect in libs:
        checked.append(name)
        if ver != d.kernel_version:
            bad.setdefault(ver, []).append((name, ver, path, effect))
    for ver, group in sorted(bad.items()):
        name = " and ".join(g[0] for g in group)
        path = ", ".join(g[2] for g in group)
        effect = "; ".join(g[3] for g in group)
        newer = vtuple(ver) > vtuple(d.kernel_version)
        ev = [
            "kernel module %s (%s)" % (d.kernel_version, d.found_via.get("kernel_version", "/sys/module/nvidia/version")),
            "%s %s (%s)" % (name, ver, path),
            "the user-space driver must be the kernel module's exact version: %s" % effect,
        ]
        if newer:
            fix = Fix(summary="the driver was upgraded but the old kernel module is still loaded: reboot (or reload the nvidia modules)", commands=("sudo reboot",))
            msg = "driver libraries %s are newer than the loaded kernel module %s (upgraded without reboot)" % (ver, d.kernel_version)
        else:
            fix = Fix(summary="remove the stale %s %s (%s) so the loader finds the driver's own %s" % (name, ver, path, d.kernel_version))
            msg = "%s %s is older than the loaded kernel module %s (a stale copy)" % (name, ver, d.kernel_version)
        out.append(problem(msg, ev, fix=fix, subject=name))
    if out:
        return out
    if not checked:
        why = d.unknown.get("libcuda_version") or d.unknown.get("libcuda_path") or "no libcuda / libnvidia-ml version found"
        if _is_compat_path(snap, d.libcuda_path):
            return [ok("libcuda is a forward-compat copy (judged by forward-compat-mismatch); no libnvidia-ml version to compare", subject="driver")]
        return [unknown("user-space driver version unknown", why, subject="driver")]
    return [ok("%s match the kernel module %s" % (" and ".join(checked), d.kernel_version), subject="driver")]


# -- driver-too-old / driver-minor-compat --------------------------------------------------


def _driver_vs_torch(snap: Snapshot) -> Tuple[Optional[str], object]:
    """Classify by the compatibility model (cudafix.knowledge.compat):
    ("none"|"nogpu"|"unknown"|"ok"|"minor"|"too-old", details)."""
    t = _cuda_torch(snap)
    if t is None:
        return "none", None
    tmm = major_minor(t.cuda)
    dcuda, via = driver_cuda_int(snap)
    dv = driver_version(snap)
    if tmm is None:
        return "unknown", "torch.version.cuda %r unreadable" % t.cuda
    if dcuda is None and not dv and not snap.driver.libcuda_path:
        if nvidia_hardware(snap) is False:
            return "nogpu", hardware_evidence(snap)
        return "unknown", "no driver found (see no-driver)"
    answer = compat.runtime(compat.driver_of(snap), tmm[0] * 1000 + tmm[1] * 10)
    if dcuda is None or answer.state == compat.UNKNOWN:
        return "unknown", answer.why if dcuda is not None else (
            "the driver's CUDA version is unknown (driver %s; no cuDriverGetVersion and branch not in the table)" % (dv or "?"))
    facts = {"t": t, "tmm": tmm, "dmm": cudaver.major_minor(dcuda), "dv": dv, "via": via, "answer": answer,
             "floor": compat.minor_floor(tmm[0])}
    if answer.fails:
        facts["why"] = answer.why
        return "too-old", facts
    return ("minor" if answer.how == compat.MINOR else "ok"), facts


def _driver_fix(snap: Snapshot, t, tmm, native_only: bool = False) -> Fix:
    cmds, notes = recommend_commands(snap, native_only=native_only)
    need = cuda_driver.min_driver("%d.%d" % tmm)
    summary = "install a torch build for this driver%s" % (" (or upgrade the driver to >= %s for CUDA %d.%d)" % (need, tmm[0], tmm[1]) if need else "")
    if notes and not cmds:
        summary += "; " + notes[0]
    return Fix(summary=summary, commands=cmds)


def check_driver_too_old(snap: Snapshot) -> Iterable[Outcome]:
    kind, facts = _driver_vs_torch(snap)
    if kind == "none":
        return [ok("no CUDA torch build: no driver requirement", subject="driver")]
    if kind == "nogpu":
        return [ok("no NVIDIA GPU: torch's CUDA runtime is never used here, no driver requirement", str(facts), subject="driver")]
    if kind == "unknown":
        return [unknown("whether the driver can run torch's CUDA is unknown", str(facts), subject="driver")]
    t, tmm, dmm, dv = facts["t"], facts["tmm"], facts["dmm"], facts["dv"]
    supports = "driver %s supports CUDA <= %d.%d (%s)" % (dv or "?", dmm[0], dmm[1], facts["via"])
    needs = "%s needs %d.%d" % (torch_label(t), tmm[0], tmm[1])
    if kind in ("ok", "minor"):
        return [ok("%s; %s" % (supports, needs), subject="driver")]
    gpu_need = gpu_driver.upgrade_cuda(snap)
    if gpu_need is not None and compat.runtime(compat.Driver(gpu_need), tmm[0] * 1000 + tmm[1] * 10).runs:
        # One cause, one finding: the driver is too old for the GPU itself, and the driver the GPU
        # needs (CUDA >= X) runs torch's CUDA too: driver-gpu-unsupported names the one upgrade.
        return [ok("%s; %s: one cause, reported by driver-gpu-unsupported (the driver this GPU needs, CUDA >= %s, runs it)" % (
            supports, needs, cudaver.version_text(gpu_need)), subject="driver")]
    ev = ["%s; %s" % (supports, needs), facts["why"]]
    # One cause, one finding: add-ons whose own CUDA runtime this driver cannot run either are
    # this finding's evidence (ext-cuda-major leaves them to it).
    from cudafix.rules._companions import companion_evidence

    ev += rext.driver_failures(snap) + companion_evidence(snap, "driver-too-old")
    return [problem(
        "driver %s (CUDA %d.%d) is too old for %s (CUDA %d.%d)" % (dv or "?", dmm[0], dmm[1], torch_label(t), tmm[0], tmm[1]),
        ev, fix=_driver_fix(snap, t, tmm), subject="driver",
    )]


def check_driver_minor_compat(snap: Snapshot) -> Iterable[Outcome]:
    kind, facts = _driver_vs_torch(snap)
    if kind == "none":
        return [ok("no CUDA torch build", subject="driver")]
    if kind == "nogpu":
        return [ok("no NVIDIA GPU: no driver, no compatibility mode", str(facts), subject="driver")]
    if kind == "unknown":
        return [unknown("whether minor-version compatibility is needed is unknown", str(facts), subject="driver")]
    if kind == "too-old":
        return [ok("driver is below the minor-version compatibility floor (reported by driver-too-old)", subject="driver")]
    t, tmm, dmm, dv = facts["t"], facts["tmm"], facts["dmm"], facts["dv"]
    if kind == "ok":
        return [ok("driver %s supports CUDA %d.%d >= torch's %d.%d: no compatibility mode" % (dv or "?", dmm[0], dmm[1], tmm[0], tmm[1]), subject="driver")]
    ev = [
        "driver %s supports CUDA <= %d.%d; %s needs %d.%d" % (dv or "?", dmm[0], dmm[1], torch_label(t), tmm[0], tmm[1]),
        "it runs under CUDA minor-version compatibility (driver >= %s for CUDA %d.x)" % (facts["floor"], tmm[0]),
        "NVIDIA: under minor-version compatibility PTX of the newer toolkit cannot be JIT-compiled and features needing a newer driver return cudaErrorCallRequiresNewerDriver",
    ]
    native, why_native = _all_sass(snap)
    ev.append(why_native)
    if native:
        # Nothing the GPUs run needs the JIT: what minor compatibility cannot do is never asked of it.
        return [problem(
            "driver %s (CUDA %d.%d) runs %s (CUDA %d.%d) under minor-version compatibility: every GPU runs SASS, no PTX JIT needed; "
            "APIs that need a newer driver return cudaErrorCallRequiresNewerDriver" % (dv or "?", dmm[0], dmm[1], torch_label(t), tmm[0], tmm[1]),
            ev, severity=INFO, subject="driver",
        )]
    return [problem(
        "driver %s (CUDA %d.%d) runs %s (CUDA %d.%d) only under minor-version compatibility: no PTX JIT, newer features off" % (
            dv or "?", dmm[0], dmm[1], torch_label(t), tmm[0], tmm[1]),
        ev, fix=_driver_fix(snap, t, tmm, native_only=True), subject="driver",
    )]


def _all_sass(snap: Snapshot) -> Tuple[bool, str]:
    """(True, why) when every visible GPU runs SASS of torch's CUDA libraries and of every
    extension module of torch with device code: then minor-version compatibility needs no PTX JIT."""
    from cudafix.knowledge.arch import fit
    from cudafix.rules._torchfit import _fits  # the arch rules' own view of torch's code per GPU

    _t, _covs, fits, _blocked = _fits(snap)
    if not fits:
        return False, "no visible GPU with a known compute capability: whether a PTX JIT is needed is unknown"
    bad = [f.gpu.name for f in fits if f.kind != "sass"]
    if bad:
        return False, "%s: torch has no SASS for it (it would need the PTX JIT, which minor-version compatibility cannot do)" % ", ".join(bad)
    if not snap.extensions.scanned:
        return False, "extension modules not scanned: whether one of them needs the PTX JIT is unknown"
    # Only the modules that run on torch's CUDA runtime (they link torch): a package with its own
    # runtime (cupy, jax's plugins) is not under torch's minor-version compatibility.
    for m in snap.extensions.modules:
        if m.torch_linked and (m.sass or m.ptx):
            for f in fits:
                if fit(m.sass, [], f.cc or "").kind != "sass":
                    return False, "%s (%s) has no SASS for %s (compute capability %s)" % (os.path.basename(m.path), m.package or "?", f.gpu.name, f.cc)
    return True, "every visible GPU runs SASS of torch%s: nothing needs the PTX JIT" % (" and its extension modules" if snap.extensions.modules else "")


# -- forward-compat-mismatch ---------------------------------------------------------------

def _driver_ver_of_file(path: str) -> Optional[str]:
    m = re.match(r"^libcuda\.so\.(\d{3,4}(?:\.\d+){1,2})$", os.path.basename(path))
    return m.group(1) if m else None


def _system_libcuda(snap: Snapshot, kernel: str) -> Optional[str]:
    """A libcuda file on this machine whose version equals the kernel module's: the driver's own
    copy (ld.so.cache, the default dirs) before one found through LD_LIBRARY_PATH, which anyone
    who sets that variable chooses (cudafix.store.safefs.preload_refusal vets it again)."""
    ld_dirs = {os.path.normpath(e) for e in snap.libraries.ld_library_path or () if e.startswith("/")}
    found = []
    for r in snap.libraries.resolutions:
        if r.soname.startswith("libcuda.so"):
            for p in [r.resolved or ""] + list(r.others) + [r.expected or ""]:
                if p and _driver_ver_of_file(p) == kernel and not _is_compat_path(snap, p):
                    found.append(p)
    found.sort(key=lambda p: os.path.dirname(os.path.normpath(p)) in ld_dirs)  # stable: system first
    return found[0] if found else None


def check_forward_compat(snap: Snapshot) -> Iterable[Outcome]:
    d = snap.driver
    path = d.libcuda_path
    if not path:
        return [ok("no libcuda loaded: no forward-compat library in use", subject="libcuda")]
    if not _is_compat_path(snap, path):
        extra = " (cuda-compat copies present but not picked: %s)" % ", ".join(d.compat_libcuda) if d.compat_libcuda else ""
        return [ok("libcuda %s is the driver's own%s" % (path, extra), subject="libcuda")]
    cv = d.libcuda_version or _driver_ver_of_file(path)
    kv = d.kernel_version
    if not cv or not kv:
        return [unknown("forward-compat libcuda %s in use; versions unknown (libcuda %s, kernel module %s)" % (path, cv, kv), subject="libcuda")]
    if cv == kv:
        return [ok("forward-compat libcuda %s has the kernel module's version %s" % (path, kv), subject="libcuda")]
    cb, kb = cuda_driver.driver_branch(cv), cuda_driver.driver_branch(kv)
    ev = [
        "the loader picks the cuda-compat libcuda %s (version %s)" % (path, cv),
        "the loaded kernel module is %s (%s)" % (kv, d.found_via.get("kernel_version", "/sys/module/nvidia/version")),
    ]
    note = d.libcuda_fwd_note
    if note is not None and os.path.normpath(note.path) != os.path.normpath(path):
        note = None
    newer = vtuple(cv) > vtuple(kv)
    code = None
    if note is not None:
        # The library's own note decides, as the NVIDIA Container Toolkit >= 1.20 does
        # (cudacompat/cuda-elf-header.go UseCompat): the module's branch is listed and the
        # library's version is newer than the module's. The note's "device" list is not used:
        # the toolkit ignores it and NVIDIA does not document its numbering.
        ev.append("its %s lists kernel-module branches %s (CUDA %s)" % (
            "ELF note .note.cuda.fwd_compatibility", ", ".join("R%d" % b for b in note.driver), note.cuda_version or "?"))
        if kb not in note.driver:
            ev.append("R%d is not in the library's own list -> CUDA_ERROR_SYSTEM_DRIVER_MISMATCH (803)" % kb)
            code = 803
        elif not newer:
            ev.append("a cuda-compat libcuda runs only when its version is newer than the kernel module's; %s is older -> CUDA_ERROR_SYSTEM_DRIVER_MISMATCH (803)" % cv)
            code = 803
    else:
        ev.append("no forward-compat note read (%s): judged by driver branch, the rule for libraries without one" % (
            d.unknown.get("libcuda_fwd_note") or "not probed"))
        if cb < kb or not newer:
            ev.append("a cuda-compat libcuda runs only when its version is newer than the kernel module's; %s is not -> CUDA_ERROR_SYSTEM_DRIVER_MISMATCH (803)" % cv)
            code = 803
        elif cb == kb:
            return [unknown("cuda-compat libcuda %s is newer than kernel module %s of the same branch R%d: whether it supports that module is written only in the library's note, which was not read" % (cv, kv, kb), *ev, subject="libcuda")]
        elif kb not in cuda_driver.FWD_COMPAT_BASE_BRANCHES:
            return [unknown("forward-compat libcuda %s on kernel module %s: R%d is not a base branch of NVIDIA's current forward-compat matrix" % (cv, kv, kb), *ev, subject="libcuda")]
    if code is None:
        gpus = snap.gpus.gpus
        consumer = [g for g in gpus if cuda_driver.forward_compat_class(g.name) == cuda_driver.CONSUMER]
        if consumer:
            ev.append("forward compatibility works only on data-center GPUs (and select NGC-ready RTX, Jetson); %s is not one -> CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE (804)" % ", ".join(gpu_label(g) for g in consumer))
            code = 804
        elif gpus and all(cuda_driver.forward_compat_class(g.name) == cuda_driver.DATACENTER for g in gpus):
            return [ok("forward compatibility in use: libcuda %s on kernel module %s with data-center GPUs" % (cv, kv), *ev, subject="libcuda")]
        else:
            return [unknown("forward-compat libcuda %s on kernel module %s: whether the GPUs support forward compatibility is unknown" % (cv, kv), *ev, subject="libcuda")]
    ops = ()
    compat_dir = os.path.dirname(path)
    entries = snap.libraries.ld_library_path or [p for p in snap.env.get("LD_LIBRARY_PATH", "").split(":") if p]
    for e in entries:
        if os.path.normpath(e) == os.path.normpath(compat_dir):
            ops = (EnvOp(REMOVE_PATH, "LD_LIBRARY_PATH", e),)
            ev.append("it comes first through LD_LIBRARY_PATH entry %s" % e)
            break
    own = _system_libcuda(snap, kv)
    preload = (Preload("libcuda.so.1", own),) if own else ()
    if ops or preload:
        # Safe: CUDA cannot start with this libcuda at all (error 803/804); the driver's own
        # libcuda of the kernel module's exact version is what a system without cuda-compat uses.
        parts = []
        if ops:
            parts.append("drop %s from LD_LIBRARY_PATH on activation" % compat_dir)
        if own:
            parts.append("load the driver's own %s" % own)
        fix = Fix(summary="; ".join(parts), auto=True, env=EnvPatch(ops), preload=preload, applies_in="both")
    else:
        fix = Fix(summary="remove %s from the loader path (LD_LIBRARY_PATH / /etc/ld.so.conf.d) so the driver's own libcuda %s is used" % (compat_dir, kv))
    return [problem("cuda-compat libcuda %s does not fit kernel module %s: CUDA init fails with error %d" % (cv, kv, code), ev, fix=fix, subject="libcuda")]


RULES = (
    Rule(
        id="no-driver",
        severity=ERROR,
        title="A CUDA torch build (or an NVIDIA GPU) but no usable driver / libcuda",
        check=check_no_driver,
        needs=("driver", "gpus", "hardware", "torch"),
        cause="No NVIDIA kernel module is loaded, or the user-space libcuda.so.1 is missing (a container started without the NVIDIA runtime, a driver not installed or not loaded). Error when NVIDIA GPU hardware is present (listed by NVML, or an NVIDIA display/3D device on the PCI bus, or WSL's /dev/dxg). On a machine without NVIDIA hardware (a laptop, a CI runner) nothing is wrong: PyPI's default Linux torch is a CUDA build and runs on the CPU there, which is a note, never a warning. Unknown when the hardware could not be read (e.g. a snapshot from an older cudafix).",
        symptoms=(
            "Found no NVIDIA driver on your system. Please check that you have an NVIDIA GPU and installed a driver from http://www.nvidia.com/Download/index.aspx",
            "torch.cuda.is_available() returns False",
            "RuntimeError: CUDA driver initialization failed, you might not have a CUDA gpu.",
        ),
        evidence_used="/sys/module/nvidia/version or /proc/driver/nvidia/version (kernel module), the libcuda.so.1 the loader finds, the GPU list, the PCI devices of vendor 0x10de with a display class under /sys/bus/pci/devices and /dev/dxg (cudafix.probes.machine.pci), torch.version.cuda",
        fix_text="install the NVIDIA driver (at least the minimum for torch's CUDA), or run the container with the NVIDIA runtime (docker run --gpus all).",
        sources=("pytorch/pytorch torch/cuda/__init__.py (_check_driver)", "SceneWorks/SceneWorks#1966"),
    ),
    Rule(
        id="driver-library-mismatch",
        severity=ERROR,
        title="User-space driver libraries differ from the loaded kernel module",
        check=check_library_mismatch,
        needs=("driver",),
        cause="The driver packages were upgraded (e.g. by unattended-upgrades) but the old kernel module is still loaded, or a stale libcuda copy sits on the loader path. libcuda and libnvidia-ml must be the kernel module's exact version.",
        symptoms=(
            "Failed to initialize NVML: Driver/library version mismatch",
            "CUDA initialization: Unexpected error from cudaGetDeviceCount(). Did you run some cuda functions before calling NumCudaDevices() that might have already set an error? Error 803: system has unsupported display driver / cuda driver combination",
        ),
        evidence_used="kernel module version (/sys/module/nvidia/version), the version in the file name of the libcuda.so.<ver> and libnvidia-ml.so.<ver> the loader picks",
        fix_text="reboot (or reload the nvidia kernel modules) after a driver upgrade; remove a stale libcuda copy otherwise.",
        sources=("oddmario/NVIDIA-Ubuntu-Driver-Guide#4", "lyulyul/shine-cluster#30", "SceneWorks/SceneWorks#1966", "easydiffusion/easydiffusion#379", "pytorch/pytorch#97783"),
    ),
    Rule(
        id="driver-too-old",
        severity=ERROR,
        title="The driver's CUDA version cannot run the torch build's CUDA",
        check=check_driver_too_old,
        needs=("driver", "torch"),
        cause="Each driver supports CUDA up to the version it shipped with (cuDriverGetVersion). Minor-version compatibility lets an older driver of the same CUDA major (>= 450.80.02 for 11.x, >= 525.60.13 for 12.x, >= 580 for 13.x) run a newer minor, but never a newer major; CUDA 10.x has none.",
        symptoms=(
            "UserWarning: CUDA initialization: The NVIDIA driver on your system is too old (found version 12040). Please update your GPU driver by downloading and installing a new version from the URL: http://www.nvidia.com/Download/index.aspx Alternatively, go to: https://pytorch.org to install a PyTorch version that has been compiled with your version of the CUDA driver.",
            "torch.cuda.is_available() returns False",
            "CUDA driver version is insufficient for CUDA runtime version",
        ),
        evidence_used="the driver's CUDA version (cuDriverGetVersion without cuInit, else the driver branch table), the driver release, torch.version.cuda, NVIDIA's minor-version compatibility floors",
        fix_text="install a torch build whose CUDA this driver supports natively, fitting every GPU and the env's Python (`cudafix fix`: the exact command), or upgrade the driver to at least the minimum for torch's CUDA.",
        sources=(RN_DOC, MINOR_DOC, "ModelCloud/GPTQModel#2859"),
    ),
    Rule(
        id="driver-minor-compat",
        severity=WARNING,
        title="torch runs only under CUDA minor-version compatibility (no PTX JIT, some features off)",
        check=check_driver_minor_compat,
        needs=("driver", "torch"),
        cause="The driver supports an older minor of torch's CUDA major. NVIDIA's minor-version compatibility runs it, but PTX compiled by the newer toolkit cannot be JIT-compiled and APIs needing a newer driver fail. A warning when a GPU would need that JIT (torch or one of its extension modules has no SASS for it, or the modules were not scanned); a note when every GPU runs SASS: then nothing needs the JIT, and `cudafix fix` may choose such a build (the smallest change).",
        symptoms=(
            "CUDA error: the provided PTX was compiled with an unsupported toolchain.",
            "cudaErrorCallRequiresNewerDriver",
        ),
        evidence_used="the driver's CUDA version and release, torch.version.cuda, NVIDIA's minor-version compatibility floors",
        fix_text="upgrade the driver to at least the minimum for torch's CUDA, or install a torch build for the driver's CUDA.",
        sources=(MINOR_DOC,),
    ),
    Rule(
        id="forward-compat-mismatch",
        severity=ERROR,
        title="A cuda-compat libcuda on the loader path that does not fit this kernel module or GPU",
        check=check_forward_compat,
        needs=("driver", "gpus", "libraries"),
        auto=True,
        cause="Container images ship NVIDIA's cuda-compat libcuda (/usr/local/cuda-X.Y/compat) and put it on LD_LIBRARY_PATH or ld.so.conf. It works only when its version is newer than the kernel module's (a newer library of the module's own branch counts) and the module's branch is one the library lists in its own ELF note `.note.cuda.fwd_compatibility` (the rule the NVIDIA Container Toolkit >= 1.20 applies), and the GPU is a data-center one; an older copy or an unlisted branch gives error 803 (measured on the H200: compat 580.95.05 on module 580.159.04), a consumer GPU error 804. A library without the note is judged by driver branch, and a newer library of the same branch is then unknown.",
        symptoms=(
            "Error 803: system has unsupported display driver / cuda driver combination",
            "Error 804: forward compatibility was attempted on non supported HW",
            "torch.cuda.is_available() returns False",
        ),
        evidence_used="the libcuda the loader picks and whether it is a cuda-compat copy, its version, its ELF note .note.cuda.fwd_compatibility (read without loading it), the kernel module version, GPU names, LD_LIBRARY_PATH",
        fix_text="automatic: the compat directory is dropped from LD_LIBRARY_PATH on activation and the driver's own libcuda (the kernel module's version) is preloaded.",
        sources=(FWD_DOC, "NVIDIA/nvidia-container-toolkit cmd/nvidia-cdi-hook/cudacompat/cuda-elf-header.go (UseCompat, v1.20.0)", "DeepVAC/TorchPod#43", "oobabooga/textgen#4407", "gpustack/gpustack#1540", "ModelTC/LightLLM#191",
                 "docs/gpu.md (H200: compat libcuda.so.580.95.05 on driver 580.159.04 -> error 803)"),
    ),
)
