"""Which file the glibc loader would pick for each CUDA library torch needs — simulated, not loaded.

Model (glibc elf/dl-load.c `_dl_map_object`, elf/dl-deps.c, dlopen(3); facts-driver.md §6):

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
cache file, with bounds on objects and directories.
"""

from __future__ import annotations

import builtins as _builtins
import collections
import dataclasses
import glob
import glob as _glob  # the real modules: `os` and `glob` are stood in for while a run is recorded
import json
import os
import os as _os
import re
import stat as _stat
import sys
import time
from typing import Deque, Dict, Iterable, List, Mapping, Optional, Sequence, Set, Tuple

from cudafix import __version__
from cudafix.store import cachefile
from cudafix.probes.elf import ElfFile, expand_dst, read_elf, split_path_list
from cudafix.probes.ldcache import LD_SO_CACHE, LdCache, read_ld_cache
from cudafix.model.snapshot import LibraryInfo, LibraryResolution

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

ROOT_CANDIDATES = ("lib/libtorch_cuda.so", "lib/libtorch_global_deps.so")


def is_cuda_soname(name: str) -> bool:
    return bool(CUDA_SONAME.match(os.path.basename(name)))


def default_dirs() -> List[str]:
    """glibc's system search path on this machine: Debian/Ubuntu multiarch dirs, else lib64 dirs."""
    machine = os.uname().machine
    triplet = {"x86_64": "x86_64-linux-gnu", "aarch64": "aarch64-linux-gnu", "ppc64le": "powerpc64le-linux-gnu"}.get(machine)
    if triplet and (os.path.isdir("/lib/" + triplet) or os.path.isdir("/usr/lib/" + triplet)):
        return ["/lib/" + triplet, "/usr/lib/" + triplet, "/lib", "/usr/lib"]  # seen in LD_DEBUG=libs (Debian 12)
    if machine in ("x86_64", "aarch64", "ppc64le", "s390x"):
        return ["/lib64", "/usr/lib64"]  # RHEL/Fedora/SUSE SYSTEM_DIRS
    return ["/lib", "/usr/lib"]


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
    ) -> None:
        self.env = env
        self.cwd = cwd or os.getcwd()
        self.cache = ld_cache if ld_cache is not None else _ld_cache()
        self.system_dirs = list(system_dirs) if system_dirs is not None else default_dirs()
        self.notes: List[str] = []
        exe = os.path.realpath(executable or sys.executable)  # the kernel gives ld.so the resolved path
        self.main_elf, reason = read_elf(exe, with_sections=False)
        self.main_dir = os.path.dirname(exe)
        if self.main_elf is None:
            self.notes.append("executable %s unreadable (%s): its DT_RPATH is not modelled" % (exe, reason))
        self.ld_library_path = [
            self._dir(expand_dst(d, self.main_dir)) for d in split_path_list(env.get("LD_LIBRARY_PATH"), ":;")
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
        if _RECORDER is not None:  # the result now depends on the cwd (result cache key)
            _RECORDER.cwd = self.cwd
        return self.cwd  # an empty entry means the current directory

    def _expand_list(self, raw: Optional[str], origin_obj: _Obj) -> List[str]:
        origin = os.path.dirname(origin_obj.path)
        return [self._dir(expand_dst(d, origin)) for d in split_path_list(raw, ":")]

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
                steps.append(("DT_RPATH", [self._dir(expand_dst(d, origin)) for d in split_path_list(self.main_elf.rpath)]))
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
        if not os.path.exists(path):
            return None, None
        elf, reason = read_elf(path, with_sections=False)
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
        try:
            st = os.stat(path)
            fid: Optional[Tuple[int, int]] = (st.st_dev, st.st_ino)
        except OSError:
            fid = None
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


# -- the probe -------------------------------------------------------------------------------


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
) -> LoaderSim:
    """Load ``root`` by absolute path (as ctypes.CDLL does) and follow the CUDA dlopen edges."""
    sim = LoaderSim(env, executable=executable, ld_cache=ld_cache)
    sim.preload(preloaded)
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


