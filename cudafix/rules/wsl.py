"""WSL 2 rules: the Windows host's driver as mapped into /usr/lib/wsl (docs/wsl.md).

Every rule answers ok "not WSL" off WSL, and unknown on a snapshot whose WSL section was never
probed (an older cudafix).  None of them ever asks for a Linux kernel module on WSL.
"""

from __future__ import annotations

import re

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Iterable, List, Optional

from cudafix.model.findings import BUILD, ERROR, INFO, WARNING, Outcome, Rule
from cudafix.model.fixes import PREPEND_PATH, REMOVE_PATH, EnvOp, EnvPatch, Fix, Preload
from cudafix.model.platform import WslFile
from cudafix.model.snapshot import Snapshot
from cudafix.rules._util import ok, problem, unknown

WSL_LIB = "/usr/lib/wsl/lib"
WSL_LIBCUDA = WSL_LIB + "/libcuda.so.1"
WSL_GUIDE = "https://docs.nvidia.com/cuda/wsl-user-guide/index.html"
LDCONF_FIX = (
    # microsoft/WSL#5548 (wswind's and NotTheDr01ds' comments): keep WSL from regenerating
    # ld.wsl.conf, give ldconfig a directory of symlinks to the mapped files.
    "printf '[automount]\\nldconfig = false\\n' | sudo tee -a /etc/wsl.conf",
    "sudo mkdir -p /usr/lib/wsl/lib2 && sudo ln -sf /usr/lib/wsl/lib/* /usr/lib/wsl/lib2/",
    "echo /usr/lib/wsl/lib2 | sudo tee /etc/ld.so.conf.d/ld.wsl.conf && sudo ldconfig",
)


def _gate(snap: Snapshot) -> Optional[List[Outcome]]:
    w = snap.wsl
    if (snap.python.platform or "").startswith("win"):
        return [ok("native Windows, not WSL", subject="wsl")]
    if not w.probed:
        if "wsl" in snap.driver.found_via and not snap.driver.wsl:  # the driver probe has always looked
            return [ok("not WSL 2 (driver probe: %s)" % snap.driver.found_via["wsl"], subject="wsl")]
        return [unknown("WSL section not probed (snapshot from an older cudafix)", subject="wsl")]
    if not w.detected:
        return [ok("not WSL 2 (%s)" % w.found_via.get("detected", "no WSL evidence"), subject="wsl")]
    return None


def _cuda_torch(snap: Snapshot) -> bool:
    t = snap.primary_torch
    return bool(t is not None and t.cuda)


def _lib(snap: Snapshot, name: str) -> Optional[WslFile]:
    for f in snap.wsl.lib_dir:
        if f.path.endswith("/" + name):
            return f
    return None


# -- wsl-driver ------------------------------------------------------------------------------


def check_wsl_driver(snap: Snapshot) -> Iterable[Outcome]:
    gate = _gate(snap)
    if gate is not None:
        return gate
    w = snap.wsl
    ev = list(w.evidence)
    lib1 = _lib(snap, "libcuda.so.1")
    if lib1 is None or lib1.kind == "absent":
        if not _cuda_torch(snap):
            return [ok("WSL 2 without the NVIDIA driver's CUDA libraries; this env has no CUDA torch that needs them", *ev, subject="wsl")]
        return [problem(
            "WSL 2 but %s is missing: the Windows NVIDIA driver maps no CUDA into WSL" % WSL_LIBCUDA,
            ev + ["no %s (the Windows driver puts it there; nothing inside WSL installs it)" % WSL_LIBCUDA],
            fix=Fix(summary="install or update the NVIDIA driver on Windows (not inside WSL), then run `wsl --shutdown` in Windows and reopen the distribution"),
            severity=ERROR, subject="wsl")]
    if not w.dxg and _cuda_torch(snap):
        return [problem(
            "WSL but no /dev/dxg: the GPU is not exposed to this distribution (WSL 1, or a WSL 2 kernel without GPU support)",
            ev + ["/dev/dxg absent (on WSL 2 the GPU is /dev/dxg; there is never a /dev/nvidia*)"],
            fix=Fix(summary="convert the distribution to WSL 2 and update WSL: in Windows, `wsl --set-version <distro> 2` then `wsl --update`"),
            severity=ERROR, subject="wsl")]
    drv = w.windows_driver
    ev.append("Windows driver %s (%s)" % (drv, w.found_via.get("windows_driver")) if drv else
              "Windows driver version unknown: %s" % w.unknown.get("windows_driver", "?"))
    ev.append("NVML and nvidia-smi report the Windows driver's version on WSL; no Linux kernel module exists to match it")
    return [ok("WSL 2: the Windows driver serves the GPU through /dev/dxg and %s" % WSL_LIBCUDA, *ev, subject="wsl")]


