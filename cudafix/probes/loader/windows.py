"""Native Windows: the DLL side of ``import torch`` (docs/windows.md), read without importing torch.

Runs on any OS over the files it is given (tests run it on the real win_amd64 wheels unpacked
here); only :func:`commit_limit` needs Windows itself (``ctypes.windll``, imported there only).
"""

from __future__ import annotations

import glob
import os
from typing import Iterable, Mapping, Optional, Tuple

from cudafix.knowledge import windows as K
from cudafix.model.platform import WindowsInfo
from cudafix.probes.loader.windlls import simulate_import


def system32_names(env: Mapping[str, str]) -> Tuple[Optional[frozenset], str]:
    root = env.get("SystemRoot") or env.get("SYSTEMROOT") or r"C:\Windows"
    d = os.path.join(root, "System32")
    try:
        return frozenset(n.lower() for n in os.listdir(d) if n.lower().endswith(".dll")), d
    except OSError as exc:
        return None, "%s: %s" % (d, exc.strerror or exc)


def commit_limit() -> Tuple[Optional[int], str]:
    """RAM + pagefile (GlobalMemoryStatusEx ullTotalPageFile): the commit limit every process charges against."""
    if os.name != "nt":
        return None, "not Windows"
    import ctypes  # Windows only: ctypes.windll exists there

    class MEMORYSTATUSEX(ctypes.Structure):
        _fields_ = [("dwLength", ctypes.c_ulong), ("dwMemoryLoad", ctypes.c_ulong), ("ullTotalPhys", ctypes.c_ulonglong),
                    ("ullAvailPhys", ctypes.c_ulonglong), ("ullTotalPageFile", ctypes.c_ulonglong),
                    ("ullAvailPageFile", ctypes.c_ulonglong), ("ullTotalVirtual", ctypes.c_ulonglong),
                    ("ullAvailVirtual", ctypes.c_ulonglong), ("ullAvailExtendedVirtual", ctypes.c_ulonglong)]

    st = MEMORYSTATUSEX()
    st.dwLength = ctypes.sizeof(MEMORYSTATUSEX)
    if not ctypes.windll.kernel32.GlobalMemoryStatusEx(ctypes.byref(st)):  # type: ignore[attr-defined]
        return None, "GlobalMemoryStatusEx failed"
    return int(st.ullTotalPageFile), "GlobalMemoryStatusEx ullTotalPageFile"


def read_nvcuda(path: str) -> Tuple[str, Optional[str], str]:
    """(path, driver version, how) from nvcuda.dll's VS_FIXEDFILEINFO (cudafix.probes.binfmt.pe)."""
    from cudafix.probes.binfmt import pe

    f, why = pe.read_pe(path)
    if f is None or not f.file_version:
        return path, None, "%s: %s" % (path, why or "no version resource")
    ver = pe.nvidia_driver_version(f.file_version)
    return path, ver, "version resource of %s (file version %s)" % (path, ".".join(map(str, f.file_version)))


def dll_bytes(dirs: Iterable[str]) -> int:
    total = 0
    for d in dirs:
        for p in glob.glob(os.path.join(glob.escape(d), "*.dll")):
            try:
                total += os.path.getsize(p)
            except OSError:
                pass
    return total


def probe_windows(torch_dir: Optional[str], python_version: str, env: Mapping[str, str], *, cuda: Optional[str] = None,
                  exec_prefix: str = "", site_dirs: Iterable[str] = (), on_windows: Optional[bool] = None) -> WindowsInfo:
    """``on_windows`` False runs the same code over a tree on another OS (System32 assumed standard)."""
    on_windows = (os.name == "nt") if on_windows is None else on_windows
    info = WindowsInfo(probed=True)
    names: Optional[frozenset] = None
    if on_windows:
        names, via = system32_names(env)
        if names is None:
            info.unknown["system32"] = via
        else:
            info.system32_listed = True
            info.found_via["system32"] = via
            info.vc_runtime = "msvcp140.dll" in names
        nvcuda = os.path.join(via, "nvcuda.dll") if names is not None else ""
        if nvcuda and os.path.isfile(nvcuda):
            info.nvcuda, info.driver_version, why = read_nvcuda(nvcuda)
            (info.found_via if info.driver_version else info.unknown)["driver_version"] = why
    if names is None:
        names = K.SYSTEM32 | K.VC_RUNTIME
        info.found_via["system32"] = "assumed: Windows' standard System32 DLLs and the VC++ Redistributable (not read)"
    if not torch_dir:
        info.unknown["dll_failure"] = "no torch installation"
        return info
    fail = simulate_import(torch_dir, python_version, system32=names, exec_prefix=exec_prefix, env=env, cuda=cuda)
    info.dll_failure = fail.to_dict() if fail else None
    info.found_via["dll_failure"] = "torch/__init__.py _load_dll_libraries simulated over the PE import tables of %s" % torch_dir
    nv = [d for s in site_dirs for d in glob.glob(os.path.join(glob.escape(s), "nvidia", "*", "bin"))]
    info.dll_bytes = dll_bytes([os.path.join(torch_dir, "lib")] + nv)
    info.found_via["dll_bytes"] = "sizes of torch\\lib\\*.dll and nvidia\\*\\bin\\*.dll"
    if on_windows:
        info.commit_limit_bytes, why = commit_limit()
        (info.found_via if info.commit_limit_bytes else info.unknown)["commit_limit_bytes"] = why
    else:
        info.unknown["commit_limit_bytes"] = "not read: the snapshot was not taken on Windows"
    return info
