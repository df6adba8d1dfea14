"""torch/__init__.py's CUDA fallback, read from the installed file (each release by its own text).

Three generations (``Preloader.style``): "cublas-cudnn" (1.13: only for ``libcublas.so.11``),
"list" (2.0 and later: a table of (folder, glob) pairs, ValueError when one is not found; 2.9 adds
nvrtc and nvJitLink after a successful load, 2.14 the whole table best effort) and none.  How the
simulation uses it: cudafix/probes/loader/torchload.py.
"""

from __future__ import annotations

import glob
import os
import re

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable, List, Optional, Sequence, Tuple

    from cudafix.probes.loader.loaderfs import FileSystem

# a (folder, glob) pair of the table: {"cublas": "libcublas.so.*[0-9]", ...} or ("cublas", "libcublas...")
PAIR = re.compile(r"""["'](\w+)["']\s*[:,]\s*["'](lib[\w.*\[\]\-]+)["']""")


class Preloader:
    """torch/__init__.py's CUDA fallback, as read from the installed file."""

    def __init__(self) -> None:
        self.style = ""  # "" (none) | "cublas-cudnn" (1.13) | "list"
        self.on_error: List[Tuple[str, str, bool]] = []  # (folder, glob, required) after a failed load
        self.on_success: List[Tuple[str, str, bool]] = []  # best effort after a load that mapped libcudart
        self.wide_search = False  # _get_cuda_dep_paths: also nvidia/cuNN/lib and <folder>/lib, no nvidia/ check

    def describe(self) -> str:
        if not self.style:
            return "no CUDA preloader"
        return "%s; %d libraries after a failed load, %d best effort after a successful one%s" % (
            self.style, len(self.on_error), len(self.on_success), "; nvidia/cuNN searched" if self.wide_search else "")


def read_preloader(init_text: str) -> Preloader:
    out = Preloader()
    start = init_text.find("def _get_cuda_dep_paths")
    if start < 0:
        start = init_text.find("def _preload_cuda_deps")
    if start < 0:
        return out
    end = init_text.find("USE_RTLD_GLOBAL_WITH_LIBTORCH", start)
    body = init_text[start:end if end > start else len(init_text)]
    if "cublas_path = os.path.join(nvidia_path" in body:
        out.style = "cublas-cudnn"
        return out
    out.style = "list"
    out.wide_search = "_get_cuda_dep_paths" in body
    table: List[Tuple[str, str, bool]] = []
    calls: List[Tuple[str, str, bool]] = []
    for m in PAIR.finditer(body):
        line = body[body.rfind("\n", 0, m.start()) + 1:m.start()]
        if "_preload_cuda_lib(" in line:  # a separate best-effort call (nvtx, 2.14)
            table.append((m.group(1), m.group(2), False))
        elif "_preload_cuda_deps(" in line:  # a call on the success path (2.9: nvrtc, nvjitlink)
            calls.append((m.group(1), m.group(2), True))
        else:
            table.append((m.group(1), m.group(2), True))
    out.on_error = table
    if "_preload_cuda_deps(required=False)" in body:  # 2.14: the whole table, best effort, on success too
        out.on_success = [(f, p, False) for f, p, _r in table]
    else:
        out.on_success = calls
    return out


def candidates(fs: FileSystem, path: str, folder: str, pattern: str, wide: bool, cuda_major: str) -> List[str]:
    """torch's own search in one sys.path entry (``_get_cuda_dep_paths`` / ``_preload_cuda_deps``)."""
    if not wide and not fs.exists(os.path.join(path, "nvidia")):
        return []
    dirs = [os.path.join(path, "nvidia", folder, "lib")]
    if wide and cuda_major:
        dirs.append(os.path.join(path, "nvidia", "cu" + cuda_major, "lib"))
    if wide:
        dirs.append(os.path.join(path, folder, "lib"))
    out: List[str] = []
    for d in dirs:
        # a stat before the glob: most sys.path entries have no such directory, and a glob of one
        # costs far more than a stat (what a recording FileSystem keeps is the same: the directory)
        if fs.isdir(d):
            out += fs.glob(os.path.join(glob.escape(d), pattern))
    return out


MAX_INIT_BYTES = 1 << 20


def init_text(fs: FileSystem, torch_dir: str) -> str:
    """torch/__init__.py as installed ('' when it cannot be read)."""
    try:
        with fs.open_text(os.path.join(torch_dir, "__init__.py")) as fh:
            return fh.read(MAX_INIT_BYTES)
    except (OSError, ValueError):
        return ""


def cuda_major(fs: FileSystem, torch_dir: str) -> str:
    """The CUDA major torch/version.py names ('' for a CPU build or an unreadable file)."""
    try:
        with fs.open_text(os.path.join(torch_dir, "version.py")) as fh:
            m = re.search(r"^cuda\s*(?::[^=]*)?=\s*['\"](\d+)\.", fh.read(65536), re.M)
    except (OSError, ValueError):
        return ""
    return m.group(1) if m else ""


def first_candidate(fs: FileSystem, sys_path: Sequence[str], folder: str, pattern: str, wide: bool, major: str) -> Optional[str]:
    """The file torch's ``_preload_cuda_lib`` loads: the first hit in sys.path order."""
    for p in sys_path:
        hits = candidates(fs, p, folder, pattern, wide, major)
        if hits:
            return hits[0]
    return None


def success_preloads(fs: FileSystem, torch_dir: str, sys_path: Sequence[str], pre: Optional[Preloader] = None,
                     major: Optional[str] = None, find: Optional[Callable[[str, str], Optional[str]]] = None) -> List[str]:
    """The libraries torch/__init__.py loads by absolute path after libtorch_global_deps.so and
    before ``torch._C`` (2.9: nvrtc and nvJitLink; 2.14: its whole table, best effort), in its
    order: a soname loaded this way wins every later DT_NEEDED lookup, whatever LD_LIBRARY_PATH
    says (torch/__init__.py ``_load_global_deps``, pytorch/pytorch#138460).  ``pre`` / ``major``:
    torch's preloader and CUDA major where the caller has read them already; ``find(folder,
    pattern)``: the caller's :func:`first_candidate` for them."""
    pre = read_preloader(init_text(fs, torch_dir)) if pre is None else pre
    major = cuda_major(fs, torch_dir) if major is None else major
    out: List[str] = []
    for folder, pattern, required in pre.on_success:
        path = find(folder, pattern) if find else first_candidate(fs, sys_path, folder, pattern, pre.wide_search, major)
        if path is None:
            if required:  # _preload_cuda_deps raises; torch swallows it and stops preloading
                break
            continue
        out.append(path)
    return out