# -- wsl-libcuda-not-symlink ---------------------------------------------------------------------


def check_not_symlink(snap: Snapshot) -> Iterable[Outcome]:
    gate = _gate(snap)
    if gate is not None:
        return gate
    files = [f for f in snap.wsl.lib_dir if f.path.endswith(("/libcuda.so", "/libcuda.so.1"))]
    regular = [f for f in files if f.kind == "file"]
    real = _lib(snap, "libcuda.so.1.1")
    if not regular or real is None or real.kind == "absent":
        return [ok("the mapped libcuda names are symlinks (or absent): ldconfig has nothing to warn about", subject="wsl")]
    if snap.wsl.ld_conf is None:
        return [ok("%s is not in /etc/ld.so.conf.d: ldconfig does not scan it" % WSL_LIB, subject="wsl")]
    return [problem(
        "ldconfig warns '%s is not a symbolic link' on every package install (harmless: CUDA still loads)" % WSL_LIBCUDA,
        ["%s is a regular file, a copy of libcuda.so.1.1 with the same soname libcuda.so.1" % f.path for f in regular]
        + ["%s lists %s, so every ldconfig run scans it" % (snap.wsl.ld_conf, WSL_LIB)],
        fix=Fix(summary="give ldconfig a directory of symlinks and stop WSL regenerating ld.wsl.conf (/usr/lib/wsl/lib itself is mounted from Windows)",
                commands=LDCONF_FIX),
        severity=INFO, subject="wsl")]


# -- wsl-libcuda-unversioned ---------------------------------------------------------------------

_CUDNN8 = re.compile(r"^libcudnn[a-z_]*\.so\.8$")


def cudnn8_evidence(snap: Snapshot) -> Optional[str]:
    for w in snap.toolkits.nvidia_wheels:
        if w.name.startswith("nvidia-cudnn") and w.version.split(".")[0] == "8":
            return "%s %s installed" % (w.name, w.version)
    for p in snap.toolkits.conda_packages:
        if p.name == "cudnn" and p.version.split(".")[0] == "8":
            return "conda cudnn %s installed" % p.version
    for r in snap.libraries.resolutions:
        if _CUDNN8.match(r.soname):
            return "torch loads %s (%s)" % (r.soname, r.resolved or "unresolved")
    t = snap.primary_torch
    if t is not None and "cudnn8" in (t.dist.conda_build or ""):
        return "conda build %s" % t.dist.conda_build
    return None


def check_unversioned(snap: Snapshot) -> Iterable[Outcome]:
    gate = _gate(snap)
    if gate is not None:
        return gate
    w = snap.wsl
    if not _cuda_torch(snap):
        return [ok("no CUDA torch build: nothing dlopens libcuda.so", subject="wsl")]
    why = cudnn8_evidence(snap)
    if why is None:
        if not snap.libraries.resolutions:
            return [unknown("whether this env uses cuDNN 8 is unknown (no library resolutions)", snap.libraries.unknown.get("resolutions", ""), subject="wsl")]
        return [ok("no cuDNN 8 in this env: cuDNN 9 and CUDA ask for libcuda.so.1 only", subject="wsl")]
    if w.unversioned and not _is_shadow_path(snap, w.unversioned):
        return [ok("dlopen(\"libcuda.so\") finds %s (%s)" % (w.unversioned, w.unversioned_via), why, subject="wsl")]
    if w.unversioned:
        return [ok("libcuda.so resolves to a non-WSL file (see wsl-libcuda-shadowed)", subject="wsl")]
    return [problem(
        "cuDNN 8 dlopens the unversioned libcuda.so, which the loader does not find on WSL: the first convolution aborts the process",
        [why, "dlopen(\"libcuda.so\"): %s" % w.unversioned_via,
         "ld.so.cache has only the soname libcuda.so.1 for %s (ldconfig caches sonames, not the libcuda.so name)" % WSL_LIB],
        fix=Fix(summary="put %s first on LD_LIBRARY_PATH (activation does it; by hand: export LD_LIBRARY_PATH=%s${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH})" % (WSL_LIB, WSL_LIB),
                auto=True, env=EnvPatch((EnvOp(PREPEND_PATH, "LD_LIBRARY_PATH", WSL_LIB),)), applies_in="activation"),
        severity=ERROR, subject="wsl")]


