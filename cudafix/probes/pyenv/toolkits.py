"""CUDA toolkits (nvcc + headers) wherever they are, conda CUDA packages, pip nvidia-* wheels.

Sources: ``/usr/local/cuda*``, ``CUDA_HOME``, ``CUDA_PATH``, ``nvcc`` on PATH, the conda prefix.
``cuda_home`` mirrors ``torch.utils.cpp_extension._find_cuda_home`` (https://github.com/pytorch/pytorch/blob/main/torch/utils/cpp_extension.py):
CUDA_HOME or CUDA_PATH (in that order) -> ``which nvcc``/../.. -> /usr/local/cuda (if it exists).

Version of a toolkit, cheapest first: version.json ("cuda" -> "version", CUDA >= 11.1),
version.txt ("CUDA Version X.Y.Z", older), ``#define CUDA_VERSION`` in include/cuda.h, the conda
record of cuda-nvcc when the toolkit is the conda prefix, and only then ``nvcc --version``
(bounded by a timeout).
"""

from __future__ import annotations

import json
import os
import re
import stat

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Dict, List, Mapping, Optional, Tuple

from cudafix.knowledge import cuda_packages
from cudafix.probes.pyenv import packages
from cudafix.probes.machine.host import describe_oserror, read_text, which
from cudafix.probes.pyenv.packages import _json_object
from cudafix.model.snapshot import CondaPackage, PythonDist, Toolkit, ToolkitInfo
from cudafix.model import cuda as cudaver
from cudafix.model.lazyre import lazy_re

NVCC_TIMEOUT_S = 10.0
MAX_USR_LOCAL_ENTRIES = 256


_CUDA_H_RE = lazy_re(r"^\s*#\s*define\s+CUDA_VERSION\s+(\d+)\s*$", re.M)
_VERSION_TXT_RE = lazy_re(r"CUDA Version\s+(\d+\.\d+(?:\.\d+)*)")
_NVCC_RE = lazy_re(r"release\s+(\d+\.\d+),\s*V(\d+\.\d+(?:\.\d+)*)")
_VERSION_RE = lazy_re(r"^\d+\.\d+(?:\.\d+)*$")


# -- pure parsers -------------------------------------------------------------------------------


def parse_version_json(text: str) -> Optional[str]:
    """CUDA toolkit version.json: {"cuda": {"name": "CUDA SDK", "version": "12.1.1"}, ...}."""
    data = _json_object(text)
    if data is None:
        return None
    cuda = data.get("cuda")
    ver = cuda.get("version") if isinstance(cuda, dict) else None
    return ver if isinstance(ver, str) and _VERSION_RE.match(ver) else None


def parse_version_txt(text: str) -> Optional[str]:
    """Older toolkits' version.txt: "CUDA Version 10.2.89"."""
    m = _VERSION_TXT_RE.search(text)
    return m.group(1) if m else None


def parse_cuda_h(text: str) -> Optional[str]:
    """``#define CUDA_VERSION 13000`` (1000*major + 10*minor) -> "13.0"."""
    m = _CUDA_H_RE.search(text)
    if not m:
        return None
    return cudaver.version_text_or_none(int(m.group(1)))


def parse_nvcc_version(text: str) -> Optional[str]:
    """`nvcc --version`: "Cuda compilation tools, release 13.0, V13.0.88" -> "13.0.88"."""
    m = _NVCC_RE.search(text)
    return m.group(2) if m else None




# -- I/O ----------------------------------------------------------------------------------------


def _stat_reason(path: str) -> Optional[str]:
    """None when ``path`` is a directory we can use, else why not (symlink loops named)."""
    try:
        st = os.stat(path)
    except OSError as exc:
        return describe_oserror(exc)
    return None if stat.S_ISDIR(st.st_mode) else "not a directory"


# -- `nvcc --version` result cache (cudafix.store.cachefile's rules) ------------------------------
#
# The answer is a property of the nvcc file: cached under its path, valid while the stat of its
# real file is unchanged.  A wrapper script (``#!``; e.g. /usr/local/bin/nvcc running
# `exec /usr/local/cuda-13.0/bin/nvcc "$@"`) also depends on what it runs: the key then adds
# PATH, and the deps the stat of every absolute path the script names (its interpreter
# included).  Only versions are cached; failures and timeouts run again next time.

