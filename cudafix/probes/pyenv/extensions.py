"""Every CUDA binary the env's Python can import, besides torch's own libraries.

Where: each directory of the target interpreter's sys.path (site-packages, .pth entries,
PYTHONPATH; not the working directory), the conda env's ``lib/``, and torch's JIT extension
cache where ``torch.utils.cpp_extension`` builds (``TORCH_EXTENSIONS_DIR/<name>/``, else
``$XDG_CACHE_HOME/torch_extensions/<py311_cu130>/<name>/``).  Per shared object:

- device code: SASS / PTX per arch from its ``.nv_fatbin`` (cudafix.probes.binfmt.fatbin);
- the CUDA runtime it was built against: DT_NEEDED ``libcudart.so.N`` (shared), or the static
  runtime (its ``/cudart.shm.`` string in ``.rodata``; its version from the constant
  ``cudaRuntimeGetVersion`` returns, cudafix/probes/binfmt/cudart_static.py, or unknown);
- for torch extensions (DT_NEEDED libc10/libtorch*), the torch symbols (C++ namespaces and
  the stable-ABI C shim) it imports that the installed torch's libraries do not define: the loader's
  ``undefined symbol`` at import, predicted without importing (cudafix.probes.binfmt.elfsym).

Under a probe root (tests: a laid-out WSL tree) the extension cache, named by $HOME /
$XDG_CACHE_HOME / TORCH_EXTENSIONS_DIR, is the tree's, and the load check's loader simulation
reads the tree's ld.so.cache and directories; sys.path and the conda prefix are the inspected
interpreter's own, real paths, read where they are (docs/wsl.md, "One root").

Not scanned here: ``torch/`` (its libraries are the torch probe's) and ``nvidia/`` and NVIDIA's
own libraries in conda ``lib/`` (cuBLAS, cuDNN...: loaded as dependencies, never imported,
resolved by the libraries probe).  Results are cached per file by (realpath, size, mtime_ns),
plus the stat of torch's libraries for the symbol check.
"""

from __future__ import annotations

import os
import re
import stat

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Dict, Iterator, List, Mapping, Optional, Tuple

from cudafix.model.snapshot import ExtensionInfo, ExtensionModule
from cudafix.probes.binfmt import elfsym
from cudafix.probes.pyenv import extowners
from cudafix.probes.pyenv.dirwalk import DirCache, WalkLimit, walk
from cudafix.probes.binfmt.elf import read_elf
from cudafix.probes.binfmt.cudart_static import static_cudart_version
from cudafix.probes.binfmt.fatbin import scan_fatbin_uncached
from cudafix.probes.machine.host import machine_path, which
from cudafix.store import cachefile
from cudafix.model import cuda as cudaver
from cudafix.model.lazyre import lazy_re

CACHE_FILE = "extensions-cache.json"
CACHE_VERSION = 4  # 2: the static runtime's version (cudart_version); 3: torch symbols looked up in the DT_NEEDED closure too; 4: the PTX ISA versions (ptx_isa)
CACHE_MAX_ENTRIES = 4096
MAX_DEPTH = 8  # site-packages/pkg/sub/... deeper than this holds no importable module
MAX_DEPTH_OTHER = 4  # a PYTHONPATH source tree: its in-place built modules sit near the top
MAX_FILES = 20000  # shared objects examined per scan (a bound, never reached by real envs)
MAX_MISSING_KEPT = 10
MAX_RODATA = 64 << 20

# NVIDIA's own libraries in a conda lib/: dependencies, never imported (libraries probe).
VENDOR_PREFIXES = ("libcublas", "libcudnn", "libcufft", "libcusparse", "libcusolver", "libcurand", "libnccl",
                   "libnvjpeg", "libnpp", "libcudart", "libnvrtc", "libnvJitLink", "libcupti", "libnvToolsExt",
                   "libcufile", "libnvshmem", "libnvperf", "libcuda", "libnvidia", "libtorch", "libc10",
                   "libcaffe2", "libshm", "libnvblas", "libnvvm", "libcusparseLt", "libnvfatbin", "libnvptxcompiler")
TORCH_LIB_RE = lazy_re(r"^lib(c10|torch|caffe2|shm)[A-Za-z0-9_]*\.so")
# Symbols torch's libraries export: C++ names in torch's namespaces (nested names, their vtables /
# typeinfo), and the C shim of the stable ABI (torchvision >= 0.23 `_C_stable.so`).
TORCH_SYM_RE = lazy_re(r"^(_Z(T[VIS])?N[KVrRO]*(3c10|2at|5torch|6caffe2|4c10d)|aoti_torch_|torch_)")
SO_RE = lazy_re(r"\.so($|\.)")