def file_version(path: str) -> Optional[str]:
    """"13.0.88" from libnvJitLink.so.13.0.88 (after resolving symlinks); None if only a major."""
    for cand in (os.path.basename(os.path.realpath(path)), os.path.basename(path)):
        m = re.search(r"\.so\.(\d+(?:\.\d+)+)$", cand)
        if m:
            return m.group(1)
    return None


_RECORD_CACHE: Dict[str, List[Tuple[str, Set[str]]]] = {}


def _site_records(site: str) -> List[Tuple[str, Set[str]]]:
    """(dist-info dir name, files) for nvidia-* wheels in one site-packages (RECORD is small)."""
    if site in _RECORD_CACHE:
        return _RECORD_CACHE[site]
    out: List[Tuple[str, Set[str]]] = []
    for info in sorted(glob.glob(os.path.join(glob.escape(site), "nvidia_*.dist-info")))[:64]:
        files: Set[str] = set()
        try:
            with open(os.path.join(info, "RECORD"), encoding="utf-8", errors="replace") as fh:
                for line in fh.read(4 << 20).splitlines():
                    files.add(line.split(",", 1)[0])
        except OSError:
            continue
        out.append((os.path.basename(info), files))
    _RECORD_CACHE[site] = out
    return out


def wheel_version(path: str) -> Optional[Tuple[str, str]]:
    """(version, dist-info name) of the nvidia-* wheel whose RECORD lists ``path``."""
    real = os.path.realpath(path)
    parts = real.split(os.sep)
    if "nvidia" not in parts:
        return None
    i = len(parts) - 1 - parts[::-1].index("nvidia")
    site = os.sep.join(parts[:i])
    rel = "/".join(parts[i:])
    for info, files in _site_records(site):
        if rel in files:
            m = re.match(r"^[A-Za-z0-9_.]+?-([^-]+)\.dist-info$", info)
            if m:
                return m.group(1), info
    return None


def version_of(path: Optional[str], notes: Dict[str, str]) -> Optional[str]:
    if not path:
        return None
    v = file_version(path)
    if v:
        return v
    wv = wheel_version(path)
    if wv:
        notes[path] = "version from RECORD of %s" % wv[1]
        return wv[0]
    return None


def _copies(soname: str, sim: LoaderSim) -> List[str]:
    """Every file for ``soname`` on LD_LIBRARY_PATH, in ld.so.cache and in the default dirs."""
    out: List[str] = []
    for d in (list(sim.ld_library_path) + list(sim.system_dirs))[:MAX_SEARCH_DIRS]:
        p = os.path.join(d, soname)
        if os.path.exists(p):
            out.append(p)
    out += [p for p in sim.cache.lookup(soname) if os.path.exists(p)]
    return out


def _first_resolutions(sim: LoaderSim) -> "collections.OrderedDict[str, Tuple[_Obj, Optional[_Obj], Optional[str], str, Optional[str]]]":
    """soname -> (requester, object, via, how, why) for the first request of each CUDA soname."""
    out: "collections.OrderedDict[str, Tuple[_Obj, Optional[_Obj], Optional[str], str, Optional[str]]]" = collections.OrderedDict()
    for name, req, res, via, why in sim.events:
        base = os.path.basename(name)
        if not is_cuda_soname(base) or base in out or req is None:
            continue
        how = "needed" if name in req.elf.needed else "dlopen"
        out[base] = (req, res, via, how, why)
    return out


def find_root(torch_package_dir: str) -> Optional[str]:
    for rel in ROOT_CANDIDATES:
        p = os.path.join(torch_package_dir, rel)
        if os.path.isfile(p):
            return p
    found = sorted(glob.glob(os.path.join(glob.escape(torch_package_dir), "_C*.so")))
    return found[0] if found else None


def probe_libraries(
    torch_package_dir: Optional[str],
    env: Mapping[str, str],
    executable: Optional[str] = None,
    preloaded: Sequence[str] = (),
    cache_dir: Optional[str] = None,
) -> LibraryInfo:
    """Resolve the CUDA libraries torch would load in ``env``; never raises.

    ``torch_package_dir`` None (no torch found): nothing to resolve, said in ``unknown``.
    ``preloaded``: absolute paths already in the process (e.g. the startup hook's preloads).
    ``cache_dir``: where to keep the result cache (None: no cache; see "result cache" below).
    """
    if not torch_package_dir:
        return LibraryInfo(unknown={"resolutions": "no torch installation to resolve libraries for"})
    try:
        if cache_dir is not None:
            return _probe_cached(torch_package_dir, env, executable, preloaded, cache_dir)
        return _probe(torch_package_dir, env, executable, preloaded)
    except Exception as exc:  # the probe contract: unknown with a reason
        return LibraryInfo(unknown={"resolutions": "library simulation failed: %s: %s" % (type(exc).__name__, exc)})


