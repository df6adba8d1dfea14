"""The libraries probe: which file the loader would pick for each CUDA library torch needs.

The simulation itself is cudafix/probes/loader/loadersim.py (glibc's search order from the ELF
headers), over cudafix/probes/loader/loaderfs.py (the filesystem it reads, recordable); file versions
come from cudafix/probes/loader/libversions.py.  This module runs it for torch's libraries, shapes the
answer into the snapshot's LibraryInfo, keeps the result cache, and finds libcuda.
"""

from __future__ import annotations

import collections
import dataclasses
import glob
import json
import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Dict, List, Mapping, Optional, Sequence, Set, Tuple

from cudafix.model.snapshot import LibraryInfo, LibraryResolution
from cudafix.probes.binfmt.elf import split_path_list
from cudafix.probes.loader.ldcache import LD_SO_CACHE  # noqa: F401 (tests: the file a recorded run depends on)
from cudafix.probes.loader.libversions import WheelRecords
from cudafix.probes.loader.loaderfs import REAL, FileSystem, cached_run, code_version
from cudafix.probes.loader.loadersim import (
    MAX_SEARCH_DIRS,
    LoaderSim,
    _Obj,
    default_dirs,
    is_cuda_soname,
    ld_cache_of,
    simulate,
)
from cudafix.probes.loader.torchpreload import success_preloads
from cudafix.store import cachefile

ROOT_CANDIDATES = ("lib/libtorch_cuda.so", "lib/libtorch_global_deps.so")


def _copies(soname: str, sim: LoaderSim) -> List[str]:
    """Every file for ``soname`` on LD_LIBRARY_PATH, in ld.so.cache and in the default dirs."""
    out: List[str] = []
    for d in (list(sim.ld_library_path) + list(sim.system_dirs))[:MAX_SEARCH_DIRS]:
        p = os.path.join(d, soname)
        if sim.fs.exists(p):
            out.append(p)
    out += [p for p in sim.cache.lookup(soname) if sim.fs.exists(p)]
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


def ld_preload_entries(env: Mapping[str, str]) -> List[str]:
    """LD_PRELOAD's entries: "a list of ... separated by spaces or colons" (ld.so(8)); only those
    with a slash are modelled (a bare name is searched like a DT_NEEDED of the executable)."""
    return [e for e in (env.get("LD_PRELOAD") or "").replace(":", " ").split() if "/" in e][:64]


def find_root(torch_package_dir: str, fs: FileSystem = REAL) -> Optional[str]:
    for rel in ROOT_CANDIDATES:
        p = os.path.join(torch_package_dir, rel)
        if fs.isfile(p):
            return p
    found = sorted(fs.glob(os.path.join(glob.escape(torch_package_dir), "_C*.so")))
    return found[0] if found else None


def probe_libraries(
    torch_package_dir: Optional[str],
    env: Mapping[str, str],
    executable: Optional[str] = None,
    preloaded: Sequence[str] = (),
    cache_dir: Optional[str] = None,
    root: str = "/",
    keep: Tuple[str, ...] = (),
    sys_path: Optional[Sequence[str]] = None,
) -> LibraryInfo:
    """Resolve the CUDA libraries torch would load in ``env``; never raises.

    ``torch_package_dir`` None (no torch found): nothing to resolve, said in ``unknown``.
    ``preloaded``: absolute paths already in the process (e.g. the startup hook's preloads).
    ``cache_dir``: where to keep the result cache (None: no cache; see "result cache" below).
    ``root`` / ``keep``: the probe root the machine's paths are read under, and the env's own
    directories that stay where they are (loaderfs.FileSystem.machine).
    ``sys_path``: the target's; with it, what torch/__init__.py loads by path before its
    libraries is loaded first, as there (torchpreload.success_preloads).
    """
    if not torch_package_dir:
        return LibraryInfo(unknown={"resolutions": "no torch installation to resolve libraries for"})
    try:
        if cache_dir is not None:
            return _probe_cached(torch_package_dir, env, executable, preloaded, cache_dir, root, keep, sys_path)
        return _probe(torch_package_dir, env, executable, preloaded, REAL if root == "/" else FileSystem(root, keep), sys_path)
    except Exception as exc:  # the probe contract: unknown with a reason
        return LibraryInfo(unknown={"resolutions": "library simulation failed: %s: %s" % (type(exc).__name__, exc)})


