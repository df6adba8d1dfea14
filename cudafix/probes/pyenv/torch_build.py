"""Every torch (and torchvision) on a sys.path, read as text — torch is never imported.

Per sys.path entry (in order, so the first is the one ``import torch`` picks):
- the package dir ``torch/`` and its ``version.py`` (``__version__``, ``cuda``, ``hip``,
  ``git_version``), read as ``ast`` reads it, never executed (cudafix/probes/pyenv/versionpy.py);
- the ``torch-*.dist-info`` / ``*.egg-info`` metadata (Version, Requires-Dist, INSTALLER);
- the env's ``conda-meta/pytorch-<ver>-<build>.json`` record (build string, channel, depends);
- the device code in ``torch/lib/libtorch_cuda*.so`` (via cudafix.probes.binfmt.fatbin.scan_fatbin).

Metadata without a package dir (a half-removed install) is listed after the real installs, so
``Snapshot.primary_torch`` stays the one ``import torch`` would load.
"""

from __future__ import annotations

import os
import re

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Dict, List, Optional, Sequence, Tuple

from cudafix.probes.machine.host import read_text
from cudafix.probes.pyenv.packages import (
    DistDir,
    iter_dist_dirs,
    normalize_name,
    path_locations,
    read_conda_records,
)
from cudafix.probes.pyenv.versionpy import parse_version_py
from cudafix.model import versions
from cudafix.model.snapshot import AllocConfKeys, ArchCoverage, CondaPackage, PythonDist, TorchBuild, TorchvisionBuild
from cudafix.model import cuda as cudaver
from cudafix.model.lazyre import lazy_re

# CUDA libraries that carry torch's device code, newest layout first.  torch < 1.13 split
# libtorch_cuda into libtorch_cuda_cu / libtorch_cuda_cpp for a while; linalg is separate since 1.12.
TORCH_CUDA_LIBS = (
    "libtorch_cuda.so",
    "libtorch_cuda_cu.so",
    "libtorch_cuda_cpp.so",
    "libtorch_cuda_linalg.so",
    "libcaffe2_nvrtc.so",
)
# libcaffe2_nvrtc.so has no device code; it is listed to show it is not scanned.
_NO_DEVICE_CODE = frozenset(("libcaffe2_nvrtc.so",))


# -- pure parsers -------------------------------------------------------------------------------


def parse_metadata(text: str) -> Dict[str, List[str]]:
    """RFC 822 header block of METADATA / PKG-INFO -> {header: [values]} (body ignored)."""
    out = {}  # type: Dict[str, List[str]]
    for line in text.splitlines():
        if not line.strip():
            break
        if line[0] in " \t":
            continue
        key, sep, value = line.partition(":")
        if sep:
            out.setdefault(key.strip(), []).append(value.strip())
    return out


def cuda_from_local_version(version: str) -> Optional[str]:
    """"0.11.0+cu113" -> "11.3"; "2.14.1+cu130" -> "13.0"; "+cpu"/no local part -> None."""
    m = re.search(r"\+cu(\d{2,3})\b", version)
    if not m:
        return None
    digits = m.group(1)
    return "%s.%s" % (digits[:-1], digits[-1])


def cuda_from_conda_build(build: str) -> Optional[str]:
    """pytorch channel "py3.8_cuda11.3_cudnn8.2.0_0" -> "11.3"; conda-forge "cuda126_mkl_py312_h.._300"
    -> "12.6"; torchvision "py38_cu113" -> "11.3"; cpu builds -> None."""
    m = re.search(r"(?:^|_)cuda(\d+\.\d+)(?:_|$)", build)
    if m:
        return m.group(1)
    m = re.search(r"(?:^|_)cu(?:da)?(\d{2,3})(?:_|py|$)", build)
    if m:
        d = m.group(1)
        return "%s.%s" % (d[:-1], d[-1])
    return None


def _base_version(v: str) -> str:
    return versions.public(v)


# -- I/O ----------------------------------------------------------------------------------------


