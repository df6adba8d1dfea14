"""Which file the glibc loader would pick for each CUDA library torch needs — simulated, not loaded.

Model (glibc elf/dl-load.c `_dl_map_object`, elf/dl-deps.c, dlopen(3): https://man7.org/linux/man-pages/man3/dlopen.3.html,
https://man7.org/linux/man-pages/man8/ld.so.8.html):

0. a name already loaded (by DT_SONAME or the name it was loaded under) is reused;
1. DT_RPATH of the requesting object, then of the object that loaded it, and on up, then the
   executable's DT_RPATH — all of it only if the requester has no DT_RUNPATH;
2. LD_LIBRARY_PATH (':' and ';' separated; empty entries mean the current directory);
3. DT_RUNPATH of the requester only (not inherited by its dependencies);
4. /etc/ld.so.cache, then 5. the default dirs — both skipped for a -z nodeflib requester.
In each directory the glibc-hwcaps subdirectories are tried first, and a file of another ELF
class/machine is skipped (the loader keeps searching).  DT_NEEDED entries are processed breadth
first, the way _dl_map_object_deps does, so "already loaded" reflects the real order.
dlopen() from a library uses that library as the requester (dlopen(3)); the dlopen edges that
matter for CUDA are listed in DLOPEN_EDGES (strings seen in the real binaries).

Nothing is loaded or executed: every answer comes from ELF headers, directory entries and the
cache file, read through a loaderfs.FileSystem (which can record what it was asked), with bounds
on objects and directories.  Under a probe root (tests: a laid-out WSL tree) the machine's paths
-- default dirs, ld.so.cache and its entries, LD_LIBRARY_PATH, absolute DT_RPATH/DT_RUNPATH
entries, $LIB -- are the tree's (``fs.machine``); $ORIGIN and the executable are host paths.
"""

from __future__ import annotations

import collections
import os
import re
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Deque, Dict, Iterable, List, Mapping, Optional, Sequence, Set, Tuple

from cudafix.probes.binfmt.elf import MULTIARCH_TRIPLETS, ElfFile, default_lib_token, expand_dst, split_path_list
from cudafix.probes.loader.ldcache import LdCache
from cudafix.probes.loader.loaderfs import REAL, FileSystem
from cudafix.store import cachefile

MAX_OBJECTS = 400  # libtorch_cuda's closure is ~60 objects
MAX_SEARCH_DIRS = 256  # per lookup
HWCAPS_SUBDIRS = ("glibc-hwcaps/x86-64-v4", "glibc-hwcaps/x86-64-v3", "glibc-hwcaps/x86-64-v2")

CUDA_SONAME = re.compile(
    r"^lib(cuda|cudart|cublas|cublasLt|cudnn[A-Za-z_]*|cufft[a-z]*|curand|cusolver[A-Za-z]*|cusparse[A-Za-z]*|"
    r"nccl|nvrtc[A-Za-z_.-]*|nvJitLink|nvToolsExt|nvtx3interop|cupti|cufile[a-z_]*|nvshmem[a-z_]*|nvidia-[a-z-]+)"
    r"\.so(\.[0-9.]+)?$"
)

# dlopen edges: (soname prefix of the caller, names it dlopens).  "{major}" is the caller's soname
# major.  Each name was seen with `strings` in the real libraries of torch 2.14.1+cu130's wheels
# (tests/test_libraries.py re-checks this against the files).
DLOPEN_EDGES: Tuple[Tuple[str, Tuple[str, ...]], ...] = (
    ("libcudart.so.", ("libcuda.so.1",)),  # libcudart has no RPATH/RUNPATH: LD_LIBRARY_PATH decides
    ("libnvrtc.so.", ("libcuda.so.1",)),
    ("libcusparse.so.", ("libcuda.so.1",)),
    ("libtorch_cuda.so", ("libcuda.so.1", "libnvidia-ml.so.1")),
    (
        "libcudnn.so.",
        ("libcudnn_graph.so.{major}", "libcudnn_ops.so.{major}", "libcudnn_cnn.so.{major}", "libcudnn_adv.so.{major}"),
    ),
    (
        "libcudnn_graph.so.",
        (
            "libcudnn_engines_precompiled.so.{major}",
            "libcudnn_engines_runtime_compiled.so.{major}",
            "libcudnn_engines_tensor_ir.so.{major}",
            "libcudnn_heuristic.so.{major}",
        ),
    ),
    ("libcufft.so.", ("libnvJitLink.so.{cuda_major}", "libnvrtc.so.{cuda_major}")),
)

