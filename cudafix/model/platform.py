"""The platform sections of a Snapshot: WSL 2 (the Windows host's driver as mapped in) and native
Windows (what `import torch` will do with its DLLs).  docs/wsl.md, docs/windows.md."""

from __future__ import annotations

import dataclasses

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Dict, List, Optional

from cudafix.model.record import record


def _field_dict() -> Dict[str, str]:
    return {}


@record
class WslFile:
    """One libcuda-like file that matters on WSL 2 (docs/wsl.md): the mapped driver's or a shadow."""

    path: str  # as laid out (under the probe root, written as the machine sees it)
    kind: str  # "file" | "symlink" | "absent"
    role: str = ""  # "wsl" (mapped from Windows) | "linux-driver" | "stub" | "other"
    target: Optional[str] = None  # realpath of a symlink
    on_ld_library_path: bool = False
    version: Optional[str] = None  # a Linux driver's libcuda.so.<ver>


@record
class WslInfo:
    """WSL 2: the Windows host's driver as the distribution sees it (cudafix.probes.machine.wsl).

    ``probed`` False (a snapshot from an older cudafix): every WSL rule answers unknown.
    """

    probed: bool = False
    detected: bool = False
    evidence: List[str] = dataclasses.field(default_factory=list)  # what said "WSL 2"
    dxg: bool = False  # /dev/dxg (GPU paravirtualisation; no /dev/nvidia* on WSL)
    lib_dir: List[WslFile] = dataclasses.field(default_factory=list)  # /usr/lib/wsl/lib/libcuda.so{,.1,.1.1}
    driver_store: List[str] = dataclasses.field(default_factory=list)  # /usr/lib/wsl/drivers/*/ holding libcuda.so.1.1
    windows_driver: Optional[str] = None  # "560.94": nvcuda's version resource, or NVML
    ld_conf: Optional[str] = None  # the /etc/ld.so.conf.d file that lists /usr/lib/wsl/lib
    unversioned: Optional[str] = None  # what dlopen("libcuda.so") finds (cuDNN 8 asks for it); None: nothing
    unversioned_via: str = ""
    shadows: List[WslFile] = dataclasses.field(default_factory=list)  # non-WSL libcuda on the search path
    found_via: Dict[str, str] = dataclasses.field(default_factory=_field_dict)
    unknown: Dict[str, str] = dataclasses.field(default_factory=_field_dict)


@record
class WindowsInfo:
    """Native Windows: what ``import torch`` will do with its DLLs (cudafix.probes.loader.windows).

    ``probed`` False: not a Windows snapshot (or an older cudafix); the Windows rules say so.
    """

    probed: bool = False
    system32_listed: bool = False  # True: System32's names were read; False: the standard set was assumed
    vc_runtime: Optional[bool] = None  # msvcp140.dll in System32 (the VC++ Redistributable)
    dll_failure: Optional[Dict[str, Any]] = None  # cudafix.probes.loader.windlls.DllFailure as a dict
    dll_bytes: Optional[int] = None  # torch\lib\*.dll + the nvidia wheels' DLLs, what each process maps
    commit_limit_bytes: Optional[int] = None  # GlobalMemoryStatusEx ullTotalPageFile (RAM + pagefile)
    nvcuda: Optional[str] = None  # System32\\nvcuda.dll, the driver's CUDA library
    driver_version: Optional[str] = None  # from nvcuda.dll's version resource: 32.0.15.6094 -> "560.94"
    found_via: Dict[str, str] = dataclasses.field(default_factory=_field_dict)
    unknown: Dict[str, str] = dataclasses.field(default_factory=_field_dict)