def is_shared_object_name(name: str) -> bool:
    return ".so" in name and bool(SO_RE.search(name)) and not name.endswith((".py", ".pyc", ".txt", ".json"))


def torch_extension_roots(env: Mapping[str, str], tag: Optional[str] = None, root: str = "/",
                          keep: Tuple[str, ...] = ()) -> List[Tuple[str, int]]:
    """(directory, walk depth) where torch.utils.cpp_extension builds JIT extensions, as its
    _get_build_directory does: TORCH_EXTENSIONS_DIR/<name>/, else
    <user cache>/torch_extensions/<tag>/<name>/ with tag "py311_cu130" (Python, then torch's
    CUDA / ROCm / cpu).  ``tag`` None (torch or Python unknown): every tag directory.
    ``root`` / ``keep``: the probe root these machine paths lie under (host.machine_path)."""
    if env.get("TORCH_EXTENSIONS_DIR"):
        return [(machine_path(root, env["TORCH_EXTENSIONS_DIR"], keep), 2)]
    base = env.get("XDG_CACHE_HOME") or os.path.join(env.get("HOME") or os.path.expanduser("~"), ".cache")
    root = machine_path(root, os.path.join(base, "torch_extensions"), keep)
    return [(os.path.join(root, tag), 2)] if tag else [(root, 3)]


def extension_tag(python_version: str, cuda: Optional[str], hip: Optional[str]) -> Optional[str]:
    """torch's build-folder tag for this interpreter and torch ("py311_cu130"); None if unknown."""
    parts = python_version.split(".")
    if len(parts) < 2 or not (parts[0].isdigit() and parts[1].isdigit()):
        return None
    acc = "rocm" + hip.replace(".", "") if hip else cudaver.tag(cuda)
    return "py%s%s_%s" % (parts[0], parts[1], acc)


# -- one file ---------------------------------------------------------------------------------


def _has_static_cudart(path: str, rodata: Any) -> bool:
    if rodata is None or rodata.size > MAX_RODATA:
        return False
    try:
        with open(path, "rb") as fh:
            fh.seek(rodata.offset)
            return b"/cudart.shm." in fh.read(rodata.size)
    except OSError:
        return False


def examine(path: str) -> Optional[Dict[str, Any]]:
    """The torch-independent facts of one shared object, as a JSON-able dict; None when it is
    neither CUDA-bearing nor torch-linked (or not a loadable ELF)."""
    elf, _reason = read_elf(path)
    if elf is None or elf.etype != 3:
        return None
    torch_needed = [n for n in elf.needed if TORCH_LIB_RE.match(n)]
    has_fatbin = ".nv_fatbin" in elf.sections
    # Only objects that link torch's libraries import torch's symbols (torch.utils.cpp_extension
    # and every setup.py build link -lc10 -ltorch...): the others' symbol tables are not read.
    ns, why = elfsym.needed_symbols(path) if torch_needed else (None, "")
    torch_syms = [s for s in (ns.strong if ns else []) if TORCH_SYM_RE.match(s)]
    if not has_fatbin and not torch_needed and not torch_syms:
        return None
    r: Dict[str, Any] = {"sass": [], "ptx": [], "ptx_bytes": {}, "ptx_isa": {}, "fatbin_via": "", "unknown": {},
                         "torch_needed": torch_needed, "torch_syms": torch_syms}
    if ns is None and torch_needed:
        r["unknown"]["torch_symbols"] = why
    if has_fatbin:
        cov = scan_fatbin_uncached(path)
        if cov.unknown:
            r["unknown"]["device_code"] = cov.unknown
        r.update(sass=cov.sass, ptx=cov.ptx, ptx_bytes=cov.ptx_bytes, ptx_isa=cov.ptx_isa, fatbin_via=cov.found_via)
    cudart = [n for n in elf.needed if n.startswith("libcudart.so")]
    if cudart:
        major = cudart[0][len("libcudart.so."):].split(".", 1)[0] or None
        r.update(cudart=major, cudart_linkage="shared", cudart_via="DT_NEEDED %s" % cudart[0])
    elif _has_static_cudart(path, elf.sections.get(".rodata")):
        ver, how = static_cudart_version(path)
        r.update(cudart=str(cudaver.major(ver)) if ver else None, cudart_linkage="static", cudart_version=ver,
                 cudart_via="static CUDA runtime (its /cudart.shm. string in .rodata)%s" % (
                     ", version %s: %s" % (cudaver.version_text(ver), how) if ver else ""))
        if ver is None:
            r["unknown"]["cudart"] = "statically linked CUDA runtime, its version not readable: %s" % how
    elif has_fatbin:
        r.update(cudart=None, cudart_linkage="none", cudart_via="no libcudart in DT_NEEDED and no static-runtime marker (/cudart.shm.) in .rodata (it may dlopen one)")
    return r