NVCC_CACHE_FILE = "nvcc-cache.json"
NVCC_CACHE_VERSION = 1
NVCC_CACHE_MAX_ENTRIES = 16
_SCRIPT_PATH_RE = lazy_re(rb"(?<![\w$~.})-])/[\w.+@%=,/-]+")


def _nvcc_deps(nvcc: str) -> Tuple[Optional[list], bool]:
    """([path, stat_sig] pairs the output of ``nvcc --version`` depends on, is_script)."""
    from cudafix.store import cachefile

    real = os.path.realpath(nvcc)
    sig = cachefile.stat_sig(real)
    if sig is None:
        return None, False
    deps = [[real, sig]]
    try:
        with open(real, "rb") as fh:
            head = fh.read(8192)
    except OSError:
        return None, False
    script = head.startswith(b"#!")
    if script:
        for m in sorted(set(_SCRIPT_PATH_RE.findall(head)))[:64]:
            p = m.decode("utf-8", "surrogateescape").rstrip("/") or "/"
            deps.append([p, cachefile.stat_sig(p)])
    return deps, script


def cached_nvcc_version(nvcc: str, cache_dir: Optional[str], timeout: float = NVCC_TIMEOUT_S) -> Tuple[Optional[str], Optional[str], bool]:
    """run_nvcc_version through the cache in ``cache_dir``: (version, why-not, from_cache)."""
    if cache_dir is None:
        return run_nvcc_version(nvcc, timeout) + (False,)
    import time

    from cudafix.store import cachefile

    started = time.time_ns()
    deps, script = _nvcc_deps(nvcc)
    key = json.dumps({"nvcc": nvcc, "PATH": os.environ.get("PATH") if script else None}, sort_keys=True)
    entries = cachefile.load(cache_dir, NVCC_CACHE_FILE, NVCC_CACHE_VERSION)
    ent = entries.get(key)
    if (deps is not None and isinstance(ent, dict) and ent.get("deps") == deps
            and isinstance(ent.get("version"), str) and _VERSION_RE.match(ent["version"])):
        return ent["version"], None, True
    ver, why = run_nvcc_version(nvcc, timeout)
    if ver is not None and deps is not None and not cachefile.racy([d[1] for d in deps], started):
        entries.pop(key, None)
        entries[key] = {"deps": deps, "version": ver}
        while len(entries) > NVCC_CACHE_MAX_ENTRIES:
            entries.pop(next(iter(entries)))
        cachefile.store(cache_dir, NVCC_CACHE_FILE, NVCC_CACHE_VERSION, entries)
    return ver, why, False


def run_nvcc_version(nvcc: str, timeout: float = NVCC_TIMEOUT_S) -> Tuple[Optional[str], Optional[str]]:
    import sys

    from cudafix.store import runner  # here: with the nvcc cache warm, `status` needs no subprocess module
    from cudafix.store.safefs import env_owners

    # the trusted runner: an nvcc of root's, ours or the env owner's only (never another user's
    # $CUDA_HOME/bin/nvcc, also not as root), its process group killed on the timeout
    try:
        out = runner.run([nvcc, "--version"], timeout, merge_stderr=True, max_output=1 << 16,
                         owners=env_owners(sys.prefix))
    except runner.RunRefused as exc:
        return None, str(exc)
    except OSError as exc:
        return None, "cannot run %s: %s" % (nvcc, describe_oserror(exc))
    if out.timed_out:
        return None, "`%s --version` timed out after %.0f s" % (nvcc, timeout)
    text = out.text()
    ver = parse_nvcc_version(text)
    return (ver, None) if ver else (None, "`%s --version` printed no release line" % nvcc)