def _read_dist(d: DistDir) -> Tuple[PythonDist, Optional[str]]:
    """PythonDist from a dist-info/egg-info; second item: why the metadata could not be read."""
    meta_file = os.path.join(d.path, "METADATA" if d.path.endswith(".dist-info") else "PKG-INFO")
    if d.path.endswith(".egg-info") and os.path.isfile(d.path):
        meta_file = d.path  # an egg-info *file* is the PKG-INFO itself
    text, why = read_text(meta_file, 4 << 20)
    dist = PythonDist(name=d.name, version=d.version, location=d.location, found_via=d.path)
    dist.origin = d.installer_origin()
    if text is None:
        return dist, why
    headers = parse_metadata(text)
    if headers.get("Version"):
        dist.version = headers["Version"][0]
    dist.requires = list(headers.get("Requires-Dist", []))
    if not dist.requires and d.path.endswith(".egg-info") and os.path.isdir(d.path):
        req, _ = read_text(os.path.join(d.path, "requires.txt"), 1 << 20)
        if req:
            dist.requires = [ln.strip() for ln in req.splitlines() if ln.strip() and not ln.startswith("[")]
    return dist, None


def _apply_conda(dist: PythonDist, records: List[CondaPackage], names: Tuple[str, ...]) -> Optional[CondaPackage]:
    base = _base_version(dist.version)
    for rec in records:
        if rec.name in names and _base_version(rec.version) == base:
            dist.origin = "conda"
            dist.conda_build = rec.build
            dist.conda_channel = rec.channel or None
            dist.requires = list(rec.depends) or dist.requires
            dist.found_via = "%s; %s" % (dist.found_via, rec.found_via) if dist.found_via else rec.found_via
            return rec
    return None


def _scan_arch(package_dir: str, cache_dir: Optional[str]) -> Tuple[List[ArchCoverage], Optional[str]]:
    libdir = os.path.join(package_dir, "lib")
    libs = [os.path.join(libdir, n) for n in TORCH_CUDA_LIBS if n not in _NO_DEVICE_CODE and os.path.isfile(os.path.join(libdir, n))]
    if not libs:
        return [], "no libtorch_cuda*.so in %s" % libdir
    try:
        from cudafix.probes.binfmt.fatbin import scan_fatbin  # type: ignore
    except Exception as exc:
        return [], "fatbin scanner unavailable: %s: %s" % (type(exc).__name__, exc)
    out = []
    for lib in libs:
        try:
            out.append(scan_fatbin(lib, cache_dir=cache_dir))
        except Exception as exc:  # the scanner must not raise, but never trust that here
            out.append(ArchCoverage(library=lib, unknown="scan_fatbin raised %s: %s" % (type(exc).__name__, exc)))
    return out, None


def _read_alloc_conf(package_dir: str, names: Sequence[str], cache_dir: Optional[str]) -> AllocConfKeys:
    try:
        from cudafix.knowledge.alloc_conf import KNOWN_NAMES
        from cudafix.probes.pyenv.alloc_conf import read_alloc_keys
    except Exception as exc:
        return AllocConfKeys(unknown="allocator option probe unavailable: %s: %s" % (type(exc).__name__, exc))
    return read_alloc_keys(package_dir, tuple(KNOWN_NAMES) + tuple(names), cache_dir=cache_dir)


def _find_installs(sys_path: List[str], pkg: str) -> List[Tuple[str, Optional[str], List[DistDir]]]:
    """[(location, package_dir or None, [dist dirs])] for ``pkg``; real installs first, in order."""
    real, orphans = [], []
    for loc in path_locations(sys_path):
        pkg_dir = os.path.join(loc, pkg)
        has_pkg = os.path.isdir(pkg_dir) and (
            os.path.isfile(os.path.join(pkg_dir, "__init__.py")) or os.path.isfile(os.path.join(pkg_dir, "version.py")))
        dists = [d for d in iter_dist_dirs([loc]) if d.name == pkg]
        if has_pkg:
            real.append((loc, pkg_dir, dists))
        elif dists:
            orphans.append((loc, None, dists))
    return real + orphans


