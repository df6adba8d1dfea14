"""How torch's Windows ``__init__.py`` finds its DLLs, simulated from the PE import tables
(cudafix.probes.binfmt.pe), so WinError 126 is predicted before ``import torch`` (docs/windows.md).

torch 2.13.0's ``_load_dll_libraries`` (read from its win_amd64 wheel): the search directories are
torch\\lib, <exec_prefix>\\Library\\bin (conda), the base env's Library\\bin, <userbase>\\Library\\bin,
<exec_prefix>\\bin that exist, then NvToolsExt's bin\\x64 (unless nvToolsExt64_1.dll is already in
one of them) and, for a CUDA build without cudart64*.dll in them, %CUDA_PATH_Vx_y%\\bin; each is
passed to os.add_dll_directory.  Every torch\\lib\\*.dll is then loaded with
LoadLibraryExW(dll, NULL, 0x1100); on error 126 it retries LoadLibraryW with those directories
put first on PATH; a second failure raises ``OSError: [WinError 126] ... Error loading "<dll>" or
one of its dependencies.``  Then ``torch._C`` (a .pyd) is imported: LoadLibraryExW with the
same flags (CPython >= 3.8).  Search orders: cudafix.knowledge.windows.

The tree is a directory on this machine (an unpacked wheel, or a Windows snapshot's listing);
System32 and python.exe's directory are given as sets of names.  Windows file names are
case-insensitive: everything is compared lower-cased.  Delay-loaded DLLs are not loaded at
import time (the first call loads them), so they never fail ``import torch``.
"""

from __future__ import annotations

import dataclasses
import glob
import os
from typing import Dict, FrozenSet, List, Mapping, Optional, Sequence, Tuple

from cudafix.knowledge import windows as K
from cudafix.probes.binfmt.pe import read_pe

MAX_DEPTH = 64


@dataclasses.dataclass
class DllFailure:
    loading: str  # the DLL torch was loading (its error names it)
    missing: str  # the first dependency no search found
    chain: List[str]  # loading -> ... -> the DLL that imports ``missing``
    error: str  # the message the user sees

    def to_dict(self) -> Dict[str, object]:
        return dataclasses.asdict(self)


def _index(dirs: Sequence[str]) -> List[Dict[str, str]]:
    """Per directory: lower-cased name -> path (what a case-insensitive lookup finds)."""
    out = []
    for d in dirs:
        names: Dict[str, str] = {}
        try:
            for n in sorted(os.listdir(d)):
                names.setdefault(n.lower(), os.path.join(d, n))
        except OSError:
            pass
        out.append(names)
    return out


class WinLoader:
    """The modules loaded so far in one simulated python.exe process."""

    def __init__(self, system32: FrozenSet[str], app_dir: FrozenSet[str], user_dirs: Sequence[str]) -> None:
        self.system32 = system32
        self.app_dir = app_dir
        self.user_dirs = _index(user_dirs)
        self.loaded: Dict[str, str] = {}  # lower name -> path ("<system>" for OS / app-dir DLLs)

    def _os_has(self, name: str) -> bool:
        return name.startswith(K.API_SET_PREFIXES) or name in self.system32 or name in self.app_dir

    def _find(self, name: str, own_dir: Dict[str, str], path_dirs: Optional[List[Dict[str, str]]]) -> Optional[str]:
        if name in self.loaded:
            return self.loaded[name]
        if path_dirs is None:  # LoadLibraryExW 0x1100: DLL dir, app dir, System32, user dirs
            if name in own_dir:
                return own_dir[name]
            if self._os_has(name):
                return "<system>"
            for d in self.user_dirs:
                if name in d:
                    return d[name]
            return None
        if self._os_has(name):  # LoadLibraryW: app dir, System32, Windows dir, cwd, PATH
            return "<system>"
        for d in path_dirs:
            if name in d:
                return d[name]
        return None

    def load(self, path: str, path_dirs: Optional[List[Dict[str, str]]] = None) -> Optional[Tuple[str, List[str]]]:
        """Load ``path`` and its import closure; (missing name, chain) on the first failure, else None.

        On failure nothing stays loaded (the loader unmaps a graph that did not resolve)."""
        own = _index([os.path.dirname(path)])[0]
        before = dict(self.loaded)
        todo: List[Tuple[str, List[str]]] = [(path, [os.path.basename(path)])]
        while todo:
            p, chain = todo.pop(0)
            key = os.path.basename(p).lower()
            if key in self.loaded:
                continue
            self.loaded[key] = p
            pe, _why = read_pe(p)
            for imp in (pe.imports if pe is not None else []):
                name = imp.lower()
                hit = self._find(name, own, path_dirs)
                if hit is None:
                    self.loaded = before
                    return imp, chain
                if hit != "<system>" and name not in self.loaded and len(chain) < MAX_DEPTH:
                    todo.append((hit, chain + [os.path.basename(hit)]))
                elif hit == "<system>":
                    self.loaded.setdefault(name, "<system>")
        return None