def read_toolkit(path: str, run_nvcc: bool = True, conda_nvcc: Optional[CondaPackage] = None,
                 cache_dir: Optional[str] = None) -> Toolkit:
    """Version and nvcc of the toolkit rooted at ``path`` (recorded, never raised).

    ``cache_dir``: where `nvcc --version` answers are cached (None: always run it).
    """
    real = os.path.realpath(path)
    tk = Toolkit(path=real)
    why = _stat_reason(path)
    if why:
        tk.unknown = "%s: %s" % (path, why)
        return tk
    nvcc = os.path.join(real, "bin", "nvcc")
    if os.path.isfile(nvcc) and os.access(nvcc, os.X_OK):
        tk.nvcc = nvcc
    notes = []
    # the toolkit's own version files, newest format first (version.txt: CUDA <= 11.0)
    for name, parse, limit, missing in (("version.json", parse_version_json, None, "cuda.version"),
                                        ("version.txt", parse_version_txt, 4096, "'CUDA Version'")):
        text, _ = read_text(os.path.join(real, name)) if limit is None else read_text(os.path.join(real, name), limit)
        if text is not None:
            ver = parse(text)
            if ver:
                tk.version, tk.found_via = ver, os.path.join(real, name)
                return tk
            notes.append("%s has no %s" % (name, missing))
    headers = [os.path.join(real, "include", "cuda.h")]
    try:
        for t in sorted(os.listdir(os.path.join(real, "targets")))[:8]:
            headers.append(os.path.join(real, "targets", t, "include", "cuda.h"))
    except OSError:
        pass
    for h in headers:
        text, _ = read_text(h, 256 * 1024)
        if text is not None:
            ver = parse_cuda_h(text)
            if ver:
                tk.version, tk.found_via = ver, "%s (CUDA_VERSION)" % h
                return tk
            notes.append("%s has no CUDA_VERSION" % h)
    if conda_nvcc is not None:
        tk.version, tk.found_via = conda_nvcc.version, conda_nvcc.found_via
        return tk
    if tk.nvcc and run_nvcc:
        ver, why, cached = cached_nvcc_version(tk.nvcc, cache_dir)
        if ver:
            tk.version, tk.found_via = ver, "%s --version%s" % (tk.nvcc, " (cached)" if cached else "")
            return tk
        notes.append(why or "nvcc gave no version")
    tk.unknown = "no toolkit version found in %s (%s)" % (real, "; ".join(notes) or "no version.json, version.txt, include/cuda.h or bin/nvcc")
    return tk


_EXEC_NVCC_RE = lazy_re(rb'^[ \t]*exec[ \t]+"?(/[^"\s]*/bin/nvcc)"?(?:[ \t]|$)', re.M)


def wrapped_nvcc(nvcc: str) -> Optional[str]:
    """The nvcc a wrapper script on PATH execs (``#!/bin/sh`` + ``exec /usr/local/cuda-13.0/bin/nvcc
    "$@"``, as some images install /usr/local/bin/nvcc), or None for a real nvcc or anything else.
    Its toolkit is that nvcc's, not a second one at the wrapper's ../."""
    real = os.path.realpath(nvcc)
    try:
        if os.path.getsize(real) > 4096:
            return None
        with open(real, "rb") as fh:
            head = fh.read(4096)
    except OSError:
        return None
    if not head.startswith(b"#!"):
        return None
    found = _EXEC_NVCC_RE.findall(head)
    if len(found) != 1:
        return None
    target = found[0].decode("utf-8", "surrogateescape")
    if os.path.realpath(target) == real or not (os.path.isfile(target) and os.access(target, os.X_OK)):
        return None
    return target


def find_cuda_home(env: Mapping[str, str], usr_local: str = "/usr/local") -> Tuple[Optional[str], Optional[str]]:
    """What torch.utils.cpp_extension would pick as CUDA_HOME, and via what."""
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if env.get(var):  # `os.environ.get('CUDA_HOME') or ...`: an empty value falls through
            return env[var], var
    nvcc = which("nvcc", env.get("PATH", ""))
    if nvcc:
        return os.path.dirname(os.path.dirname(nvcc)), "PATH nvcc"
    default = os.path.join(usr_local, "cuda")
    if os.path.exists(default):
        return default, "/usr/local/cuda"
    return None, None


def _usr_local_candidates(usr_local: str) -> Tuple[List[str], Dict[str, str]]:
    unknown = {}
    try:
        names = sorted(n for n in os.listdir(usr_local) if n.startswith("cuda"))[:MAX_USR_LOCAL_ENTRIES]
    except OSError as exc:
        return [], {usr_local: describe_oserror(exc)}
    out = []
    for n in names:
        p = os.path.join(usr_local, n)
        why = _stat_reason(p)
        if why:
            unknown[p] = why
            continue
        out.append(p)
    return out, unknown