def _conda_records(prefix: Optional[str]) -> List[CondaPackage]:
    if not prefix or not os.path.isdir(os.path.join(prefix, "conda-meta")):
        return []
    recs, _ = read_conda_records(prefix, wanted=lambda n: n in ("pytorch", "torch", "libtorch", "torchvision"))
    return recs


def _read_version_py(pkg_dir: Optional[str]) -> Tuple[Dict[str, object], Optional[str]]:
    """The literal assignments of <pkg>/version.py, or why there are none."""
    if not pkg_dir:
        return {}, None
    path = os.path.join(pkg_dir, "version.py")
    text, why = read_text(path, 1 << 20)
    if text is None:
        return {}, why
    vp = parse_version_py(text)
    return vp, None if vp else "%s: no literal assignments" % path


def _read_dists(name: str, dists: list, vp: Dict[str, object], loc: str, pkg_dir: Optional[str]) -> list:
    """(PythonDist, why-not) per metadata dir; a stand-in from version.py when there is none."""
    if dists:
        return [_read_dist(d) for d in dists]
    stub = PythonDist(name=name, version=str(vp.get("__version__") or ""), location=loc,
                      found_via="%s/version.py (no dist metadata)" % pkg_dir)
    return [(stub, "no %s-*.dist-info or *.egg-info in %s" % (name, loc))]


def probe_torch(sys_path: List[str], prefix: Optional[str] = None, cache_dir: Optional[str] = None,
                scan_arch: bool = True, conda_records: Optional[List[CondaPackage]] = None,
                alloc_names: Sequence[str] = ()) -> List[TorchBuild]:
    """Every torch on ``sys_path``; ``alloc_names``: the PYTORCH_CUDA_ALLOC_CONF keys the user set,
    looked up (with every allocator option name cudafix knows) in torch's own libraries."""
    records = _conda_records(prefix) if conda_records is None else conda_records
    out = []
    for loc, pkg_dir, dists in _find_installs(sys_path, "torch"):
        vp, vp_why = _read_version_py(pkg_dir)
        for dist, dist_why in _read_dists("torch", dists, vp, loc, pkg_dir):
            tb = TorchBuild(dist=dist, package_dir=pkg_dir)
            _apply_conda(dist, records, ("pytorch", "torch", "libtorch"))
            if dist_why:
                tb.unknown["dist"] = dist_why
            if pkg_dir is None:
                tb.unknown["package_dir"] = "metadata without a torch/ package next to it (%s)" % loc
            elif vp_why:
                tb.unknown["version"] = vp_why
            else:
                vpath = os.path.join(pkg_dir, "version.py")
                ver = vp.get("__version__")
                if isinstance(ver, str):
                    tb.version = ver
                    tb.found_via["version"] = vpath
                else:
                    tb.unknown["version"] = "%s has no __version__" % vpath
                for key in ("cuda", "hip", "git_version"):
                    if key in vp:
                        val = vp[key]
                        setattr(tb, key, None if val is None else str(val))
                        tb.found_via[key] = vpath
                    else:
                        tb.unknown[key] = "%s has no literal %s" % (vpath, key)
            if pkg_dir and scan_arch and (tb.cuda or tb.unknown.get("cuda")):
                tb.arch, why = _scan_arch(pkg_dir, cache_dir)
                if why:
                    tb.unknown["arch"] = why
            elif pkg_dir and scan_arch:
                tb.found_via["arch"] = "not scanned: CPU%s build (version.py cuda is None)" % ("/ROCm" if tb.hip else "")
            if pkg_dir and (tb.cuda or tb.unknown.get("cuda")) and (scan_arch or alloc_names):
                tb.alloc_conf = _read_alloc_conf(pkg_dir, alloc_names, cache_dir)
            out.append(tb)
    return out


