"""The NVIDIA driver: kernel module version, user-space libcuda / libnvidia-ml, driver CUDA version.

Never calls ``cuInit`` (a parent that called it breaks CUDA in forked children:
torch's "Cannot re-initialize CUDA in forked subprocess");
``cuDriverGetVersion`` is safe without it and is only called from ``cudafix status`` /
``snapshot`` (``call_driver_api=True``), never from the startup hook.

Pure parsers (``parse_*``) are separate from the I/O (``read_*`` / ``probe_driver``).
"""

from __future__ import annotations

import os
import re

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import List, Mapping, Optional, Tuple

from cudafix.probes.machine.host import join_root, read_text
from cudafix.probes.machine.fwdnote import read_fwd_note
from cudafix.model.snapshot import DriverInfo
from cudafix.model.lazyre import lazy_re

_VERSION = r"\d+\.\d+(?:\.\d+)*"
_VERSION_RE = lazy_re(r"^%s$" % _VERSION)
# "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.173.02  Tue Jun 23 08:38:17 UTC 2026"
# "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build  (...)"
_NVRM_RE = lazy_re(r"^NVRM version:.*?Kernel Module(?:\s+for\s+\S+)?\s+(%s)(?:\s|$)" % _VERSION, re.M)

WSL_LIBCUDA = "/usr/lib/wsl/lib/libcuda.so.1"

# Where a driver's libraries commonly live when no loader-simulation is available (fallback only).
_FALLBACK_DIRS = (
    "/usr/lib/x86_64-linux-gnu",
    "/usr/lib/aarch64-linux-gnu",
    "/usr/lib64",
    "/usr/lib",
    "/lib64",
    "/lib",
    "/usr/local/nvidia/lib64",
    "/usr/local/nvidia/lib",
    "/usr/lib64/nvidia",
    "/usr/lib/wsl/lib",
)


def parse_sys_module_version(text: str) -> Optional[str]:
    """/sys/module/nvidia/version holds just the version ("580.159.04\\n")."""
    value = text.strip()
    return value if _VERSION_RE.match(value) else None


def parse_proc_driver_version(text: str) -> Optional[str]:
    """The kernel module version from the NVRM line of /proc/driver/nvidia/version."""
    m = _NVRM_RE.search(text)
    return m.group(1) if m else None


def kernel_module_flavor(text: str) -> Optional[str]:
    """"open" (NVIDIA open GPU kernel modules) or "proprietary", from the NVRM line."""
    for line in text.splitlines():
        if line.startswith("NVRM version:"):
            return "open" if "Open Kernel Module" in line else "proprietary"
    return None


def parse_lib_version(filename: str, stem: str) -> Optional[str]:
    """Version from a driver library's real file name: ("libcuda.so.580.95.05", "libcuda") -> "580.95.05".

    ``libcuda.so.1`` is a soname, not a version: None.
    """
    base = os.path.basename(filename)
    prefix = stem + ".so."
    if not base.startswith(prefix):
        return None
    ver = base[len(prefix):]
    # A driver version has at least major.minor (580.95.05, 470.57.02, WSL's 1.1 is no version).
    if _VERSION_RE.match(ver) and ver.count(".") >= 1 and int(ver.split(".")[0]) >= 100:
        return ver
    return None


def read_kernel_version(root: str = "/") -> Tuple[Optional[str], Optional[str], Optional[str], Optional[str]]:
    """(version, found_via, flavor, reason_if_none) from /sys/module/nvidia/version, else /proc."""
    reasons = []
    sys_path = join_root(root, "/sys/module/nvidia/version")
    text, why = read_text(sys_path, 4096)
    flavor = None
    proc_path = join_root(root, "/proc/driver/nvidia/version")
    proc_text, proc_why = read_text(proc_path, 16384)
    if proc_text is not None:
        flavor = kernel_module_flavor(proc_text)
    if text is not None:
        ver = parse_sys_module_version(text)
        if ver:
            return ver, "/sys/module/nvidia/version", flavor, None
        reasons.append("%s: unexpected content %r" % (sys_path, text[:60]))
    else:
        reasons.append(why or sys_path)
    if proc_text is not None:
        ver = parse_proc_driver_version(proc_text)
        if ver:
            return ver, "/proc/driver/nvidia/version", flavor, None
        reasons.append("%s: no NVRM version line" % proc_path)
    else:
        reasons.append(proc_why or proc_path)
    return None, None, None, "no NVIDIA kernel module loaded (%s)" % "; ".join(reasons)


def detect_wsl(root: str = "/") -> Tuple[bool, Optional[str]]:
    """(is_wsl, evidence): WSL's driver libcuda, /dev/dxg, or a kernel release that names Microsoft / WSL2."""
    for p in (WSL_LIBCUDA, "/dev/dxg"):
        if os.path.exists(join_root(root, p)):
            return True, p
    for p in ("/proc/sys/kernel/osrelease", "/proc/version"):
        text, _ = read_text(join_root(root, p), 4096)
        if text and ("microsoft" in text.lower() or "wsl2" in text.lower()):
            return True, p
    return False, None


