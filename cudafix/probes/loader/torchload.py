"""`import torch`, simulated on Linux: does it find what torch's own binaries need in the env's wheels?

What torch/__init__.py does (read from the installed file, so each release is modelled by its own
text): ``ctypes.CDLL(torch/lib/libtorch_global_deps.so, RTLD_GLOBAL)`` (ctypes binds with
RTLD_NOW); on an OSError that names a CUDA library, its fallback preloads the nvidia-* wheels'
libraries from ``sys.path`` and loads it again; then ``from torch._C import *`` (RTLD_NOW).  Three
generations of that fallback (``preloader``):

- "cublas-cudnn" (1.13): only when the error names ``libcublas.so.11``; takes ``nvidia/cublas`` and
  ``nvidia/cudnn`` from the first sys.path entry holding both, else from the last one holding an
  ``nvidia/`` directory; with none, ``cublas_path`` is unbound (UnboundLocalError);
- "list" (2.0 and later): a table of (folder, glob) pairs; each must be found, else ValueError
  ``<glob> not found in the system path <sys.path>``; 2.9 also preloads nvrtc and nvJitLink after
  a successful load, 2.14 the whole table best effort, and both search ``nvidia/cuNN/lib`` and
  ``<folder>/lib`` too (``_get_cuda_dep_paths``).

Each load is simulated by cudafix.probes.loader.loadersim (glibc's search order, breadth first, a name
already loaded reused); a load fails at the first DT_NEEDED library found nowhere (dlerror:
``<name>: cannot open shared object file: No such file or directory``), else at the first
undefined symbol (``<object>: undefined symbol: <name>[, version <v>]``): symbols with a version
need of a CUDA library, and unversioned CUDA API symbols of torch's own libraries, looked up in the
library that must define them (cudafix.probes.binfmt.elfsym).  Which wheel should provide each library,
and at what version, comes from torch's ``Requires-Dist`` and, for torch's ``cuda-toolkit[...]``
requirement, cuda-toolkit's own (evaluated for this Python, extras included).
"""

from __future__ import annotations

import dataclasses
import glob
import json
import os
import re
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from cudafix.knowledge import torch_wheels
from cudafix.knowledge.cuda_packages import normalize
from cudafix.model.install import MISSING, OTHER_MAJOR, TOO_OLD, UNPINNED, InstallBreak, TorchImport
from cudafix.probes.binfmt import elfsym
from cudafix.probes.loader.libversions import WheelRecords
from cudafix.probes.loader.loaderfs import REAL, FileSystem, cached_run, code_version
from cudafix.probes.loader.loadersim import LoaderSim, _Obj, is_cuda_soname, ld_cache_of
from cudafix.probes.loader.torchpreload import cuda_major, first_candidate, init_text, read_preloader, success_preloads
from cudafix.probes.pyenv import wheelreqs
from cudafix.store import cachefile

TORCH_OWN = re.compile(r"^lib(c10|torch|caffe2|shm)[A-Za-z0-9_]*\.so")
# unversioned CUDA API names torch's libraries import (torch_wheels.SYMBOL_LIBS' prefixes)
TORCH_CUDA_API_B = re.compile(rb"(?:nccl|cublas|cudnn|cusparse|cufft|curand|cusolver|nvrtc|_?_?nvJitLink|cupti|cuFile|nvshmem)")


# -- one load --------------------------------------------------------------------------------


IMPORTS_CACHE = "torch-imports-cache.json"
IMPORTS_CACHE_VERSION = 2
IMPORTS_CACHE_MAX = 256