def is_cuda_soname(name: str) -> bool:
    return bool(CUDA_SONAME.match(os.path.basename(name)))


def default_dirs(fs: FileSystem = REAL) -> List[str]:
    """glibc's system search path on this machine: Debian/Ubuntu multiarch dirs, else lib64 dirs
    (under the probe root: the tree's distribution, its directories)."""
    machine = os.uname().machine
    triplet = MULTIARCH_TRIPLETS.get(machine)
    if triplet and (fs.isdir(fs.machine("/lib/" + triplet)) or fs.isdir(fs.machine("/usr/lib/" + triplet))):
        dirs = ["/lib/" + triplet, "/usr/lib/" + triplet, "/lib", "/usr/lib"]  # seen in LD_DEBUG=libs (Debian 12)
    elif machine in ("x86_64", "aarch64", "ppc64le", "s390x"):
        dirs = ["/lib64", "/usr/lib64"]  # RHEL/Fedora/SUSE SYSTEM_DIRS
    else:
        dirs = ["/lib", "/usr/lib"]
    return dirs if fs.root == "/" else [fs.machine(d) for d in dirs]


class _Obj:
    __slots__ = ("path", "elf", "loader", "names", "how")

    def __init__(self, path: str, elf: ElfFile, loader: Optional["_Obj"], how: str) -> None:
        self.path = path  # the path it was opened under ($ORIGIN is its dirname; symlinks not resolved)
        self.elf = elf
        self.loader = loader
        self.how = how  # "needed" | "dlopen" | "root" | "preload"
        self.names: Set[str] = {path}
        if elf.soname:
            self.names.add(elf.soname)


