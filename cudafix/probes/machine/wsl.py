"""WSL 2: the Windows host's NVIDIA driver as a Linux distribution sees it (docs/wsl.md).

On WSL 2 there is no Linux kernel module (no /sys/module/nvidia, no /proc/driver/nvidia, no
/dev/nvidia*): the GPU is reached through /dev/dxg, and the driver's user-space libraries are
mapped from Windows into /usr/lib/wsl/lib (libcuda.so, libcuda.so.1 and libcuda.so.1.1 are three
regular files there, not symlinks: microsoft/WSL#8587) and /usr/lib/wsl/drivers/<store dir>/.
WSL lists /usr/lib/wsl/lib in /etc/ld.so.conf.d/ld.wsl.conf, so ld.so.cache has libcuda.so.1 --
but no entry for the unversioned libcuda.so that cuDNN 8 dlopens (microsoft/WSL#8587).

Everything is read under the probe root (cudafix.store.paths.probe_root) and reported as the
machine sees it.  Never loads a library; NVML is asked only when ``use_nvml`` (status, snapshot).
"""

from __future__ import annotations

import glob
import os
import re

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import List, Mapping, Optional, Tuple

from cudafix.model.platform import WslFile, WslInfo
from cudafix.probes.loader.ldcache import LD_SO_CACHE, read_ld_cache
from cudafix.probes.machine.host import join_root, read_text

WSL_LIB = "/usr/lib/wsl/lib"
WSL_DRIVERS = "/usr/lib/wsl/drivers"
DXG = "/dev/dxg"
LIBCUDA_NAMES = ("libcuda.so", "libcuda.so.1", "libcuda.so.1.1")
# glibc's default directories on x86_64 / aarch64 (Debian multiarch first; lib64 on RHEL-likes).
SYSTEM_DIRS = ("/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib/aarch64-linux-gnu",
               "/usr/lib/aarch64-linux-gnu", "/lib64", "/usr/lib64", "/lib", "/usr/lib")
_LINUX_DRIVER_RE = re.compile(r"^libcuda\.so\.(\d{3}\.\d+(?:\.\d+)?)$")


def kernel_says_wsl(text: str) -> bool:
    """``5.15.133.1-microsoft-standard-WSL2`` (osrelease) / ``Linux version ...-microsoft-standard-WSL2``."""
    low = text.lower()
    return "microsoft" in low or "wsl2" in low


def _unroot(root: str, path: str) -> str:
    if root in ("", "/"):
        return path
    rel = os.path.relpath(path, root)
    return "/" + rel if not rel.startswith("..") else path


def _file(root: str, path: str, role: str, ld_path: List[str]) -> WslFile:
    real = join_root(root, path)
    if os.path.islink(real):
        kind = "symlink"
    elif os.path.isfile(real):
        kind = "file"
    else:
        kind = "absent"
    target = _unroot(root, os.path.realpath(real)) if kind == "symlink" else None
    base = os.path.basename(target or path)
    m = _LINUX_DRIVER_RE.match(base)
    return WslFile(path=path, kind=kind, role=role, target=target,
                   on_ld_library_path=os.path.dirname(path) in ld_path, version=m.group(1) if m else None)


def _role(path: str, target: Optional[str]) -> str:
    real = target or path
    if real.startswith("/usr/lib/wsl/"):
        return "wsl"
    if "/stubs/" in real or os.path.basename(os.path.dirname(real)) == "stubs":
        return "stub"
    if _LINUX_DRIVER_RE.match(os.path.basename(real)):
        return "linux-driver"
    return "other"


def _ld_conf(root: str) -> Optional[str]:
    for conf in sorted(glob.glob(join_root(root, "/etc/ld.so.conf.d/*.conf"))):
        text, _ = read_text(conf, 65536)
        if text and any(line.strip().rstrip("/") == WSL_LIB for line in text.splitlines()):
            return _unroot(root, conf)
    return None


def _search(root: str, name: str, ld_path: List[str], cache_paths: List[str]) -> Tuple[Optional[str], str]:
    """What dlopen(name) from a library without RUNPATH finds: LD_LIBRARY_PATH, ld.so.cache, default dirs."""
    for d in ld_path:
        if os.path.exists(join_root(root, os.path.join(d, name))):
            return os.path.join(d, name), "LD_LIBRARY_PATH entry %s" % d
    for p in cache_paths:
        if os.path.exists(join_root(root, p)):
            return p, "ld.so.cache"
    for d in SYSTEM_DIRS:
        if os.path.exists(join_root(root, os.path.join(d, name))):
            return os.path.join(d, name), "default directory %s" % d
    return None, "not on LD_LIBRARY_PATH, in ld.so.cache or in %s" % ", ".join(SYSTEM_DIRS)