class _Symbols:
    """Symbol tables opened once per probe run, and each object's CUDA imports: parsed once per
    file (libtorch_cpu.so imports ~70,000 symbols), then kept in ``cache_dir`` by the file's stat
    (cudafix.store.cachefile's rules)."""

    def __init__(self, cache_dir: Optional[str] = None) -> None:
        self.tables: Dict[str, elfsym.SymbolTable] = {}
        self.cache_dir = cache_dir
        self.cache = cachefile.load(cache_dir, IMPORTS_CACHE, IMPORTS_CACHE_VERSION) if cache_dir else {}
        self.dirty = False
        self.memo: Dict[str, List[Tuple[str, str, str]]] = {}
        self.answers: Dict[Tuple[str, str], Optional[bool]] = {}

    def cuda_imports(self, path: str, torch_own: bool) -> List[Tuple[str, str, str]]:
        """(symbol, version, version's file) of the strong imports a CUDA library must define:
        those with a version need of a CUDA library, and (torch's own libraries) unversioned CUDA
        API names (TORCH_CUDA_API_B); in ``.dynsym`` order (:meth:`first_bound` orders them)."""
        hit = self.memo.get(path)
        if hit is not None:
            return hit
        real = os.path.realpath(path)
        sig = cachefile.stat_sig(real)
        ent = self.cache.get(real)
        if isinstance(ent, dict) and ent.get("sig") == sig and isinstance(ent.get("imports"), list):
            got = [tuple(x) for x in ent["imports"] if isinstance(x, list) and len(x) == 3]
        else:
            parsed, _why = elfsym.imports(path, files=is_cuda_soname, unversioned=TORCH_CUDA_API_B if torch_own else None,
                                          ordered=False)
            got = [(n, v or "", f or "") for n, weak, v, f in parsed or () if not weak]
            if parsed is not None and sig is not None:
                self.cache[real] = {"sig": sig, "imports": [list(x) for x in got]}
                self.dirty = True
        self.memo[path] = got  # type: ignore[assignment]
        return got  # type: ignore[return-value]

    def first_bound(self, path: str, torch_own: bool, names: List[str]) -> str:
        """Of ``names`` (imports of ``path``), the one the loader binds first: the relocations
        read for this object alone, only where two of its imports are undefined."""
        parsed, _why = elfsym.imports(path, files=is_cuda_soname, unversioned=TORCH_CUDA_API_B if torch_own else None)
        pos: Dict[str, int] = {}
        for i, (n, _w, _v, _f) in enumerate(parsed or ()):
            pos.setdefault(n, i)
        return min(names, key=lambda n: (pos.get(n, len(pos)), names.index(n)))

    def defines(self, path: str, name: str) -> Optional[bool]:
        key = (path, name)  # the two simulations of a probe run ask the same questions
        if key not in self.answers:
            t = self.tables.get(path)
            if t is None:
                t = self.tables[path] = elfsym.SymbolTable(path)
            self.answers[key] = t.defines(name)
        return self.answers[key]

    def close(self) -> None:
        for t in self.tables.values():
            t.close()
        if self.dirty and self.cache_dir:
            while len(self.cache) > IMPORTS_CACHE_MAX:
                self.cache.pop(next(iter(self.cache)))
            cachefile.store(self.cache_dir, IMPORTS_CACHE, IMPORTS_CACHE_VERSION, self.cache)


def _provider(sim: LoaderSim, prefix: str) -> Optional[_Obj]:
    for o in sim.loaded:
        if (o.elf.soname or os.path.basename(o.path)).startswith(prefix):
            return o
    return None


def _undefined(sim: LoaderSim, obj: _Obj, syms: _Symbols) -> Optional[Tuple[str, str, _Obj]]:
    """The first strong symbol, in binding order, that ``obj`` imports from a CUDA library that
    the library does not define: (symbol, version or "", provider)."""
    base = obj.elf.soname or os.path.basename(obj.path)
    if not (is_cuda_soname(base) or TORCH_OWN.match(base)):
        return None
    if not any(is_cuda_soname(n) for n in obj.elf.needed):
        return None
    torch_own = bool(TORCH_OWN.match(base))
    missing: List[Tuple[str, str, _Obj]] = []
    for name, version, vfile in syms.cuda_imports(obj.path, torch_own):
        if vfile:
            prov = sim._by_name.get(vfile)
        else:
            lib = torch_wheels.symbol_library(name)
            prov = _provider(sim, lib) if lib else None
        if prov is None:
            continue
        if syms.defines(prov.path, name) is False:
            missing.append((name, version or "", prov))
    if len(missing) < 2:
        return missing[0] if missing else None
    first = syms.first_bound(obj.path, torch_own, [m[0] for m in missing])
    return next(m for m in missing if m[0] == first)