def _probe(torch_package_dir: str, env: Mapping[str, str], executable: Optional[str], preloaded: Sequence[str],
           fs: FileSystem = REAL, sys_path: Optional[Sequence[str]] = None) -> LibraryInfo:
    info = LibraryInfo(ld_library_path=split_path_list(env.get("LD_LIBRARY_PATH"), ":;") if env.get("LD_LIBRARY_PATH") else [])
    root = find_root(torch_package_dir, fs)
    if root is None:
        info.unknown["resolutions"] = "no libtorch_cuda.so, libtorch_global_deps.so or _C*.so under %s" % torch_package_dir
        return info
    cache = ld_cache_of(fs)
    if cache.unknown:
        info.unknown["ld.so.cache"] = cache.unknown
    else:
        info.found_via["ld.so.cache"] = cache.found_via
    info.found_via["resolutions"] = "glibc search order simulated from the ELF headers, starting at %s" % root
    spelled = ld_preload_entries(env)  # as the env spells them (preloaded_as: the fix keeps the others)
    env_preloads = spelled
    if fs.root != "/":  # the machine's paths, read under the probe root
        env_preloads = [fs.machine(p) for p in spelled]
        preloaded = [fs.machine(p) for p in preloaded]
    lead = _torch_lead(fs, torch_package_dir, sys_path)
    if lead:
        info.found_via["torch's own loads"] = "torch/__init__.py loads by path first: " + ", ".join(lead)
    sim = simulate(root, env, executable=executable, ld_cache=cache, preloaded=list(env_preloads) + list(preloaded), fs=fs,
                   lead=lead)
    if not any(o.path == root for o in sim.loaded):
        _, reason = fs.read_elf(root, with_sections=False)
        info.unknown["resolutions"] = "%s: %s" % (root, reason or "could not be mapped")
        return info
    base_env = {k: v for k, v in env.items() if k not in ("LD_LIBRARY_PATH", "LD_PRELOAD")}
    expected_sim = simulate(root, base_env, executable=executable, ld_cache=cache, preloaded=preloaded, fs=fs, lead=lead) \
        if info.ld_library_path or env_preloads else sim
    preloaded_real = {fs.realpath(p) for p in env_preloads}
    expected = _first_resolutions(expected_sim)
    records = WheelRecords(fs)
    version_of = records.version_of
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
            r.resolved = fs.realpath(res.path)  # what /proc/self/maps would show
            r.resolved_via = "LD_PRELOAD" if via == "loaded" and r.resolved in preloaded_real else via
            if r.resolved_via == "LD_PRELOAD":  # which entries name it (the rule's fix keeps the others)
                r.preloaded_as = [e for e, m in zip(spelled, env_preloads) if fs.realpath(m) == r.resolved]
            r.resolved_version = version_of(res.path, version_notes)
        else:
            if why and why.startswith("search stopped"):
                r.unknown = "%s: undecided, %s" % (soname, why)
            else:
                r.unknown = "%s not found by the loader (%s)" % (soname, why or "not found")
        exp = expected.get(soname)
        if exp is not None and exp[1] is not None:
            r.expected = fs.realpath(exp[1].path)
            r.expected_version = version_of(r.expected, version_notes)
        seen = {fs.realpath(p) for p in (r.resolved, r.expected) if p}
        for p in _copies(soname, sim):
            rp = fs.realpath(p)
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
    if not info.resolutions and not sim.notes:
        # torch <= 1.x bundles its CUDA libraries under hashed sonames (libcudart-80664282.so.10.2,
        # found through RPATH $ORIGIN): a fact, so that lib-shadowed can say ok rather than unknown.
        info.found_via["nothing to resolve"] = "none of the %d objects loaded from %s requests a CUDA library by a shared soname" % (
            len(sim.loaded), os.path.basename(root))
    return info


def _torch_lead(fs: FileSystem, torch_package_dir: str, sys_path: Optional[Sequence[str]]) -> List[str]:
    """libtorch_global_deps.so, then the libraries torch/__init__.py preloads by path after it
    (2.9 and later: a soname loaded so wins later lookups, LD_LIBRARY_PATH or not); [] without
    the target's sys.path or where torch preloads nothing on that path."""
    gd = os.path.join(torch_package_dir, "lib", "libtorch_global_deps.so")
    if sys_path is None or not fs.isfile(gd):
        return []
    preloads = success_preloads(fs, torch_package_dir, sys_path)
    return [gd] + preloads if preloads else []


# -- result cache ----------------------------------------------------------------------------
#
# The simulation stats ~3,000 candidate paths; its answer changes only when its inputs change, so
# `status` keeps it by what it read (loaderfs.cached_run).  The key: the torch dir, the
# executable, the preloaded list, every LD_* variable (the simulation reads LD_LIBRARY_PATH), the
# machine; the deps include /etc/ld.so.cache and the dirs default_lib_token() looks at.

