"""Windows facts the DLL-search simulation (cudafix/probes/loader/windlls.py) needs, each with its source.

Where the Windows loader looks (https://learn.microsoft.com/en-us/windows/win32/dlls/dynamic-link-library-search-order):
- LoadLibraryExW with LOAD_LIBRARY_SEARCH_DEFAULT_DIRS | LOAD_LIBRARY_SEARCH_DLL_LOAD_DIR (0x1100,
  what torch's ``_load_dll_libraries`` passes, and what CPython >= 3.8 uses for extension modules:
  https://docs.python.org/3/library/os.html#os.add_dll_directory): already-loaded modules, the
  loaded DLL's own directory, the application directory (python.exe's), System32, and the
  directories added with AddDllDirectory / os.add_dll_directory.  Never PATH, never the cwd.
- LoadLibraryW (torch's fallback after error 126, with PATH patched): loaded modules, the
  application directory, System32, the Windows directory, the cwd, then PATH.
"""

from __future__ import annotations

LOAD_FLAGS_TORCH = 0x00001100  # torch/__init__.py _load_dll_libraries: LoadLibraryExW(dll, None, 0x00001100)
ERROR_MOD_NOT_FOUND = 126
WINERROR_126 = "[WinError 126] The specified module could not be found."

# API sets (api-ms-win-*, ext-ms-*) are resolved by the loader from the OS's schema, never searched
# as files (https://learn.microsoft.com/en-us/windows/win32/apiindex/windows-apisets).
API_SET_PREFIXES = ("api-ms-win-", "ext-ms-win-")

# DLLs every supported Windows (10/11, Server 2016+) has in System32: the ones the DLLs of torch's,
# NVIDIA's and cupy's Windows wheels import (read from their import tables, tests/test_windows_dlls.py).
SYSTEM32 = frozenset(n.lower() for n in (
    "kernel32.dll", "ntdll.dll", "advapi32.dll", "user32.dll", "gdi32.dll", "shell32.dll", "ole32.dll",
    "oleaut32.dll", "ws2_32.dll", "dbghelp.dll", "imagehlp.dll", "iphlpapi.dll", "psapi.dll", "userenv.dll",
    "wintrust.dll", "version.dll", "bcrypt.dll", "crypt32.dll", "setupapi.dll", "cfgmgr32.dll", "shlwapi.dll",
    "rpcrt4.dll", "secur32.dll", "winmm.dll", "comdlg32.dll", "dxgi.dll", "d3d12.dll", "normaliz.dll",
))

# The Visual C++ runtime: System32 only once the VC++ Redistributable is installed
# (https://learn.microsoft.com/en-us/cpp/windows/latest-supported-vc-redist); torch's own message
# when it is missing comes from torch/__init__.py.
VC_RUNTIME = frozenset(("msvcp140.dll", "msvcp140_1.dll", "msvcp140_2.dll", "msvcp140_atomic_wait.dll",
                        "msvcp140_codecvt_ids.dll", "vcruntime140.dll", "vcruntime140_1.dll", "concrt140.dll",
                        "vcomp140.dll"))
VC_REDIST_URL = "https://aka.ms/vs/17/release/vc_redist.x64.exe"  # the URL torch/__init__.py prints

# What a python.org CPython 3.8+ install ships next to python.exe (its "application directory"):
# python3X.dll, python3.dll and the two VC runtime DLLs the interpreter itself needs
# (python/cpython PC/layout/main.py copies vcruntime140*.dll; msvcp140.dll is not among them).
def python_app_dir(python_version: str):
    major, minor = python_version.split(".")[:2]
    return frozenset(("python%s%s.dll" % (major, minor), "python3.dll", "vcruntime140.dll", "vcruntime140_1.dll"))


# WinError 1455 "The paging file is too small for this operation to complete": every DataLoader
# worker process (spawned, never forked, on Windows) loads torch's and the CUDA libraries' DLLs
# again, and Windows charges what they map against the commit limit (RAM + pagefile).  Known fixes, from the public reports
# (pytorch/pytorch#59904, ultralytics/yolov3#1643, ultralytics/yolov5#11418, cszn/KAIR#127): fewer workers
# (ultralytics: --workers; DataLoader num_workers), a larger or
# system-managed pagefile.
WINERROR_1455 = "OSError: [WinError 1455] The paging file is too small for this operation to complete."