def _load(sim: LoaderSim, path: str, syms: _Symbols, how: str = "root") -> Optional[Tuple[str, str, str, Optional[_Obj]]]:
    """Load ``path`` into ``sim``; the failure as (dlerror text, soname or symbol, version, object):
    a missing DT_NEEDED library first (all are mapped before any symbol is bound), else the first
    undefined symbol in relocation order (dependencies before their dependents)."""
    first_obj = len(sim.loaded)
    start = len(sim.events)
    sim.load(path, None, how=how)
    for name, req, res, _via, _why in sim.events[start:]:
        # only CUDA's and torch's own libraries are judged (the system's -- libpthread, libstdc++ --
        # are the distribution's business, and absent from a laid-out test tree)
        if res is None and (is_cuda_soname(name) or TORCH_OWN.match(os.path.basename(name)) or "/" in name):
            _unload(sim, first_obj)
            return "%s: cannot open shared object file: No such file or directory" % name, name, "", req
    for obj in reversed(sim.loaded[first_obj:]):
        hit = _undefined(sim, obj, syms)
        if hit is not None:
            name, version, prov = hit
            text = "%s: undefined symbol: %s%s" % (obj.path, name, ", version %s" % version if version else "")
            _unload(sim, first_obj)
            return text, name, version, obj
    return None


def _unload(sim: LoaderSim, first_obj: int) -> None:
    """A failed dlopen maps nothing: every object it added is gone (a retry searches again)."""
    gone = sim.loaded[first_obj:]
    del sim.loaded[first_obj:]
    ids = {id(o) for o in gone}
    for k in [k for k, o in sim._by_name.items() if id(o) in ids]:
        del sim._by_name[k]
    for k in [k for k, o in sim._by_id.items() if id(o) in ids]:
        del sim._by_id[k]


# -- the probe -------------------------------------------------------------------------------


def probe_torch_import(torch_dir: Optional[str], sys_path: Sequence[str], env: Mapping[str, str],
                       python_version: str = "", executable: Optional[str] = None,
                       cache_dir: Optional[str] = None, root: str = "/", keep: Tuple[str, ...] = (),
                       helper: bool = False) -> TorchImport:
    """Simulate `import torch` of the torch in ``torch_dir`` (Linux); never raises.  ``helper``:
    torch's requirements may be read in a helper process meanwhile (wheelreqs.ahead; a caller
    that is itself a child the CLI forked for this)."""
    out = TorchImport(probed=True)
    if not torch_dir:
        out.unknown["import"] = "no torch installed"
        return out
    if not sys.platform.startswith("linux"):
        out.unknown["import"] = "simulated on Linux only"
        return out
    def run(fs: FileSystem) -> TorchImport:
        syms = _Symbols(cache_dir)
        pins = wheelreqs.ahead(torch_dir, sys_path, python_version, cache_dir, fs) if helper else None
        try:
            _probe(out, torch_dir, list(sys_path), env, python_version, executable, syms, fs, pins)
        finally:
            syms.close()
            wheelreqs.take(pins, fs)  # answered by then where it was used; else waited for here
        return out

    try:
        if cache_dir is None:
            return run(REAL if root == "/" else FileSystem(root, keep))  # the machine's loader paths under a probe root
        key = json.dumps([torch_dir, list(sys_path), {k: v for k, v in env.items() if k.startswith("LD_")}, python_version,
                          executable or sys.executable, os.uname().machine, root, list(keep)])
        return cached_run(cache_dir, RESULT_CACHE, _cache_version(), key, root, keep, run, dataclasses.asdict,
                          _from_cache, RESULT_CACHE_MAX)
    except Exception as exc:  # the probe contract: unknown with a reason
        out = TorchImport(probed=True)
        out.unknown["import"] = "simulation failed: %s: %s" % (type(exc).__name__, exc)
    return out