# -- the torch symbol check ---------------------------------------------------------------------


class TorchSymbols:
    """The dynamic symbol tables of one torch's libraries (opened once per scan)."""

    def __init__(self, lib_dir: str) -> None:
        self.lib_dir = lib_dir
        self.tables: List[elfsym.SymbolTable] = []
        self.sig: List[Any] = []
        self._paths: List[str] = []
        try:
            names = sorted(n for n in os.listdir(lib_dir) if TORCH_LIB_RE.match(n))
        except OSError as exc:
            self.error: Optional[str] = "cannot list %s: %s" % (lib_dir, exc.strerror or exc)
            return
        self.error = None if names else "no torch libraries in %s" % lib_dir
        for n in names:
            p = os.path.join(lib_dir, n)
            self._paths.append(p)
            self.sig.append([n, cachefile.stat_sig(p)])

    def missing(self, names: List[str]) -> Tuple[List[str], Optional[str]]:
        if self.error:
            return [], self.error
        if self._paths:  # opened on the first check: a scan whose checks are all cached reads no table
            self.tables = [elfsym.SymbolTable(p) for p in self._paths]
            self._paths = []
        return elfsym.missing_from(names, self.tables)

    def close(self) -> None:
        for t in self.tables:
            t.close()


def demangle(name: str) -> Optional[str]:
    """c++filt's reading of a mangled name (binutils); None when c++filt is not installed."""
    if not name.startswith("_Z"):
        return name
    # only PATH's absolute directories: an empty or relative entry ("", ".") would run a c++filt
    # planted in the current directory, and a name is no reason to run another user's program
    search = os.pathsep.join(d for d in os.environ.get("PATH", "").split(os.pathsep) if os.path.isabs(d))
    tool = which("c++filt", search)
    if tool is None:
        return None
    from cudafix.store import runner  # here, not at import: a warm scan demangles nothing (docs/benchmarks.md)

    try:  # the trusted runner: a c++filt of root's or ours only
        res = runner.run([tool, name], 10, max_output=1 << 16)
    except OSError:
        return None
    out = res.text().strip() if not res.timed_out and res.returncode == 0 else ""
    return out or None


# -- the scan --------------------------------------------------------------------------------------


def _roots(sys_path: List[str], prefix: Optional[str], conda: bool, env: Mapping[str, str],
           tag: Optional[str] = None, root: str = "/", keep: Tuple[str, ...] = ()) -> List[Tuple[str, str]]:
    roots: List[Tuple[str, str]] = []
    # The working directory (sys.path[0] of `python -m`) is where cudafix was started, not the
    # env: walking $HOME is neither wanted nor bounded in time.
    try:
        seen = {os.path.realpath(os.getcwd())}
    except OSError:
        seen = set()
    for p in sys_path:
        if not p or not os.path.isdir(p) or p.endswith(".zip"):
            continue
        real = os.path.realpath(p)
        if real in seen:
            continue
        # The stdlib's lib-dynload holds CPython's own modules: no CUDA, no torch.
        if os.path.basename(real) == "lib-dynload" or re.search(r"/lib/python\d\.\d+$", real):
            continue
        seen.add(real)
        roots.append((p, "site-packages" if os.path.basename(real) in ("site-packages", "dist-packages") else "sys.path"))
    if conda and prefix and os.path.isdir(os.path.join(prefix, "lib")):
        roots.append((os.path.join(prefix, "lib"), "conda lib"))
    for r, _depth in torch_extension_roots(env, tag, root, keep):
        if os.path.isdir(r):
            roots.append((r, "torch extension cache"))
    return roots