def _probe(torch_package_dir: str, env: Mapping[str, str], executable: Optional[str], preloaded: Sequence[str]) -> LibraryInfo:
    info = LibraryInfo(ld_library_path=split_path_list(env.get("LD_LIBRARY_PATH"), ":;") if env.get("LD_LIBRARY_PATH") else [])
    root = find_root(torch_package_dir)
    if root is None:
        info.unknown["resolutions"] = "no libtorch_cuda.so, libtorch_global_deps.so or _C*.so under %s" % torch_package_dir
        return info
    cache = _ld_cache()
    if cache.unknown:
        info.unknown["ld.so.cache"] = cache.unknown
    else:
        info.found_via["ld.so.cache"] = cache.found_via
    info.found_via["resolutions"] = "glibc search order simulated from the ELF headers, starting at %s" % root
    sim = simulate(root, env, executable=executable, ld_cache=cache, preloaded=preloaded)
    if not any(o.path == root for o in sim.loaded):
        _, reason = read_elf(root, with_sections=False)
        info.unknown["resolutions"] = "%s: %s" % (root, reason or "could not be mapped")
        return info
    base_env = {k: v for k, v in env.items() if k != "LD_LIBRARY_PATH"}
    expected_sim = simulate(root, base_env, executable=executable, ld_cache=cache, preloaded=preloaded) if info.ld_library_path else sim
    expected = _first_resolutions(expected_sim)
    version_notes: Dict[str, str] = {}
    absent: List[str] = []
    for soname, (req, res, via, how, why) in _first_resolutions(sim).items():
        exp0 = expected.get(soname)
        if how == "dlopen" and res is None and (exp0 is None or exp0[1] is None) and not _copies(soname, sim):
            # A dlopen target that exists nowhere: the caller probes optional libraries (cuDNN
            # tries engine libraries a given release may not ship) or it is the driver's libcuda,
            # which the driver probe and the no-driver rule report.  Not a loader question.
            absent.append(soname)
            continue
        r = LibraryResolution(soname=soname, requested_by=req.path, how=how)
        if res is not None:
            r.resolved = os.path.realpath(res.path)  # what /proc/self/maps would show
            r.resolved_via = via
            r.resolved_version = version_of(res.path, version_notes)
        else:
            if why and why.startswith("search stopped"):
                r.unknown = "%s: undecided, %s" % (soname, why)
            else:
                r.unknown = "%s not found by the loader (%s)" % (soname, why or "not found")
        exp = expected.get(soname)
        if exp is not None and exp[1] is not None:
            r.expected = os.path.realpath(exp[1].path)
            r.expected_version = version_of(r.expected, version_notes)
        seen = {os.path.realpath(p) for p in (r.resolved, r.expected) if p}
        for p in _copies(soname, sim):
            rp = os.path.realpath(p)
            if rp not in seen:
                seen.add(rp)
                r.others.append(rp)  # the real file (its name carries the version: libcuda.so.580.95.05)
        info.resolutions.append(r)
    for path, note in version_notes.items():
        info.found_via["version " + path] = note
    if absent:
        info.found_via["dlopen targets absent"] = ", ".join(sorted(absent))
    if sim.notes:
        info.unknown["simulation"] = "; ".join(sim.notes)
    return info