# The whole answer is kept by what the simulation read (loaderfs.cached_run; every read below goes
# through its FileSystem): a warm `status` re-stats those files instead of binding the symbols again.
RESULT_CACHE = "torch-import-cache.json"
RESULT_CACHE_VERSION = 1
RESULT_CACHE_MAX = 8


def _cache_version() -> list:
    from cudafix.knowledge import torch_wheels as tw
    from cudafix.model import install
    from cudafix.probes.binfmt import elf
    from cudafix.probes.loader import ldcache, loaderfs, loadersim, libversions

    return code_version(RESULT_CACHE_VERSION, (sys.modules[__name__], elfsym, elf, ldcache, loaderfs, loadersim,
                                               libversions, wheelreqs, tw, install, cachefile))


_BREAK_FIELDS = frozenset(f.name for f in dataclasses.fields(InstallBreak))


def _from_cache(data: object) -> Optional[TorchImport]:
    """A stored TorchImport, checked field by field (None: not one; compute again)."""
    if not isinstance(data, dict) or not isinstance(data.get("breaks"), list) or not isinstance(data.get("probed"), bool):
        return None
    breaks = []
    for b in data["breaks"]:
        if not isinstance(b, dict) or not set(b) <= _BREAK_FIELDS or \
                not all(isinstance(v, str) or (k == "installed" and v is None) for k, v in b.items()):
            return None
        try:
            breaks.append(InstallBreak(**b))
        except TypeError:
            return None
    for k in ("found_via", "unknown"):
        v = data.get(k)
        if not isinstance(v, dict) or not all(isinstance(a, str) and isinstance(x, str) for a, x in v.items()):
            return None
    if not (data.get("error") is None or isinstance(data.get("error"), str)) or \
            not isinstance(data.get("stage"), str) or not isinstance(data.get("preloader"), str):
        return None
    return TorchImport(probed=data["probed"], error=data["error"], stage=data["stage"], preloader=data["preloader"],
                       breaks=breaks, found_via=dict(data["found_via"]), unknown=dict(data["unknown"]))