def probe_extensions(sys_path: List[str], env: Mapping[str, str], prefix: Optional[str] = None,
                     conda: bool = False, torch_dir: Optional[str] = None,
                     cache_dir: Optional[str] = None, tag: Optional[str] = None, root: str = "/",
                     keep: Tuple[str, ...] = (), workers: int = 1) -> ExtensionInfo:
    """Scan the env (see the module docstring); ``torch_dir`` is the primary torch package dir,
    ``tag`` its extension-cache folder (extension_tag); ``root`` / ``keep``: the probe root and
    the env's own directories (host.machine_path).  ``workers`` > 1: directories are walked
    (dirwalk.walk) and the shared objects the cache does not answer for examined in that many
    processes (cudafix.forks.split_work; the CLI's extension job only)."""
    info = ExtensionInfo(scanned=True)
    probe_root, roots = root, _roots(sys_path, prefix, conda, env, tag, root, keep)
    info.roots = [r for r, _ in roots]
    cache = cachefile.load(cache_dir, CACHE_FILE, CACHE_VERSION) if cache_dir else {}
    dirty = False
    owners = extowners.Owners()
    conda_cache: Dict[str, Tuple[str, str, str]] = {}
    tsyms: Optional[TorchSymbols] = None
    torch_lib = os.path.join(torch_dir, "lib") if torch_dir else None
    seen = set()
    dirs = DirCache(cache_dir, is_shared_object_name)
    todo: List[Tuple[str, str, Any, str, str]] = []  # path, realpath, stat_sig, root, kind: every file to examine
    for root, kind in roots:
        if kind == "conda lib":
            files: Iterator[Tuple[str, str]] = (
                (p, os.path.realpath(p)) for p in (os.path.join(root, n) for n in _listdir(root)
                                                   if is_shared_object_name(n) and not n.startswith(VENDOR_PREFIXES)))
        elif kind == "torch extension cache":
            files = walk(root, dict(torch_extension_roots(env, tag, probe_root, keep)).get(root, 3), dirs)
        else:
            files = walk(root, MAX_DEPTH if kind == "site-packages" else MAX_DEPTH_OTHER, dirs, workers=workers)
        try:
            found = list(files)
        except WalkLimit as exc:
            info.unknown[root] = str(exc)
            found = []
        for path, real in found:
            if real in seen:
                continue
            sig = cachefile.stat_sig(real)  # one stat: is it a regular file, and unchanged?
            if sig is None or not stat.S_ISREG(sig[0]):
                continue
            seen.add(real)
            info.files_seen += 1
            if info.files_seen > MAX_FILES:
                info.unknown["files"] = "more than %d shared objects: the rest were not examined" % MAX_FILES
                break
            todo.append((path, real, sig, root, kind))

    def cached(real: str, sig: Any) -> Optional[Dict[str, Any]]:
        ent = cache.get(real)
        return ent if isinstance(ent, dict) and ent.get("sig") == sig and "facts" in ent else None

    def owner_of(path: str, root: str, kind: str, found: extowners.Owners,
                 conda_found: Dict[str, Tuple[str, str, str]]) -> Tuple[extowners.Owner, List[List[Any]]]:
        owner, deps = extowners.find_owner(path, kind, root, found, prefix if conda else None, conda_found)
        return owner, [[d, cachefile.stat_sig(d)] for d in deps]

    def examine_share(share: List[Tuple[str, str, str, str]]) -> Dict[str, Any]:
        """{real path: (facts, (owner, its dependencies' stats) or None)} of files of a cold scan
        (in a worker, over its own copy of the RECORD and conda-meta caches)."""
        out: Dict[str, Any] = {}
        for path, real, root, kind in share:
            facts = examine(real)
            out[real] = (facts, owner_of(path, root, kind, owners, conda_cache) if facts is not None else None)
        return out

    examined: Dict[str, Any] = {}
    if workers > 1:  # a cold scan's files examined in several processes, each taking the next file when free
        from cudafix import forks

        misses = [((path, real, root, kind), sig[3]) for path, real, sig, root, kind in todo if cached(real, sig) is None]
        examined = forks.split_work(misses, workers, examine_share, PARALLEL_MIN_FILES)
    try:
        for path, real, sig, root, kind in todo:
            ent = cached(real, sig)
            known = None  # the owner a worker found, with its dependencies' stats
            if ent is not None:
                facts = ent["facts"]
            else:
                facts, known = examined[real] if real in examined else (examine(real), None)
                ent = {"sig": sig, "facts": facts}
                cache[real] = ent
                dirty = True
            if facts is None:
                continue
            owner = extowners.cached_owner(ent, path, root)
            if owner is None:
                owner, sigs = known if known is not None else owner_of(path, root, kind, owners, conda_cache)
                # an answer read while a dependency changes is not kept (as the listings: racy)
                if not cachefile.racy([sg for _d, sg in sigs], dirs.started_ns):
                    ent["owner"] = [root, path, list(owner), sigs]
                    dirty = True
            mod = _module(path, kind, facts, owner)
            if mod.torch_linked:
                if torch_lib is None:
                    mod.unknown["torch_symbols"] = "no torch installed to check its torch symbols against"
                else:
                    key = [torch_lib, None]
                    if tsyms is None:
                        tsyms = TorchSymbols(torch_lib)
                    key[1] = tsyms.sig
                    sym = ent.get("symcheck")
                    if not (isinstance(sym, dict) and sym.get("key") == key):
                        missing, err = tsyms.missing(list(facts.get("torch_syms") or ()))
                        if missing and not err:  # defined in its own dependencies (nvfuser/_C: libnvfuser_codegen.so)?
                            missing = _closure_missing(path, torch_dir, missing, env, probe_root, keep)
                        sym = {"key": key, "missing": missing[:MAX_MISSING_KEPT], "count": len(missing), "error": err,
                               "demangled": demangle(missing[0]) if missing else None}
                        if not err:
                            ent["symcheck"] = sym
                            dirty = True
                    _apply_symcheck(mod, sym, torch_lib, len(facts.get("torch_syms") or ()))
                    if mod.missing_torch_symbols_count:
                        _apply_loadcheck(mod, torch_dir, env, probe_root, keep)
            info.modules.append(mod)
    finally:
        if tsyms is not None:
            tsyms.close()
    dirs.save()
    if dirty and cache_dir:
        while len(cache) > CACHE_MAX_ENTRIES:
            cache.pop(next(iter(cache)))
        cachefile.store(cache_dir, CACHE_FILE, CACHE_VERSION, cache)
    info.found_via["modules"] = "ELF headers, .nv_fatbin and dynamic symbols of %d shared objects under %d directories" % (
        info.files_seen, len(roots))
    return info