class LoaderSim:
    """One simulated process: an executable, an environment, and what has been loaded so far."""

    def __init__(
        self,
        env: Mapping[str, str],
        executable: Optional[str] = None,
        ld_cache: Optional[LdCache] = None,
        system_dirs: Optional[Sequence[str]] = None,
        cwd: Optional[str] = None,
        fs: FileSystem = REAL,
    ) -> None:
        self.env = env
        self.fs = fs
        self.cwd = cwd or os.getcwd()
        self.cache = ld_cache if ld_cache is not None else ld_cache_of(fs)
        self.system_dirs = [fs.machine(d) for d in system_dirs] if system_dirs is not None else default_dirs(fs)
        self._lib = default_lib_token(fs.root) if fs.root != "/" else None  # $LIB: the tree's layout
        self.notes: List[str] = []
        exe = fs.realpath(executable or sys.executable)  # the kernel gives ld.so the resolved path
        self.main_elf, reason = fs.read_elf(exe, with_sections=False)
        self.main_dir = os.path.dirname(exe)
        if self.main_elf is None:
            self.notes.append("executable %s unreadable (%s): its DT_RPATH is not modelled" % (exe, reason))
        self.ld_library_path = [
            self._entry(d, self.main_dir) for d in split_path_list(env.get("LD_LIBRARY_PATH"), ":;")
        ] if env.get("LD_LIBRARY_PATH") else []
        self.loaded: List[_Obj] = []
        self._by_name: Dict[str, _Obj] = {}
        self._by_id: Dict[Tuple[int, int], _Obj] = {}
        self.events: List[Tuple[str, Optional[_Obj], Optional[_Obj], Optional[str], Optional[str]]] = []
        # (name, requester, result, via, why-not)

    # -- search ----------------------------------------------------------------------------

    def _dir(self, d: str) -> str:
        if d:
            return d
        self.fs.note_cwd()  # the result now depends on the cwd (result cache key)
        return self.cwd  # an empty entry means the current directory

    def _entry(self, d: str, origin: str) -> str:
        """One search-path entry expanded; under a probe root a machine path is the tree's, an
        $ORIGIN one stays where the object really is."""
        if self.fs.root == "/":
            return self._dir(expand_dst(d, origin))
        out = self._dir(expand_dst(d, origin, lib=self._lib))
        return out if not d or "ORIGIN" in d else self.fs.machine(out)  # "": this process's real cwd

    def _expand_list(self, raw: Optional[str], origin_obj: _Obj) -> List[str]:
        origin = os.path.dirname(origin_obj.path)
        return [self._entry(d, origin) for d in split_path_list(raw, ":")]

    def search_steps(self, requester: Optional[_Obj]) -> List[Tuple[str, List[str]]]:
        """The ordered (via, dirs) steps the loader walks for a name requested by ``requester``."""
        steps: List[Tuple[str, List[str]]] = []
        if requester is None or not requester.elf.runpath:
            chain: List[str] = []
            seen: Set[int] = set()
            obj = requester
            while obj is not None and id(obj) not in seen:
                seen.add(id(obj))
                if obj.elf.rpath and not obj.elf.runpath:
                    chain += self._expand_list(obj.elf.rpath, obj)
                obj = obj.loader
            if chain:
                steps.append(("DT_RPATH", chain))
            if self.main_elf is not None and self.main_elf.rpath and not self.main_elf.runpath:
                origin = self.main_dir
                steps.append(("DT_RPATH", [self._entry(d, origin) for d in split_path_list(self.main_elf.rpath)]))
        if self.ld_library_path:
            steps.append(("LD_LIBRARY_PATH", list(self.ld_library_path)))
        if requester is not None and requester.elf.runpath:
            steps.append(("DT_RUNPATH", self._expand_list(requester.elf.runpath, requester)))
        return steps

    def _candidates(self, d: str, name: str) -> Iterable[str]:
        for sub in HWCAPS_SUBDIRS:
            yield os.path.join(d, sub, name)
        yield os.path.join(d, name)

    def _try(self, path: str, want: ElfFile) -> Tuple[Optional[ElfFile], Optional[str]]:
        if not self.fs.exists(path):
            return None, None
        elf, reason = self.fs.read_elf(path, with_sections=False)
        if elf is None:
            return None, reason
        if not elf.compatible_with(want):
            return None, "wrong ELF class/machine"
        return elf, None

    def find(self, name: str, requester: Optional[_Obj], want: ElfFile) -> Tuple[Optional[str], Optional[ElfFile], str]:
        """(path, elf, via) the loader would open for ``name``; (None, None, reason) if none."""
        if "/" in name:
            path = expand_dst(name, os.path.dirname(requester.path) if requester else self.main_dir)
            elf, reason = self._try(path, want)
            return (path, elf, "path") if elf else (None, None, reason or "no such file")
        ndirs = 0
        for via, dirs in self.search_steps(requester):
            for d in dirs:
                ndirs += 1
                if ndirs > MAX_SEARCH_DIRS:
                    return None, None, "search stopped after %d directories" % MAX_SEARCH_DIRS
                for cand in self._candidates(d, name):
                    elf, _ = self._try(cand, want)
                    if elf is not None:
                        return cand, elf, via
        nodeflib = requester is not None and requester.elf.nodeflib
        if not nodeflib:
            for cand in self.cache.lookup(name):
                elf, _ = self._try(cand, want)
                if elf is not None:
                    return cand, elf, "ld.so.cache"
            for d in self.system_dirs:
                for cand in self._candidates(d, name):
                    elf, _ = self._try(cand, want)
                    if elf is not None:
                        return cand, elf, "default dirs"
        return None, None, "not found"

    # -- loading ---------------------------------------------------------------------------

    def _lookup_loaded(self, name: str) -> Optional[_Obj]:
        return self._by_name.get(name)

    def _register(self, path: str, elf: ElfFile, loader: Optional[_Obj], how: str, name: Optional[str]) -> _Obj:
        fid = self.fs.file_id(path)
        if fid is not None and fid in self._by_id:  # same file under another name: same object
            obj = self._by_id[fid]
        else:
            obj = _Obj(path, elf, loader, how)
            self.loaded.append(obj)
            if fid is not None:
                self._by_id[fid] = obj
        if name:
            obj.names.add(name)
        for n in obj.names:
            self._by_name.setdefault(n, obj)
        return obj

    def load(self, name_or_path: str, requester: Optional[_Obj] = None, how: str = "dlopen") -> Optional[_Obj]:
        """dlopen(name) from ``requester`` (None: the executable); maps dependencies breadth first."""
        want = self._want()
        hit = self._lookup_loaded(name_or_path)
        if hit is not None:
            self.events.append((name_or_path, requester, hit, "loaded", None))
            return hit
        path, elf, via = self.find(name_or_path, requester, want)
        if path is None or elf is None:
            self.events.append((name_or_path, requester, None, None, via))
            return None
        root = self._register(path, elf, requester, how, name_or_path)
        self.events.append((name_or_path, requester, root, via, None))
        self._map_deps(root)
        return root

    def _want(self) -> ElfFile:
        if self.main_elf is not None:
            return self.main_elf
        return ElfFile(path="", elf_class=64 if sys.maxsize > 2**32 else 32, little_endian=sys.byteorder == "little", machine=62, etype=2, file_size=0)

    def _map_deps(self, root: _Obj) -> None:
        want = self._want()
        queue: Deque[_Obj] = collections.deque([root])
        done: Set[int] = set()
        while queue:
            obj = queue.popleft()
            if id(obj) in done:
                continue
            done.add(id(obj))
            for name in obj.elf.needed:
                hit = self._lookup_loaded(name)
                if hit is not None:
                    self.events.append((name, obj, hit, "loaded", None))
                    continue
                if len(self.loaded) >= MAX_OBJECTS:
                    self.notes.append("stopped after %d objects" % MAX_OBJECTS)
                    return
                path, elf, via = self.find(name, obj, want)
                if path is None or elf is None:
                    self.events.append((name, obj, None, None, via))
                    continue
                new = self._register(path, elf, obj, "needed", name)
                self.events.append((name, obj, new, via, None))
                queue.append(new)

    def preload(self, paths: Sequence[str]) -> None:
        """Model libraries already in the process (LD_PRELOAD, torch's or cudafix's preloads)."""
        for p in paths:
            self.load(p, None, how="preload")