# -- result cache ----------------------------------------------------------------------------
#
# The simulation stats ~3,000 candidate paths (70-100 ms); its answer changes only when the
# inputs below change, so `status` keeps it in cache_dir (cudafix.store.cachefile's rules:
# owned JSON file, atomic write, anything odd ignored).
#
# file  versioned by the format, cudafix's version and the stat of the modules that implement
#       the simulation (other code: the whole file is ignored and rewritten);
# key   everything the probe takes besides the filesystem: the torch dir, the executable, the
#       preloaded list, every LD_* variable (the simulation reads LD_LIBRARY_PATH), the machine;
# deps  every filesystem fact the cold run used, recorded while it ran: each path it tested,
#       stat'ed, resolved, parsed or opened (stat_sig, or "absent" plus the stat of the
#       nearest existing parent directory, whose mtime changes when an entry appears there;
#       a dangling symlink is kept itself: its target may appear elsewhere), each directory
#       it globbed, /etc/ld.so.cache, the dirs default_lib_token() looks at, and the cwd when
#       an empty search-path entry made the cwd a search directory.
# A hit needs the same key and every dep re-stat'ing the same; else the probe runs again.
# A result is not stored while an input is younger than cachefile.RACY_NS (coarse mtimes).
#
# Recording works by standing in for this module's `os`, `glob`, `open`, `read_elf` and
# `read_ld_cache` for the duration of one cold run, so the resolution code above is the same
# code with or without a cache.  Known limit: a symlink chain re-pointed to another hard link
# of the very same inode keeps every stat equal (the realpath string could then be stale).

LIB_CACHE_FILE = "libraries-cache.json"
LIB_CACHE_VERSION = 1
LIB_CACHE_MAX_ENTRIES = 8

_RECORDER = None  # type: Optional[_Recorder]


class _Recorder:
    """path -> stat_sig (None: absent) of everything one simulation looked at."""

    def __init__(self) -> None:
        self.sigs: Dict[str, Optional[List[int]]] = {}
        self.dangling: Set[str] = set()  # absent but present as a symlink: its target may appear
        self.cwd: Optional[str] = None

    def sig(self, path: str) -> Optional[List[int]]:
        path = _os.fspath(path)
        if path in self.sigs:
            return self.sigs[path]
        sig = self._stat(path)
        if not _os.path.isabs(path):
            self.cwd = _os.getcwd()
        if sig is None:  # absent: it can appear only by an entry added to an existing ancestor
            d = _os.path.dirname(_os.path.abspath(path))
            while d not in self.sigs:
                if self._stat(d) is not None or d == _os.path.dirname(d):
                    break
                d = _os.path.dirname(d)
        return sig

    def _stat(self, path: str) -> Optional[List[int]]:
        sig = self.sigs[path] = cachefile.stat_sig(path)
        if sig is None and _os.path.lexists(path):
            self.dangling.add(path)
        return sig

    def deps(self) -> List[list]:
        """What a hit re-stats: every existing path, and the absent ones a directory can't vouch for."""
        return [[p, s] for p, s in self.sigs.items() if s is not None or p in self.dangling]


class _RecordingPath:
    """os.path for this module during a recorded run: answers from (and records) one stat per path."""

    def __init__(self, rec: _Recorder) -> None:
        self._rec = rec

    def __getattr__(self, name: str):  # join, basename, ... are pure
        return getattr(_os.path, name)

    def exists(self, path: str) -> bool:
        return self._rec.sig(path) is not None

    def isfile(self, path: str) -> bool:
        sig = self._rec.sig(path)
        return sig is not None and _stat.S_ISREG(sig[0])

    def isdir(self, path: str) -> bool:
        sig = self._rec.sig(path)
        return sig is not None and _stat.S_ISDIR(sig[0])

    def realpath(self, path: str, *args, **kwargs) -> str:
        self._rec.sig(path)
        return _os.path.realpath(path, *args, **kwargs)


class _RecordingOs:
    def __init__(self, rec: _Recorder) -> None:
        self._rec = rec
        self.path = _RecordingPath(rec)

    def __getattr__(self, name: str):
        return getattr(_os, name)

    def stat(self, path, *args, **kwargs):
        self._rec.sig(path)
        return _os.stat(path, *args, **kwargs)


class _RecordingGlob:
    def __init__(self, rec: _Recorder) -> None:
        self._rec = rec

    def __getattr__(self, name: str):
        return getattr(_glob, name)

    def glob(self, pattern: str, *args, **kwargs) -> List[str]:
        # the listed directory (unescaped: glob.escape wraps *, ? and [ in brackets)
        self._rec.sig(re.sub(r"\[([*?\[])\]", r"\1", _os.path.dirname(pattern)) or ".")
        return _glob.glob(pattern, *args, **kwargs)