def _windows_driver(root: str, stores: List[str], use_nvml: bool) -> Tuple[Optional[str], str]:
    from cudafix.probes.binfmt import pe

    for d in stores:
        for name in ("nvcuda64.dll", "nvcuda.dll"):
            p = join_root(root, os.path.join(d, name))
            if os.path.isfile(p):
                f, why = pe.read_pe(p)
                if f is not None and f.file_version:
                    ver = pe.nvidia_driver_version(f.file_version)
                    if ver:
                        return ver, "version resource of %s (file version %s)" % (
                            os.path.join(d, name), ".".join(map(str, f.file_version)))
    if use_nvml and root in ("", "/"):
        try:
            import pynvml  # nvidia-ml-py: on WSL its libnvidia-ml.so.1 is the Windows driver's

            pynvml.nvmlInit()
            try:
                v = pynvml.nvmlSystemGetDriverVersion()
            finally:
                pynvml.nvmlShutdown()
            return (v.decode() if isinstance(v, bytes) else str(v)), "NVML nvmlSystemGetDriverVersion (the Windows driver)"
        except Exception as exc:
            return None, "no nvcuda DLL in the driver store and NVML failed: %s" % type(exc).__name__
    return None, "no nvcuda64.dll / nvcuda.dll with a version resource under %s/*/" % WSL_DRIVERS


def probe_wsl(env: Optional[Mapping[str, str]] = None, root: str = "/", use_nvml: bool = False) -> WslInfo:
    env = os.environ if env is None else env
    info = WslInfo(probed=True)
    for p in ("/proc/sys/kernel/osrelease", "/proc/version"):
        text, _ = read_text(join_root(root, p), 4096)
        if text and kernel_says_wsl(text):
            info.evidence.append("%s: %s" % (p, text.strip().split("\n")[0][:120]))
    info.dxg = os.path.exists(join_root(root, DXG))
    if info.dxg:
        info.evidence.append("%s present" % DXG)
    if os.path.isdir(join_root(root, WSL_LIB)):
        info.evidence.append("%s present" % WSL_LIB)
    info.detected = bool(info.evidence)
    if not info.detected:
        info.found_via["detected"] = "no 'microsoft' in the kernel release, no %s, no %s" % (DXG, WSL_LIB)
        return info
    ld_path = [d for d in (env.get("LD_LIBRARY_PATH") or "").split(":") if d]
    info.lib_dir = [_file(root, os.path.join(WSL_LIB, n), "wsl", ld_path) for n in LIBCUDA_NAMES]
    info.driver_store = sorted(_unroot(root, os.path.dirname(p)) for p in
                               glob.glob(join_root(root, WSL_DRIVERS + "/*/libcuda.so.1.1")))
    info.ld_conf = _ld_conf(root)
    cache = read_ld_cache(join_root(root, LD_SO_CACHE))
    if cache.unknown:
        info.unknown["ld.so.cache"] = cache.unknown
    info.unversioned, info.unversioned_via = _search(root, "libcuda.so", ld_path, cache.lookup("libcuda.so"))
    # Every libcuda the loader could reach that is not the mapped one, in the loader's order.
    seen = set()
    for d in ld_path + [os.path.dirname(p) for p in cache.lookup("libcuda.so.1")] + list(SYSTEM_DIRS):
        for n in ("libcuda.so.1", "libcuda.so"):
            p = os.path.join(d, n)
            f = _file(root, p, "", ld_path)
            if f.kind == "absent" or (f.target or p) in seen:
                continue
            seen.add(f.target or p)
            f.role = _role(p, f.target)
            if f.role != "wsl":
                info.shadows.append(f)
    if os.path.exists(join_root(root, "/usr/bin/nvidia-uninstall")):  # a Linux driver from NVIDIA's .run installer
        info.found_via["nvidia-uninstall"] = "/usr/bin/nvidia-uninstall"
    picked, via = _search(root, "libcuda.so.1", ld_path, cache.lookup("libcuda.so.1"))
    if picked:
        info.found_via["libcuda.so.1"] = "%s (%s)" % (picked, via)
    info.windows_driver, why = _windows_driver(root, info.driver_store, use_nvml)
    if info.windows_driver:
        info.found_via["windows_driver"] = why
    else:
        info.unknown["windows_driver"] = why
    return info