def _probe(out: TorchImport, torch_dir: str, sys_path: List[str], env: Mapping[str, str], python_version: str,
           executable: Optional[str], syms: _Symbols, fs: FileSystem = REAL, pins: Optional[object] = None) -> None:
    gd = os.path.join(torch_dir, "lib", "libtorch_global_deps.so")
    cmods = sorted(fs.glob(os.path.join(glob.escape(torch_dir), "_C.*so")))
    if not cmods:
        out.unknown["import"] = "no torch/_C*.so in %s" % torch_dir
        return
    pre = read_preloader(init_text(fs, torch_dir))
    style, libs = pre.style, pre.on_error
    out.preloader = style or "none"
    out.found_via["preloader"] = "torch/__init__.py: %s" % pre.describe()
    cmajor = cuda_major(fs, torch_dir)
    cache = ld_cache_of(fs)

    def new_sim() -> LoaderSim:
        return LoaderSim(env, executable=executable, ld_cache=cache, fs=fs)

    found: Dict[Tuple[str, str], Optional[str]] = {}

    def find(folder: str, pattern: str) -> Optional[str]:
        if (folder, pattern) not in found:  # asked by both simulations and the success preloads
            found[folder, pattern] = first_candidate(fs, sys_path, folder, pattern, pre.wide_search, cmajor)
        return found[folder, pattern]

    # 1. the first error, in torch/__init__.py's order
    sim = new_sim()
    error, stage, failure = None, "", None
    fail = _load(sim, gd, syms) if fs.isfile(gd) else None
    if fail is not None:
        error, stage, failure = "OSError: " + fail[0], "libtorch_global_deps", fail
        names = [pat.split(".", 1)[0] for _f, pat, _r in libs]
        if style == "cublas-cudnn" and "libcublas.so.11" in fail[0]:
            error, stage, failure = _cublas_cudnn(fs, sim, sys_path, gd, syms, python_version)
        elif style == "list" and any(n in fail[0] for n in names):
            stage = "preload"
            error, failure = None, None
            for folder, pattern, required in libs:
                path = find(folder, pattern)
                if path is None:
                    if required:
                        error = "ValueError: %s not found in the system path %s" % (pattern, sys_path)
                        failure = (error, pattern, "", None)
                        break
                    continue
                f2 = _load(sim, path, syms, how="preload")
                if f2 is not None:
                    error, failure = "OSError: " + f2[0], f2
                    break
            if error is None:
                f3 = _load(sim, gd, syms)
                if f3 is not None:
                    error, stage, failure = "OSError: " + f3[0], "libtorch_global_deps", f3
    elif pre.on_success and any(o.elf.soname and o.elf.soname.startswith("libcudart.so") for o in sim.loaded):
        for path in success_preloads(fs, torch_dir, sys_path, pre, cmajor, find):  # the first exception ends it (swallowed)
            if _load(sim, path, syms, how="preload") is not None:
                break
    if error is None:
        f4 = _load(sim, cmods[0], syms)
        if f4 is not None:
            error, stage, failure = "ImportError: " + f4[0], "torch._C", f4
    out.error, out.stage = error, stage if error else ""
    out.found_via["import"] = "torch/__init__.py's loads simulated (glibc search order, RTLD_NOW symbol binding of CUDA imports)"

    # 2. every broken wheel: the loads as they end after torch's fallback has preloaded what it finds
    full = new_sim()
    for folder, pattern, _r in libs if style != "cublas-cudnn" else [("cublas", "libcublas.so.11", True), ("cudnn", "libcudnn.so.8", True)]:
        path = find(folder, pattern)
        if path is not None:
            full.load(path, None, how="preload")
    failures = []
    if failure is not None and failure[3] is not None and "undefined symbol" in failure[0]:
        hit = _undefined(sim, failure[3], syms) if failure[3] is not None else None
        if hit is not None:  # the error's own cause first
            failures.append(("symbol", hit[2].elf.soname or os.path.basename(hit[2].path), hit[0], hit[1], failure[3].path, hit[2].path))
    for root in ([gd] if fs.isfile(gd) else []) + [cmods[0]]:
        start = len(full.events)
        full.load(root, None, how="root")
        for name, req, res, _via, _why in full.events[start:]:
            if res is None and is_cuda_soname(name):
                failures.append(("missing", name, "", "", req.path if req else root, ""))
    for obj in full.loaded:
        hit = _undefined(full, obj, syms)
        if hit is not None:
            prov = hit[2]
            failures.append(("symbol", prov.elf.soname or os.path.basename(prov.path), hit[0], hit[1], obj.path, prov.path))
    if failure is not None and failure[3] is None and not failures:  # the 1.13 / ValueError cases: a folder missing
        failures.append(("missing", failure[1], "", "", "", ""))
    reqs = wheelreqs.take(pins, fs) or wheelreqs.Requirements(torch_dir, sys_path, python_version, syms.cache_dir, fs)
    out.breaks = _causes(fs, failures, reqs, cmajor)