def _recorded(rec: _Recorder, fn):  # type: ignore[no-untyped-def]
    """Run ``fn()`` with this module's filesystem access recorded into ``rec``."""
    global _RECORDER
    g = globals()
    saved = {name: g[name] for name in ("os", "glob", "read_elf", "read_ld_cache")}

    def rec_read_elf(path, *args, **kwargs):  # type: ignore[no-untyped-def]
        rec.sig(path)
        return saved["read_elf"](path, *args, **kwargs)

    def rec_read_ld_cache(path=LD_SO_CACHE):  # type: ignore[no-untyped-def]
        rec.sig(path)
        return saved["read_ld_cache"](path)

    def rec_open(path, *args, **kwargs):  # type: ignore[no-untyped-def]
        rec.sig(path)
        return _builtins.open(path, *args, **kwargs)

    # what elf.default_lib_token() reads to expand $LIB (the machine is in the key)
    triplet = {"x86_64": "x86_64-linux-gnu", "aarch64": "aarch64-linux-gnu", "ppc64le": "powerpc64le-linux-gnu"}
    t = triplet.get(_os.uname().machine)
    for p in (["/lib/" + t] if t else []) + ["/etc/debian_version"]:
        rec.sig(p)
    _RECORD_CACHE.clear()  # an in-process memo would hide the RECORD files from the recording
    g.update(os=_RecordingOs(rec), glob=_RecordingGlob(rec), read_elf=rec_read_elf, read_ld_cache=rec_read_ld_cache, open=rec_open)
    _RECORDER = rec
    try:
        return fn()
    finally:
        _RECORDER = None
        g.update(saved)
        g.pop("open", None)
        _RECORD_CACHE.clear()


def _cache_version() -> list:
    """The file's version: the format, cudafix's version and the stat of the code that computes
    and shapes the result (a file written by other code is dropped whole, stale entries with it)."""
    here = _os.path.dirname(_os.path.abspath(__file__))
    pkg = _os.path.dirname(here)
    code = [cachefile.stat_sig(_os.path.join(here, m)) for m in ("libraries.py", "elf.py", "ldcache.py")]
    code += [cachefile.stat_sig(_os.path.join(pkg, m)) for m in ("store/cachefile.py", "model/snapshot.py")]
    return [LIB_CACHE_VERSION, __version__, code]


def _cache_key(torch_package_dir: str, env: Mapping[str, str], executable: Optional[str], preloaded: Sequence[str]) -> str:
    key = {
        "root": torch_package_dir,
        "executable": executable or sys.executable,
        "preloaded": [str(p) for p in preloaded],
        "env": {k: v for k, v in env.items() if k.startswith("LD_")},
        "machine": _os.uname().machine,
        "python": [sys.maxsize > 2**32, sys.byteorder],
    }
    return json.dumps(key, sort_keys=True)


_LD_CACHE_MEMO: Dict[str, LdCache] = {}


def _ld_cache() -> LdCache:
    """read_ld_cache(), parsed once per process while /etc/ld.so.cache keeps its stat
    (`status` builds three simulations: libcuda, compat libcuda, torch's libraries)."""
    if _RECORDER is not None:
        return read_ld_cache()  # a recorded run: the stand-in records the file
    key = repr((id(read_ld_cache), cachefile.stat_sig(LD_SO_CACHE)))
    hit = _LD_CACHE_MEMO.get(key)
    if hit is None:
        _LD_CACHE_MEMO.clear()
        hit = _LD_CACHE_MEMO[key] = read_ld_cache()
    return hit


_STR_LISTS = ("others", "ld_library_path")


def _strings_only(d: Dict[str, object], names: Set[str]) -> bool:
    """Only known fields, each None, a string, or (for list fields) a list of strings."""
    for k, v in d.items():
        if k not in names:
            return False
        if k in _STR_LISTS:
            if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
                return False
        elif v is not None and not isinstance(v, str):
            return False
    return True


