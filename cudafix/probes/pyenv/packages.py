"""What is installed: Python distributions on sys.path (*.dist-info / *.egg-info) and conda's
prefix records (conda-meta/*.json).  Read by the torch, toolkit and extension probes alike."""

from __future__ import annotations

import json
import os
import re
import time

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Tuple

from cudafix.knowledge import cuda_packages
from cudafix.model.record import record
from cudafix.model.snapshot import CondaPackage
from cudafix.probes.machine.host import describe_oserror, read_text
from cudafix.store import cachefile

MAX_SYS_PATH = 256
MAX_DIR_ENTRIES = 100000
MAX_CONDA_META_FILES = 5000


# -- Python distributions -----------------------------------------------------------------------


normalize_name = cuda_packages.normalize  # PEP 503: "Nvidia_CUBLAS" -> "nvidia-cublas"


@record
class DistDir:
    """A *.dist-info or *.egg-info directory found on sys.path."""

    name: str  # normalized
    version: str
    path: str  # the .dist-info / .egg-info path
    location: str  # the sys.path entry holding it

    def installer(self) -> Optional[str]:
        if not self.path.endswith(".dist-info"):
            return None
        text, _ = read_text(os.path.join(self.path, "INSTALLER"), 256)
        return text.strip() if text and text.strip() else None

    def installer_origin(self) -> str:
        inst = self.installer()
        if inst is None:
            return "unknown"
        return "conda" if inst.lower() == "conda" else "pip"


def parse_dist_dirname(dirname: str) -> Optional[Tuple[str, str]]:
    """"torch-2.14.1+cu130.dist-info" -> ("torch", "2.14.1+cu130");
    "torch-1.10.0-py3.8.egg-info" -> ("torch", "1.10.0")."""
    for suffix in (".dist-info", ".egg-info"):
        if dirname.endswith(suffix):
            stem = dirname[: -len(suffix)]
            break
    else:
        return None
    parts = stem.split("-")
    if len(parts) < 2 or not parts[0] or not parts[1]:
        return None
    return normalize_name(parts[0]), parts[1]


def path_locations(sys_path: List[str]) -> Iterator[str]:
    """The directories of sys_path's first MAX_SYS_PATH entries, absolute ('' is the cwd), each once."""
    seen = set()
    for entry in sys_path[:MAX_SYS_PATH]:
        loc = os.path.abspath(entry) if entry else os.getcwd()
        if loc not in seen:
            seen.add(loc)
            yield loc


# directory -> (its stat signature, its metadata directory names): one `status` lists sys.path for
# the torch, torchvision, pinned-package and NVIDIA-wheel probes; a directory whose entries changed
# has another signature (cudafix/probes/pyenv/dirwalk.py says why), one changed too recently is not kept.
_NAMES_MEMO: Dict[str, Tuple[Any, List[str]]] = {}


def _dist_names(loc: str) -> Optional[List[str]]:
    sig = cachefile.stat_sig(loc)
    hit = _NAMES_MEMO.get(loc)
    if hit is not None and sig is not None and hit[0] == sig:
        return hit[1]
    try:
        it = os.scandir(loc)
    except OSError:
        return None
    names = []
    with it:
        for i, de in enumerate(it):
            if i >= MAX_DIR_ENTRIES:
                break
            if de.name.endswith((".dist-info", ".egg-info")):
                names.append(de.name)
    names.sort()
    if sig is not None and not cachefile.racy([sig], time.time_ns()):
        _NAMES_MEMO[loc] = (sig, names)
    return names


def iter_dist_dirs(sys_path: List[str]) -> Iterator[DistDir]:
    """Every *.dist-info / *.egg-info on sys_path, in sys.path order (cheap: names only)."""
    for loc in path_locations(sys_path):
        names = _dist_names(loc)
        if names is None:
            continue
        for n in names:
            parsed = parse_dist_dirname(n)
            if parsed:
                yield DistDir(parsed[0], parsed[1], os.path.join(loc, n), loc)


# -- conda prefix records -----------------------------------------------------------------------


def _json_object(text: str) -> Optional[dict]:
    """``text`` parsed as a JSON object, or None (not JSON, or not an object)."""
    try:
        data = json.loads(text)
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def parse_conda_record_filename(filename: str) -> Optional[Tuple[str, str, str]]:
    """"pytorch-1.10.0-py3.8_cuda11.3_cudnn8.2.0_0.json" -> (name, version, build)."""
    if not filename.endswith(".json"):
        return None
    parts = filename[: -len(".json")].rsplit("-", 2)
    if len(parts) != 3 or not all(parts):
        return None
    return parts[0], parts[1], parts[2]


def short_channel(record: Mapping) -> str:
    """Channel name from a conda-meta record: "schannel", else the channel URL without its subdir."""
    sch = record.get("schannel")
    if isinstance(sch, str) and sch:
        return sch
    ch = record.get("channel")
    if not isinstance(ch, str) or not ch:
        return ""
    ch = ch.rstrip("/")
    parts = ch.split("/")
    if parts and re.match(r"^(noarch|linux-\w+|osx-\w+|win-\w+)$", parts[-1]):
        parts = parts[:-1]
    if "://" in ch:
        # https://conda.anaconda.org/pytorch -> pytorch ; https://repo.anaconda.com/pkgs/main -> pkgs/main
        tail = parts[3:] if len(parts) > 3 else parts[-1:]
        return "/".join(tail)
    return "/".join(parts)


def parse_conda_record(text: str, filename: str = "") -> Optional[CondaPackage]:
    """One ``conda-meta/<name>-<version>-<build>.json`` prefix record -> CondaPackage."""
    data = _json_object(text)
    if data is None:
        return None
    from_name = parse_conda_record_filename(os.path.basename(filename)) if filename else None
    name = data.get("name") or (from_name[0] if from_name else None)
    version = data.get("version") or (from_name[1] if from_name else None)
    build = data.get("build") or data.get("build_string") or (from_name[2] if from_name else "")
    if not isinstance(name, str) or not isinstance(version, str):
        return None
    depends = data.get("depends")
    return CondaPackage(
        name=name,
        version=version,
        build=build if isinstance(build, str) else "",
        channel=short_channel(data),
        depends=[d for d in depends if isinstance(d, str)] if isinstance(depends, list) else [],
        found_via="conda-meta/%s" % os.path.basename(filename) if filename else "conda-meta",
    )


def read_conda_records(prefix: str, wanted: Callable[[str], bool]) -> Tuple[List[CondaPackage], Dict[str, str]]:
    """The records of ``<prefix>/conda-meta`` whose package name is wanted (only those are parsed)."""
    meta = os.path.join(prefix, "conda-meta")
    unknown = {}  # type: Dict[str, str]
    try:
        names = sorted(os.listdir(meta))[:MAX_CONDA_META_FILES]
    except OSError as exc:
        return [], {"conda_packages": "%s: %s" % (meta, describe_oserror(exc))}
    out = []
    for fn in names:
        parsed = parse_conda_record_filename(fn)
        if not parsed or not wanted(parsed[0]):
            continue
        text, why = read_text(os.path.join(meta, fn), 64 << 20)
        if text is None:
            unknown[fn] = why or "unreadable"
            continue
        rec = parse_conda_record(text, fn)
        if rec is None:
            unknown[fn] = "not a conda prefix record (bad JSON)"
            continue
        out.append(rec)
    return out, unknown