# -- wsl-libcuda-shadowed ------------------------------------------------------------------------


def _is_shadow_path(snap: Snapshot, path: str) -> bool:
    return any(f.path == path for f in snap.wsl.shadows)


def _picked(snap: Snapshot) -> Optional[str]:
    v = snap.wsl.found_via.get("libcuda.so.1")
    return v.split(" (", 1)[0] if v else None


_ROLE_TEXT = {"linux-driver": "a Linux NVIDIA driver installed inside WSL", "stub": "a CUDA toolkit's link-time stub",
              "other": "a copy that is not the Windows driver's"}


def _shadow_fix(snap: Snapshot, shadows: List[WslFile]) -> Fix:
    ops = tuple(EnvOp(REMOVE_PATH, "LD_LIBRARY_PATH", d) for d in
                sorted({f.path.rsplit("/", 1)[0] for f in shadows if f.on_ld_library_path}))
    cmds: List[str] = []
    if any(f.role == "linux-driver" and not f.on_ld_library_path for f in shadows):
        # NVIDIA's WSL guide: never install a Linux driver in WSL 2; the distro packages own the file.
        if "nvidia-uninstall" in snap.wsl.found_via:  # the .run installer's own uninstaller
            cmds.append("sudo nvidia-uninstall")
        else:  # Debian/Ubuntu: libcuda.so.1 is libnvidia-compute-<branch>'s; apt removes nvidia-driver-<branch> with it
            cmds.append("sudo apt-get remove --purge 'libnvidia-compute-*'")
        cmds.append("sudo ldconfig")
    for f in shadows:
        if f.on_ld_library_path:
            cmds.append("export LD_LIBRARY_PATH=$(printf %%s \"$LD_LIBRARY_PATH\" | tr ':' '\\n' | grep -vxF '%s' | paste -sd:)"
                        % f.path.rsplit("/", 1)[0])
    # Safe: the Linux driver's and the stub's libcuda cannot drive a WSL GPU at all; the mapped one can.
    return Fix(summary="load the Windows driver's %s first%s" % (WSL_LIBCUDA, " and drop the shadowing LD_LIBRARY_PATH entries on activation" if ops else ""),
               auto=True, env=EnvPatch(ops), preload=(Preload("libcuda.so.1", WSL_LIBCUDA),), applies_in="both",
               commands=tuple(cmds))


def check_shadowed(snap: Snapshot) -> Iterable[Outcome]:
    gate = _gate(snap)
    if gate is not None:
        return gate
    w = snap.wsl
    if not w.shadows:
        return [ok("no libcuda on the search path besides the mapped %s" % WSL_LIBCUDA, subject="wsl")]
    picked = _picked(snap)
    ev = ["%s: %s%s%s" % (f.path, _ROLE_TEXT.get(f.role, f.role), " %s" % f.version if f.version else "",
                          " (via LD_LIBRARY_PATH)" if f.on_ld_library_path else "") for f in w.shadows]
    hit = [f for f in w.shadows if f.path == picked]
    unv = [f for f in w.shadows if f.path == w.unversioned and _cuda_torch(snap) and cudnn8_evidence(snap)]
    if hit or unv:
        f = (hit or unv)[0]
        what = "libcuda.so.1" if hit else "libcuda.so (cuDNN 8)"
        msg = {"stub": "CUDA fails with CUDA_ERROR_STUB_LIBRARY (34): 'CUDA driver is a stub library'",
               "linux-driver": "the Linux driver cannot reach a WSL GPU: torch.cuda.is_available() is False"}.get(
            f.role, "CUDA does not use the Windows driver")
        return [problem("the loader takes %s from %s, not the Windows driver's: %s" % (what, f.path, msg),
                        ev + ["loader order: %s" % w.found_via.get("libcuda.so.1", "?")],
                        fix=_shadow_fix(snap, hit or unv), severity=ERROR, subject="wsl")]
    return [problem("a libcuda that is not the Windows driver's is installed but not picked today (one ldconfig order change from breaking CUDA)",
                    ev + ["the loader takes %s" % (w.found_via.get("libcuda.so.1") or "?")],
                    fix=_shadow_fix(snap, w.shadows), severity=WARNING, subject="wsl")]


_SOURCES = ("microsoft/WSL#8587", "microsoft/WSL#5548", "microsoft/WSL#11229", WSL_GUIDE)