def _info_from_cache(data: object) -> Optional[LibraryInfo]:
    """A cached LibraryInfo, checked field by field (None: not one; recompute)."""
    if not isinstance(data, dict) or not isinstance(data.get("resolutions"), list):
        return None
    res_fields = {f.name for f in dataclasses.fields(LibraryResolution)}
    out = []
    for r in data["resolutions"]:
        if not isinstance(r, dict) or not _strings_only(r, res_fields) or not isinstance(r.get("soname"), str) \
                or not isinstance(r.get("requested_by"), str):
            return None
        out.append(LibraryResolution(**r))  # type: ignore[arg-type]
    rest = {k: v for k, v in data.items() if k != "resolutions"}
    for k in ("found_via", "unknown"):
        v = rest.get(k, {})
        if not isinstance(v, dict) or not all(isinstance(a, str) and isinstance(b, str) for a, b in v.items()):
            return None
    if not _strings_only({k: v for k, v in rest.items() if k not in ("found_via", "unknown")}, {"ld_library_path"}):
        return None
    try:
        return LibraryInfo(resolutions=out, **rest)  # type: ignore[arg-type]
    except TypeError:
        return None


def _probe_cached(torch_package_dir: str, env: Mapping[str, str], executable: Optional[str],
                  preloaded: Sequence[str], cache_dir: str) -> LibraryInfo:
    key = _cache_key(torch_package_dir, env, executable, preloaded)
    version = _cache_version()
    entries = cachefile.load(cache_dir, LIB_CACHE_FILE, version)
    ent = entries.get(key)
    if isinstance(ent, dict):
        cwd = ent.get("cwd")
        try:
            same_cwd = cwd is None or cwd == _os.getcwd()
        except OSError:
            same_cwd = False
        if same_cwd and cachefile.sigs_unchanged(ent.get("deps")):
            hit = _info_from_cache(ent.get("result"))
            if hit is not None:
                return hit
    started = time.time_ns()
    rec = _Recorder()
    info = _recorded(rec, lambda: _probe(torch_package_dir, env, executable, preloaded))
    if cachefile.racy(rec.sigs.values(), started):
        return info  # an input changed moments ago: recorded mtimes may not show the next change
    entries.pop(key, None)
    entries[key] = {"cwd": rec.cwd, "deps": rec.deps(), "result": dataclasses.asdict(info)}
    while len(entries) > LIB_CACHE_MAX_ENTRIES:  # insertion order: drop the oldest
        entries.pop(next(iter(entries)))
    cachefile.store(cache_dir, LIB_CACHE_FILE, version, entries)
    return info


# -- libcuda ---------------------------------------------------------------------------------


def locate_libcuda(env: Mapping[str, str], executable: Optional[str] = None) -> Tuple[Optional[str], str, Optional[str]]:
    """The libcuda.so.1 a dlopen from libcudart (no RPATH/RUNPATH) would get: (realpath, via, why-not)."""
    try:
        dirs = default_dirs()
        if os.path.isdir("/usr/lib/wsl/lib"):  # WSL: the host driver's libcuda (also in ld.so.conf.d there)
            dirs.append("/usr/lib/wsl/lib")
        sim = LoaderSim(env, executable=executable, system_dirs=dirs)
        path, _elf, via = sim.find("libcuda.so.1", None, sim._want())
        if path is None:
            return None, "", "libcuda.so.1 not found on LD_LIBRARY_PATH, in ld.so.cache or the default dirs (%s)" % via
        return os.path.realpath(path), via, None
    except Exception as exc:
        return None, "", "libcuda search failed: %s: %s" % (type(exc).__name__, exc)


def find_compat_libcuda(env: Mapping[str, str], executable: Optional[str] = None) -> List[str]:
    """libcuda copies in a .../compat/ directory on the loader path (cuda-compat forward compatibility)."""
    out: List[str] = []
    try:
        sim = LoaderSim(env, executable=executable)
        dirs = list(sim.ld_library_path) + [os.path.dirname(p) for p in sim.cache.lookup("libcuda.so.1")]
        for d in dirs[:MAX_SEARCH_DIRS]:
            if os.path.basename(os.path.normpath(d)) != "compat":
                continue
            p = os.path.join(d, "libcuda.so.1")
            if os.path.exists(p):
                rp = os.path.realpath(p)
                if rp not in out:
                    out.append(rp)
    except Exception:
        return out
    return out