def torch_dll_dirs(torch_dir: str, exec_prefix: str, base_exec_prefix: str, userbase: str,
                   env: Mapping[str, str], cuda: Optional[str]) -> List[str]:
    """The directories torch passes to os.add_dll_directory, in its order (see the module doc)."""
    cand = [os.path.join(torch_dir, "lib"), os.path.join(exec_prefix, "Library", "bin"),
            os.path.join(base_exec_prefix, "Library", "bin") if base_exec_prefix != exec_prefix else "",
            os.path.join(userbase, "Library", "bin"), os.path.join(exec_prefix, "bin")]
    dirs = [d for d in cand if d and os.path.isdir(d)]
    extra = []
    if not any(os.path.exists(os.path.join(d, "nvToolsExt64_1.dll")) for d in dirs):
        pfiles = env.get("ProgramFiles", r"C:\Program Files")
        extra.append(os.path.join(env.get("NVTOOLSEXT_PATH", os.path.join(pfiles, "NVIDIA Corporation", "NvToolsExt")), "bin", "x64"))
    if cuda and all(not glob.glob(os.path.join(glob.escape(d), "cudart64*.dll")) for d in dirs):
        pfiles = env.get("ProgramFiles", r"C:\Program Files")
        default = os.path.join(pfiles, "NVIDIA GPU Computing Toolkit", "CUDA", "v" + cuda)
        extra.append(os.path.join(env.get("CUDA_PATH_V" + cuda.replace(".", "_"), default), "bin"))
    return dirs + [d for d in extra if os.path.isdir(d)]


def simulate_import(torch_dir: str, python_version: str, system32: FrozenSet[str] = K.SYSTEM32 | K.VC_RUNTIME,
                    exec_prefix: str = "", base_exec_prefix: str = "", userbase: str = "",
                    env: Optional[Mapping[str, str]] = None, cuda: Optional[str] = None) -> Optional[DllFailure]:
    """The WinError 126 ``import torch`` would raise in this tree, or None when every DLL resolves."""
    env = env or {}
    dirs = torch_dll_dirs(torch_dir, exec_prefix or torch_dir, base_exec_prefix or exec_prefix or torch_dir,
                          userbase or torch_dir, env, cuda)
    ld = WinLoader(frozenset(n.lower() for n in system32), K.python_app_dir(python_version), dirs)
    path_dirs = _index(dirs + [p for p in (env.get("PATH") or "").split(";") if p])
    lib = os.path.join(torch_dir, "lib")
    for dll in sorted(glob.glob(os.path.join(glob.escape(lib), "*.dll")), key=lambda p: os.path.basename(p).lower()):
        if ld.load(dll) is None:
            continue
        failed = ld.load(dll, path_dirs)  # torch's retry: LoadLibraryW with its dirs first on PATH
        if failed is not None:
            win = "%s\\lib\\%s" % (torch_dir.replace("/", "\\"), os.path.basename(dll))
            return DllFailure(os.path.basename(dll), failed[0], failed[1],
                              'OSError: %s Error loading "%s" or one of its dependencies.' % (K.WINERROR_126, win))
    for pyd in sorted(glob.glob(os.path.join(glob.escape(torch_dir), "_C*.pyd"))):
        failed = ld.load(pyd)
        if failed is not None:
            return DllFailure(os.path.basename(pyd), failed[0], failed[1],
                              "ImportError: DLL load failed while importing _C: The specified module could not be found.")
    return None