RULES = (
    Rule(id="wsl-driver", severity=ERROR, title="WSL 2: the Windows driver's CUDA is mapped in and the GPU is exposed",
         check=check_wsl_driver, needs=("wsl", "torch"),
         cause="On WSL 2 the Windows NVIDIA driver maps libcuda into /usr/lib/wsl/lib and the GPU appears as /dev/dxg; there is no Linux kernel module, no /proc/driver/nvidia and no /dev/nvidia*. Missing libcuda means the Windows driver lacks WSL support; a missing /dev/dxg means WSL 1 or a kernel without GPU paravirtualisation.",
         symptoms=("torch.cuda.is_available() returns False", "Found no NVIDIA driver on your system."),
         evidence_used="the kernel release (/proc/sys/kernel/osrelease, /proc/version), /dev/dxg, /usr/lib/wsl/lib, /usr/lib/wsl/drivers/*/ (nvcuda's version resource) or NVML",
         fix_text="install the NVIDIA driver on Windows (never a Linux driver inside WSL 2), run the distribution as WSL 2 and update WSL.",
         sources=(WSL_GUIDE, "microsoft/WSL#5604")),
    Rule(id="wsl-libcuda-not-symlink", severity=INFO, title="ldconfig warns that /usr/lib/wsl/lib/libcuda.so.1 is not a symbolic link",
         check=check_not_symlink, needs=("wsl",), scope=BUILD,
         cause="The Windows driver maps libcuda.so, libcuda.so.1 and libcuda.so.1.1 as three regular files with one soname; ldconfig expects libcuda.so.1 to be a symlink and says so on every run (every apt/dpkg install). CUDA still loads.",
         symptoms=("ldconfig: /usr/lib/wsl/lib/libcuda.so.1 is not a symbolic link",),
         evidence_used="file types in /usr/lib/wsl/lib, /etc/ld.so.conf.d/*.conf",
         fix_text="stop WSL regenerating ld.wsl.conf ([automount] ldconfig = false in /etc/wsl.conf) and point it at a directory of symlinks (the exact commands in the finding).",
         sources=_SOURCES),
    Rule(id="wsl-libcuda-unversioned", severity=ERROR, auto=True, title="cuDNN 8 cannot dlopen libcuda.so on WSL",
         check=check_unversioned, needs=("wsl", "torch", "toolkits"),
         cause="cuDNN 8 dlopens the unversioned name libcuda.so. On WSL that file exists only in /usr/lib/wsl/lib, which the loader reaches through ld.so.cache, and ld.so.cache records sonames (libcuda.so.1) only. The first cuDNN convolution aborts the process.",
         symptoms=("Could not load library libcudnn_cnn_infer.so.8. Error: libcuda.so: cannot open shared object file: No such file or directory",
                   "Please make sure libcudnn_cnn_infer.so.8 is in your library path!"),
         evidence_used="cuDNN 8 in the env (nvidia-cudnn wheels, conda cudnn, torch's resolutions), where dlopen(\"libcuda.so\") would look: LD_LIBRARY_PATH, ld.so.cache, the default dirs",
         fix_text="activation puts /usr/lib/wsl/lib first on LD_LIBRARY_PATH (the loader reads it at process start, so the import hook cannot).",
         sources=("microsoft/WSL#8587", "pytorch/pytorch#85773", "THU-MIG/yolov10#395")),
    Rule(id="wsl-libcuda-shadowed", severity=ERROR, auto=True, title="A Linux-driver or stub libcuda shadows the Windows driver's on WSL",
         check=check_shadowed, needs=("wsl",),
         cause="A Linux NVIDIA driver (or the cuda meta-package that pulls one) installed inside WSL puts libcuda.so.1 in /usr/lib/x86_64-linux-gnu, and a toolkit's stubs/libcuda.so on LD_LIBRARY_PATH shadows the real one; neither can reach a WSL GPU.",
         symptoms=("CUDA driver version is insufficient for CUDA runtime version", "CUDA driver is a stub library",
                   "torch.cuda.is_available() returns False"),
         evidence_used="every libcuda.so.1 / libcuda.so on LD_LIBRARY_PATH, in ld.so.cache and in the default dirs, and which one the loader takes first",
         fix_text="cudafix loads /usr/lib/wsl/lib/libcuda.so.1 first and drops shadowing LD_LIBRARY_PATH entries; remove the Linux driver packages (the commands in the finding).",
         sources=(WSL_GUIDE, "microsoft/WSL#9099")),
)