def probe_torchvision(sys_path: List[str], prefix: Optional[str] = None,
                      conda_records: Optional[List[CondaPackage]] = None) -> List[TorchvisionBuild]:
    records = _conda_records(prefix) if conda_records is None else conda_records
    out = []
    for loc, pkg_dir, dists in _find_installs(sys_path, "torchvision"):
        vp, vp_why = _read_version_py(pkg_dir)
        for dist, dist_why in _read_dists("torchvision", dists, vp, loc, pkg_dir):
            tv = TorchvisionBuild(dist=dist, package_dir=pkg_dir)
            rec = _apply_conda(dist, records, ("torchvision",))
            if dist_why:
                tv.unknown["dist"] = dist_why
            if pkg_dir is None:
                tv.unknown["package_dir"] = "metadata without a torchvision/ package next to it (%s)" % loc
            elif vp_why:
                tv.unknown["version"] = vp_why
            vpath = os.path.join(pkg_dir, "version.py") if pkg_dir else ""
            ver = vp.get("__version__")
            if isinstance(ver, str):
                tv.version = ver
                tv.found_via["version"] = vpath
            elif "version" not in tv.unknown and pkg_dir:
                tv.unknown["version"] = "%s has no __version__" % vpath
            cuda = vp.get("cuda")
            if isinstance(cuda, int) and not isinstance(cuda, bool):
                tv.cuda, tv.found_via["cuda"] = cudaver.version_text_or_none(cuda), vpath
            elif isinstance(cuda, str):
                tv.cuda, tv.found_via["cuda"] = cuda, vpath
            elif tv.version and cuda_from_local_version(tv.version):
                tv.cuda, tv.found_via["cuda"] = cuda_from_local_version(tv.version), "local version of %s" % tv.version
            elif rec is not None and cuda_from_conda_build(rec.build):
                tv.cuda, tv.found_via["cuda"] = cuda_from_conda_build(rec.build), "conda build string %s" % rec.build
            elif tv.version and ("+cpu" in tv.version or (rec is not None and "cpu" in rec.build)):
                tv.found_via["cuda"] = "CPU build (%s)" % (tv.version if "+cpu" in tv.version else rec.build if rec else "")
            else:
                # torchvision's version.py computes `cuda` at import from its _C extension.
                tv.unknown["cuda"] = "not recorded as text (torchvision sets version.cuda at import time)"
            for req in dist.requires:
                name = re.split(r"[\s=<>!~;\[(]", req, maxsplit=1)[0]
                if normalize_name(name) in ("torch", "pytorch"):
                    tv.requires_torch = req
                    break
            out.append(tv)
    return out


# Companions read for a torch pin (cheap: only names that can be torch add-ons are opened).
_PINNED_SKIP = frozenset(("torch", "pytorch", "torchvision", "torchgen"))
_PIN_RE = lazy_re(r"^\s*(torch|pytorch)\s*\(?\s*==\s*([0-9][0-9A-Za-z.+]*)")


def torch_pin(requires: List[str]) -> Optional[str]:
    """"torch (==2.5.1)" / "torch==2.5.1; extra == 'x'" -> "2.5.1"; None when torch is not pinned exactly."""
    for req in requires:
        if ";" in req and "extra" in req.split(";", 1)[1]:
            continue
        m = _PIN_RE.match(req)
        if m:
            return m.group(2)
    return None


def probe_torch_pinned(sys_path: List[str]) -> List[PythonDist]:
    """Installed torch add-ons (names starting with "torch", and xformers) whose metadata pins torch
    with ==, first install of each name only (the one `import` picks)."""
    out: List[PythonDist] = []
    seen = set()
    for d in iter_dist_dirs(sys_path):
        if d.name in seen or d.name in _PINNED_SKIP or not (d.name.startswith("torch") or d.name == "xformers"):
            continue
        seen.add(d.name)
        dist, _why = _read_dist(d)
        if torch_pin(dist.requires):
            out.append(dist)
    return out