def _fallback_find(name: str, env: Mapping[str, str], root: str) -> Tuple[Optional[str], Optional[str]]:
    dirs = [d for d in env.get("LD_LIBRARY_PATH", "").split(":") if d] + list(_FALLBACK_DIRS)
    for d in dirs:
        p = os.path.join(join_root(root, d), name)
        if os.path.exists(p):
            return p, "fallback search: %s" % d
    return None, None


def locate_driver_lib(env: Mapping[str, str], root: str = "/", keep: Tuple[str, ...] = ()) -> Tuple[Optional[str], Optional[str], Optional[str]]:
    """(path, found_via, reason) of the libcuda.so.1 the loader would pick.

    Uses the loader simulation (cudafix.probes.loader.libraries.locate_libcuda), under the probe root
    too (the tree's ld.so.cache and directories), when it is available, else a plain directory
    search (recorded as such in found_via).
    """
    locate = None
    import_error = None
    try:
        from cudafix.probes.loader.libraries import locate_libcuda as locate  # type: ignore
    except Exception as exc:  # module in progress or broken: fall back, say so
        import_error = "%s: %s" % (type(exc).__name__, exc)
    if locate is not None:
        try:
            path, via, reason = locate(env, root=root or "/", keep=keep)
            return path, via, reason
        except Exception as exc:
            import_error = "locate_libcuda failed: %s: %s" % (type(exc).__name__, exc)
    path, via = _fallback_find("libcuda.so.1", env, root)
    if path:
        if import_error:
            via = "%s (loader simulation unavailable: %s)" % (via, import_error)
        return path, via, None
    reason = "libcuda.so.1 not found on LD_LIBRARY_PATH or in the usual driver directories"
    if import_error:
        reason += " (loader simulation unavailable: %s)" % import_error
    return None, None, reason


def query_driver_cuda_version(libcuda_path: str) -> Tuple[Optional[int], Optional[str]]:
    """cuDriverGetVersion WITHOUT cuInit, via ctypes on the located libcuda: (13000, None) or (None, reason)."""
    import ctypes  # only where a libcuda was found (its imports spared otherwise: docs/benchmarks.md)

    from cudafix.store import trustload

    # the trusted loader: never a libcuda another user owns or can replace (one found on an
    # LD_LIBRARY_PATH entry in anyone's directory), checked and loaded in one resolution
    if libcuda_path.startswith("/"):
        lib, _, why = trustload.load(libcuda_path, (), sticky_ok=True)
    else:  # a soname: a copy on LD_LIBRARY_PATH through the same check
        lib, why = trustload.load_soname(libcuda_path, os.environ.get("LD_LIBRARY_PATH"))
    if lib is None:
        return None, why if why.startswith("cannot load") else "not loaded: %s" % why
    try:
        fn = lib.cuDriverGetVersion
    except AttributeError:
        return None, "%s has no cuDriverGetVersion symbol" % libcuda_path
    fn.argtypes = [ctypes.POINTER(ctypes.c_int)]
    fn.restype = ctypes.c_int
    value = ctypes.c_int(0)
    try:
        rc = fn(ctypes.byref(value))
    except Exception as exc:  # pragma: no cover - a crash-free failure of a foreign call
        return None, "cuDriverGetVersion raised %s" % exc
    if rc != 0:
        return None, "cuDriverGetVersion returned CUresult %d" % rc
    if value.value <= 0:
        return None, "cuDriverGetVersion returned %d" % value.value
    return value.value, None


DRIVER_API_CACHE = "driver-api-cache.json"
DRIVER_API_CACHE_VERSION = 1


def cached_driver_cuda_version(libcuda_path: str, cache_dir: Optional[str]) -> Tuple[Optional[int], Optional[str]]:
    """:func:`query_driver_cuda_version`, its answer kept per libcuda file in ``cache_dir``.

    The version is compiled into the library: the same file (realpath, size, mtime, ctime) gives
    the same answer, and loading libcuda (tens of MB) is the costly part of asking it.  Only an
    answer is kept (a failure is asked again), and not for a file changed within the racy window.
    """
    import time

    from cudafix.store import cachefile

    started = time.time_ns()
    real = os.path.realpath(libcuda_path)
    sig = cachefile.stat_sig(real) if cache_dir else None
    entries = cachefile.load(cache_dir, DRIVER_API_CACHE, DRIVER_API_CACHE_VERSION) if sig is not None else {}
    ent = entries.get(real)
    if isinstance(ent, dict) and ent.get("sig") == sig and isinstance(ent.get("cuda_version"), int):
        return ent["cuda_version"], None
    cv, why = query_driver_cuda_version(libcuda_path)
    if cv is not None and sig is not None and cache_dir and not cachefile.racy([sig], started):
        entries[real] = {"sig": sig, "cuda_version": cv}
        cachefile.store(cache_dir, DRIVER_API_CACHE, DRIVER_API_CACHE_VERSION, entries)
    return cv, why