# Below this many files to examine, more processes cost more than they save.
PARALLEL_MIN_FILES = 32


def _listdir(d: str) -> List[str]:
    try:
        return sorted(os.listdir(d))
    except OSError:
        return []


def _module(path: str, kind: str, facts: Dict[str, Any], owner: extowners.Owner) -> ExtensionModule:
    m = ExtensionModule(path=path, location=kind)
    m.sass = list(facts.get("sass") or ())
    m.ptx = list(facts.get("ptx") or ())
    m.ptx_bytes = {str(k): int(v) for k, v in (facts.get("ptx_bytes") or {}).items()}
    m.ptx_isa = {str(k): str(v) for k, v in (facts.get("ptx_isa") or {}).items()}
    m.fatbin_via = str(facts.get("fatbin_via") or "")
    m.cudart = facts.get("cudart")
    m.cudart_linkage = str(facts.get("cudart_linkage") or "")
    m.cudart_version = facts.get("cudart_version") if isinstance(facts.get("cudart_version"), int) else None
    m.cudart_via = str(facts.get("cudart_via") or "")
    m.unknown = dict(facts.get("unknown") or {})
    m.torch_linked = bool(facts.get("torch_needed") or facts.get("torch_syms"))
    m.package, m.package_version, m.owner_via = owner
    return m


def _apply_symcheck(m: ExtensionModule, sym: Dict[str, Any], torch_lib: str, checked: int) -> None:
    if sym.get("error"):
        m.unknown["torch_symbols"] = str(sym["error"])
        return
    m.checked_against = torch_lib
    m.torch_symbols_checked = checked
    m.missing_torch_symbols = [str(s) for s in sym.get("missing") or ()]
    m.missing_torch_symbols_count = int(sym.get("count") or 0)
    m.missing_demangled = sym.get("demangled")


def _closure_missing(path: str, torch_dir: Optional[str], missing: List[str], env: Mapping[str, str],
                     root: str, keep: Tuple[str, ...]) -> List[str]:
    from cudafix.probes.pyenv.extload import undefined_in_closure

    left, _why = undefined_in_closure(path, torch_dir, missing, env, root=root, keep=keep)
    return missing if left is None else left


def _apply_loadcheck(m: ExtensionModule, torch_dir: Optional[str], env: Mapping[str, str], root: str = "/",
                     keep: Tuple[str, ...] = ()) -> None:
    """ld.so fails on a missing DT_NEEDED library before it binds a symbol: record the first one."""
    from cudafix.probes.pyenv.extload import first_missing_needed

    soname, by, how = first_missing_needed(m.path, torch_dir, env, root=root, keep=keep)
    if soname:
        m.missing_needed, m.missing_needed_by = soname, by
    elif how.startswith("unknown: "):
        m.unknown["needed_libraries"] = how[len("unknown: "):]