def list_nvidia_wheels(sys_path: List[str]) -> List[PythonDist]:
    """pip ``nvidia-*`` and ``cuda-toolkit`` distributions on sys_path (name + version from the dir name)."""
    out = []
    seen = set()
    for d in packages.iter_dist_dirs(sys_path):
        if not (d.name.startswith("nvidia-") or d.name in ("cuda-toolkit", "cuda-bindings", "cuda-pathfinder", "cuda-python")):
            continue
        key = (d.name, d.version, d.location)
        if key in seen:
            continue
        seen.add(key)
        out.append(PythonDist(name=d.name, version=d.version, location=d.location,
                              origin=d.installer_origin(), found_via=d.path))
    return out


def probe_toolkits(env: Optional[Mapping[str, str]] = None, prefix: Optional[str] = None,
                   sys_path: Optional[List[str]] = None, usr_local: str = "/usr/local",
                   run_nvcc: bool = True, cache_dir: Optional[str] = None) -> ToolkitInfo:
    env = os.environ if env is None else env
    info = ToolkitInfo()

    # conda packages of the env
    conda_nvcc = None
    if prefix and os.path.isdir(os.path.join(prefix, "conda-meta")):
        pkgs, unk = packages.read_conda_records(prefix, cuda_packages.is_cuda_related_conda)
        info.conda_packages = pkgs
        info.found_via["conda_packages"] = os.path.join(prefix, "conda-meta")
        for k, v in unk.items():
            info.unknown["conda-meta/" + k if not k.startswith("conda") else k] = v
        conda_nvcc = next((p for p in pkgs if p.name == "cuda-nvcc"), None)
    elif prefix:
        info.found_via["conda_packages"] = "not a conda env (no %s)" % os.path.join(prefix, "conda-meta")

    # candidate toolkit roots, each with the names it was seen under
    candidates = []  # type: List[Tuple[str, str]]
    roots, unk = _usr_local_candidates(usr_local)
    for k, v in unk.items():
        info.unknown[k] = v
    candidates += [(p, p) for p in roots]
    for var in ("CUDA_HOME", "CUDA_PATH"):
        val = env.get(var)
        if val is None:
            continue
        if not val:
            info.unknown[var] = "%s is set but empty" % var
            continue
        why = _stat_reason(val)
        if why:
            info.unknown[var] = "%s=%s: %s" % (var, val, why)
            continue
        candidates.append((val, var))
    nvcc = which("nvcc", env.get("PATH", ""))
    if nvcc:
        target = wrapped_nvcc(nvcc)
        root = os.path.dirname(os.path.dirname(os.path.realpath(target or nvcc)))
        candidates.append((root, "PATH nvcc"))
        if target:
            # cpp_extension still takes CUDA_HOME = the wrapper's ../ (find_cuda_home): record that
            # name on the toolkit the wrapper runs, so rules find it there
            candidates.append((root, os.path.dirname(os.path.dirname(nvcc))))
            info.found_via["nvcc"] = "%s (a wrapper that runs %s)" % (nvcc, target)
        else:
            info.found_via["nvcc"] = nvcc
    else:
        info.unknown["nvcc"] = "no nvcc on PATH"
    if prefix and conda_nvcc is not None:
        candidates.append((prefix, "conda"))

    by_real = {}  # type: Dict[str, Toolkit]
    for path, source in candidates:
        real = os.path.realpath(path)
        tk = by_real.get(real)
        if tk is None:
            use_conda = conda_nvcc if prefix and real == os.path.realpath(prefix) else None
            tk = read_toolkit(path, run_nvcc=run_nvcc, conda_nvcc=use_conda, cache_dir=cache_dir)
            by_real[real] = tk
            info.toolkits.append(tk)
        if source not in tk.sources:
            tk.sources.append(source)

    home, via = find_cuda_home(env, usr_local)
    info.cuda_home, info.cuda_home_via = home, via
    if home is None:
        info.unknown["cuda_home"] = "no CUDA_HOME/CUDA_PATH, no nvcc on PATH, no %s" % os.path.join(usr_local, "cuda")

    if sys_path is not None:
        info.nvidia_wheels = list_nvidia_wheels(sys_path)
    return info


__all__ = [
    "parse_version_json", "parse_version_txt", "parse_cuda_h", "parse_nvcc_version",
    "read_toolkit",
    "find_cuda_home", "probe_toolkits", "list_nvidia_wheels",
]