def _soname_major(soname: str) -> str:
    m = re.search(r"\.so\.(\d+)", soname)
    return m.group(1) if m else ""


def dlopen_names(obj_soname: str, cuda_major: str) -> List[str]:
    out: List[str] = []
    for prefix, names in DLOPEN_EDGES:
        if obj_soname.startswith(prefix):
            major = _soname_major(obj_soname)
            for n in names:
                if ("{cuda_major}" in n and not cuda_major) or ("{major}" in n and not major):
                    continue
                out.append(n.format(major=major, cuda_major=cuda_major))
    return out


def simulate(
    root: str,
    env: Mapping[str, str],
    executable: Optional[str] = None,
    ld_cache: Optional[LdCache] = None,
    preloaded: Sequence[str] = (),
    follow_dlopen: bool = True,
    fs: FileSystem = REAL,
    lead: Sequence[str] = (),
) -> LoaderSim:
    """Load ``root`` by absolute path (as ctypes.CDLL does) and follow the CUDA dlopen edges;
    ``lead``: what the program loads by path before it, in order (torch/__init__.py's own loads)."""
    sim = LoaderSim(env, executable=executable, ld_cache=ld_cache, fs=fs)
    sim.preload(preloaded)
    for p in lead:
        sim.load(p, None, how="torch")
    sim.load(root, None, how="root")
    if follow_dlopen:
        cuda_major = ""
        for o in sim.loaded:
            if (o.elf.soname or "").startswith("libcudart.so."):
                cuda_major = _soname_major(o.elf.soname or "")
        i = 0
        while i < len(sim.loaded) and len(sim.loaded) < MAX_OBJECTS:  # dlopened libs may dlopen more
            obj = sim.loaded[i]
            i += 1
            for name in dlopen_names(obj.elf.soname or os.path.basename(obj.path), cuda_major):
                sim.load(name, obj, how="dlopen")
    return sim


_LD_CACHE_MEMO: Dict[str, LdCache] = {}


def ld_cache_of(fs: FileSystem = REAL) -> LdCache:
    """/etc/ld.so.cache (the probe root's) parsed once per process while it keeps its stat
    (`status` builds three simulations: libcuda, compat libcuda, torch's libraries); a recording
    fs reads it itself."""
    if fs.recording:
        return fs.read_ld_cache()
    path = fs.ld_cache_path()
    key = repr(cachefile.stat_sig(path)) if fs.root == "/" else repr((path, fs.keep, cachefile.stat_sig(path)))
    hit = _LD_CACHE_MEMO.get(key)
    if hit is None:
        _LD_CACHE_MEMO.clear()
        hit = _LD_CACHE_MEMO[key] = fs.read_ld_cache()
    return hit