def _find_compat(env: Mapping[str, str], root: str = "/", keep: Tuple[str, ...] = ()) -> Tuple[List[str], Optional[str]]:
    try:
        from cudafix.probes.loader.libraries import find_compat_libcuda  # type: ignore
    except Exception as exc:
        return [], "compat libcuda search unavailable: %s: %s" % (type(exc).__name__, exc)
    try:
        return [str(p) for p in find_compat_libcuda(env, root=root or "/", keep=keep)], None
    except Exception as exc:
        return [], "find_compat_libcuda failed: %s: %s" % (type(exc).__name__, exc)


def probe_driver(env: Optional[Mapping[str, str]] = None, root: str = "/", call_driver_api: bool = True,
                 keep: Tuple[str, ...] = (), cache_dir: Optional[str] = None) -> DriverInfo:
    """The driver: kernel module, libcuda (and its CUDA version: cuDriverGetVersion, without cuInit,
    cached per libcuda file in ``cache_dir``), NVML library, forward-compat copies.  ``keep``: the
    inspected env's own directories, read where they are under a probe root
    (cudafix.probes.machine.host.machine_path)."""
    env = os.environ if env is None else env
    info = DriverInfo()

    ver, via, flavor, reason = read_kernel_version(root)
    if ver:
        info.kernel_version = ver
        info.found_via["kernel_version"] = via + (" (%s kernel module)" % flavor if flavor else "")
    else:
        info.unknown["kernel_version"] = reason or "unknown"

    wsl, evidence = detect_wsl(root)
    info.wsl = wsl
    info.found_via["wsl"] = evidence if wsl else "no %s and no 'microsoft' in /proc/version" % WSL_LIBCUDA
    if wsl and not ver:  # not a problem: the Windows host's driver serves WSL 2 (docs/wsl.md)
        info.unknown["kernel_version"] = "WSL 2: no Linux kernel module; the Windows host's driver serves the GPU through /dev/dxg"

    path, via, reason = locate_driver_lib(env, root, keep)
    if path:
        real = os.path.realpath(path)
        info.libcuda_path = real
        info.found_via["libcuda_path"] = "%s -> %s" % (via, path) if via else path
        lver = parse_lib_version(real, "libcuda")
        if lver:
            info.libcuda_version = lver
            info.found_via["libcuda_version"] = "file name %s" % os.path.basename(real)
        elif wsl:
            info.unknown["libcuda_version"] = "WSL 2: %s is the Windows driver's (no version in its name; see the WSL section)" % os.path.basename(real)
        else:
            info.unknown["libcuda_version"] = "file name %s carries no driver version" % os.path.basename(real)
        note, why = read_fwd_note(real)
        if note is not None:
            info.libcuda_fwd_note = note
            info.found_via["libcuda_fwd_note"] = "ELF note .note.cuda.fwd_compatibility of %s" % real
        else:
            info.unknown["libcuda_fwd_note"] = why or "unknown"
        if call_driver_api:
            cv, why = cached_driver_cuda_version(path, cache_dir)
            if cv is not None:
                info.cuda_version = cv
                info.found_via["cuda_version"] = "cuDriverGetVersion (no cuInit) in %s" % real
            else:
                info.unknown["cuda_version"] = why or "unknown"
        else:
            info.unknown["cuda_version"] = "driver API not called (cuDriverGetVersion is queried only by status/snapshot)"
        # libnvidia-ml ships next to libcuda in every driver package.
        nvml = os.path.join(os.path.dirname(path), "libnvidia-ml.so.1")
        nvml_via = "next to libcuda"
        if not os.path.exists(nvml):
            nvml, nvml_via = _fallback_find("libnvidia-ml.so.1", env, root)
        _fill_nvml(info, nvml, nvml_via)
    else:
        info.unknown["libcuda_path"] = reason or "libcuda.so.1 not found"
        info.unknown["libcuda_version"] = "no libcuda found"
        info.unknown["cuda_version"] = "no libcuda to ask"
        nvml, nvml_via = _fallback_find("libnvidia-ml.so.1", env, root)
        _fill_nvml(info, nvml, nvml_via)

    compat, why = _find_compat(env, root, keep)
    info.compat_libcuda = compat
    if why:
        info.unknown["compat_libcuda"] = why
    return info


def _fill_nvml(info: DriverInfo, nvml: Optional[str], via: Optional[str]) -> None:
    if not nvml:
        info.unknown["nvml_version"] = "libnvidia-ml.so.1 not found"
        return
    real = os.path.realpath(nvml)
    ver = parse_lib_version(real, "libnvidia-ml")
    if ver:
        info.nvml_version = ver
        info.found_via["nvml_version"] = "file name %s (%s)" % (real, via)
    else:
        info.unknown["nvml_version"] = "file name %s carries no driver version" % real