def _cublas_cudnn(fs: FileSystem, sim: LoaderSim, sys_path: List[str], gd: str, syms: _Symbols, python_version: str):
    """torch 1.13's _preload_cuda_deps (see the module docstring)."""
    cublas = cudnn = None
    for path in sys_path:
        nv = os.path.join(path, "nvidia")
        if not fs.exists(nv):
            continue
        cublas = os.path.join(nv, "cublas", "lib", "libcublas.so.11")
        cudnn = os.path.join(nv, "cudnn", "lib", "libcudnn.so.8")
        if fs.exists(cublas) and fs.exists(cudnn):
            break
    if cublas is None or cudnn is None:
        py = tuple(int(x) for x in re.findall(r"\d+", python_version)[:2]) if python_version else (3, 8)
        text = ("UnboundLocalError: cannot access local variable 'cublas_path' where it is not associated with a value"
                if py >= (3, 11) else "UnboundLocalError: local variable 'cublas_path' referenced before assignment")
        return text, "preload", (text, "libcublas.so.11", "", None)
    for p in (cublas, cudnn):
        f = _load(sim, p, syms, how="preload")
        if f is not None:
            return "OSError: " + f[0], "preload", f
    f = _load(sim, gd, syms)
    if f is not None:
        return "OSError: " + f[0], "libtorch_global_deps", f
    return None, "", None


# -- which wheel ---------------------------------------------------------------------------------


def _satisfied(spec: str, version: str) -> bool:
    from packaging.specifiers import InvalidSpecifier, SpecifierSet
    from packaging.version import InvalidVersion

    try:
        return SpecifierSet(spec).contains(version, prereleases=True)
    except (InvalidSpecifier, InvalidVersion):
        return False


def _causes(fs: FileSystem, failures: List[Tuple[str, str, str, str, str, str]], reqs: wheelreqs.Requirements,
            cuda_major: str) -> List[InstallBreak]:
    if not reqs.entries:  # no CUDA wheel requirement (conda's torch, a bundling build): no pip wheel to name
        return []
    records = WheelRecords(fs)
    out: List[InstallBreak] = []
    seen = set()
    for kind, soname, symbol, version, needed_by, provider in failures:
        fam = torch_wheels.family(soname)
        if fam is None:
            continue
        same = reqs.installed_family(fam[0])
        wv = records.wheel_version(provider) if kind == "symbol" and provider else None
        have = (normalize(wv[1][: -len(".dist-info")].rsplit("-", 1)[0]), wv[0]) if wv else None
        want = reqs.for_family(fam[0], fam[1])
        if want is None:  # no pin of torch's (cusparse's nvjitlink, torch 2.4): the wheel itself, newer
            name = have[0] if have else "nvidia-%s%s" % (fam[0], "-cu" + cuda_major if cuda_major in ("11", "12") else "")
            want = (name, "%s>%s" % (name, have[1]) if have else name, "torch's libraries (no version pinned)")
        elif have and want[0] == have[0] and _satisfied(want[1][len(want[0]):], have[1]):
            # pinned loosely and satisfied, yet too old: only a newer one helps, pip must be told
            want = (want[0], "%s>%s" % (want[0], have[1]), want[2])
        if want[0] in seen:
            continue
        seen.add(want[0])
        b = InstallBreak(kind=MISSING, wheel=want[0], requirement=want[1], required_by=want[2], soname=soname,
                         needed_by=needed_by)
        if kind == "symbol":
            b.kind, b.symbol, b.symbol_version, b.found = TOO_OLD, symbol, version, provider
            if have:
                b.installed = "%s %s" % have
                if have[0] != want[0] and torch_wheels.wheel_family(want[0]) == torch_wheels.wheel_family(have[0]):
                    b.kind = OTHER_MAJOR  # nvidia-nccl-cu12 where torch wants nvidia-nccl-cu13
        elif same:
            b.kind, b.installed = OTHER_MAJOR, ", ".join("%s %s" % nv for nv in same)
        out.append(b)
    for name, spec, by in reqs.not_installed():  # required, absent, not loaded at import (nvrtc, cusolver...)
        if name not in seen and spec not in {b.requirement for b in out}:
            seen.add(name)
            out.append(InstallBreak(kind=MISSING, wheel=name, requirement=spec, required_by=by))
    for name, spec, by, have in reqs.unpinned():
        if name not in seen:
            out.append(InstallBreak(kind=UNPINNED, wheel=name, requirement=spec, required_by=by, installed="%s %s" % (name, have)))
    return out