LIB_CACHE_FILE = "libraries-cache.json"
LIB_CACHE_VERSION = 3  # 3: loaderfs.cached_run
LIB_CACHE_MAX_ENTRIES = 8


def _cache_version() -> list:
    """The file's version (loaderfs.code_version): the code that computes and shapes the result."""
    from cudafix.probes.binfmt import elf
    from cudafix.probes.loader import ldcache, loaderfs, loadersim, libversions, torchpreload
    from cudafix.model import snapshot

    return code_version(LIB_CACHE_VERSION, (sys.modules[__name__], loadersim, loaderfs, libversions, elf, ldcache, torchpreload,
                                            cachefile, snapshot))


def _cache_key(torch_package_dir: str, env: Mapping[str, str], executable: Optional[str], preloaded: Sequence[str],
               sys_path: Optional[Sequence[str]] = None) -> str:
    key = {
        "sys_path": None if sys_path is None else [str(p) for p in sys_path],
        "root": torch_package_dir,
        "executable": executable or sys.executable,
        "preloaded": [str(p) for p in preloaded],
        "env": {k: v for k, v in env.items() if k.startswith("LD_")},
        "machine": os.uname().machine,
        "python": [sys.maxsize > 2**32, sys.byteorder],
    }
    return json.dumps(key, sort_keys=True)


_STR_LISTS = ("others", "preloaded_as", "ld_library_path")


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
                  preloaded: Sequence[str], cache_dir: str, root: str = "/", keep: Tuple[str, ...] = (),
                  sys_path: Optional[Sequence[str]] = None) -> LibraryInfo:
    key = _cache_key(torch_package_dir, env, executable, preloaded, sys_path)
    if root != "/":  # another tree is another machine (the default key stays as it was)
        key = json.dumps([key, root, list(keep)])
    return cached_run(cache_dir, LIB_CACHE_FILE, _cache_version(), key, root, keep,
                      lambda fs: _probe(torch_package_dir, env, executable, preloaded, fs=fs, sys_path=sys_path),
                      dataclasses.asdict, _info_from_cache, LIB_CACHE_MAX_ENTRIES)


# -- libcuda ---------------------------------------------------------------------------------


def _fs(root: str, keep: Tuple[str, ...]) -> FileSystem:
    return REAL if root == "/" else FileSystem(root, keep)


def locate_libcuda(env: Mapping[str, str], executable: Optional[str] = None, root: str = "/",
                   keep: Tuple[str, ...] = ()) -> Tuple[Optional[str], str, Optional[str]]:
    """The libcuda.so.1 a dlopen from libcudart (no RPATH/RUNPATH) would get: (realpath, via, why-not).
    Under a probe root the path is the tree's file (a host path inside the tree)."""
    try:
        fs = _fs(root, keep)
        dirs = default_dirs(fs)
        wsl = fs.machine("/usr/lib/wsl/lib")
        if fs.isdir(wsl):  # WSL: the host driver's libcuda (also in ld.so.conf.d there)
            dirs.append(wsl)
        sim = LoaderSim(env, executable=executable, system_dirs=dirs, fs=fs)
        path, _elf, via = sim.find("libcuda.so.1", None, sim._want())
        if path is None:
            return None, "", "libcuda.so.1 not found on LD_LIBRARY_PATH, in ld.so.cache or the default dirs (%s)" % via
        return fs.realpath(path), via, None
    except Exception as exc:
        return None, "", "libcuda search failed: %s: %s" % (type(exc).__name__, exc)


def find_compat_libcuda(env: Mapping[str, str], executable: Optional[str] = None, root: str = "/",
                        keep: Tuple[str, ...] = ()) -> List[str]:
    """libcuda copies in a .../compat/ directory on the loader path (cuda-compat forward compatibility)."""
    out: List[str] = []
    try:
        fs = _fs(root, keep)
        sim = LoaderSim(env, executable=executable, fs=fs)
        dirs = list(sim.ld_library_path) + [os.path.dirname(p) for p in sim.cache.lookup("libcuda.so.1")]
        for d in dirs[:MAX_SEARCH_DIRS]:
            if os.path.basename(os.path.normpath(d)) != "compat":
                continue
            p = os.path.join(d, "libcuda.so.1")
            if fs.exists(p):
                rp = fs.realpath(p)
                if rp not in out:
                    out.append(rp)
    except Exception:
        return out
    return out
