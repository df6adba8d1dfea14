"""The Snapshot: everything cudafix knows about one machine + one Python environment.

Plain data only.  Probes (cudafix.probes) fill it, rules (cudafix.rules) read it, and it
round-trips through JSON (`cudafix snapshot` / `--from FILE`) so every rule can be tested on
states recorded on real machines.

Conventions shared by every section:
- ``found_via``: how a value was found (a path, an API name, an env var), keyed by field name.
- ``unknown``: why a value could not be determined, keyed by field name.  ``unknown`` is a
  first-class answer: a rule that needs an unknown value answers "unknown", never "ok".
"""

from __future__ import annotations

import dataclasses
import json
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Dict, List, Optional

from cudafix.model.install import TorchImport
from cudafix.model.platform import WindowsInfo, WslInfo
from cudafix.model.record import asdict as record_asdict
from cudafix.model.record import record

SCHEMA = "cudafix.snapshot/1"
REPORT_SOURCE = "pasted report"  # Snapshot.source of one built from a pasted report (cudafix/paste/build.py)


def _field_dict() -> Dict[str, str]:
    return {}


@record
class FwdCompatNote:
    """A libcuda's own ``.note.cuda.fwd_compatibility`` ELF note (owner "NVIDIA Corporation"):
    which kernel-module branches this library runs on as a forward-compat copy."""

    path: str  # the libcuda file it was read from (realpath)
    format: Optional[int] = None  # the note's "format"
    cuda_version: Optional[str] = None  # its "CUDA version" ("13.0")
    driver: List[int] = dataclasses.field(default_factory=list)  # kernel-module branches it supports (535, 550, ...)
    device: List[int] = dataclasses.field(default_factory=list)  # recorded as written; its numbering is not documented


@record
class DriverInfo:
    """The NVIDIA driver: kernel module, user-space libcuda, and the CUDA version it supports."""

    kernel_version: Optional[str] = None  # "580.95.05", from /sys/module/nvidia/version
    libcuda_path: Optional[str] = None  # the libcuda.so.1 the loader picks (realpath)
    libcuda_version: Optional[str] = None  # "580.95.05", from the file name libcuda.so.<ver>
    cuda_version: Optional[int] = None  # cuDriverGetVersion without cuInit: 13000 = CUDA 13.0
    nvml_version: Optional[str] = None  # libnvidia-ml.so.<ver>, when found
    compat_libcuda: List[str] = dataclasses.field(default_factory=list)  # cuda-compat copies on the loader path
    # the picked libcuda's .note.cuda.fwd_compatibility; None: not read (see unknown["libcuda_fwd_note"])
    libcuda_fwd_note: Optional[FwdCompatNote] = None
    wsl: bool = False
    found_via: Dict[str, str] = dataclasses.field(default_factory=_field_dict)
    unknown: Dict[str, str] = dataclasses.field(default_factory=_field_dict)


@record
class GPU:
    """One NVIDIA GPU as NVML (or /proc/driver/nvidia) reports it."""

    index: int  # nvidia-smi index (PCI bus order)
    name: str
    compute_capability: Optional[str] = None  # "9.0"
    memory_mib: Optional[int] = None
    uuid: Optional[str] = None
    pci_bus_id: Optional[str] = None
    mig_mode: Optional[bool] = None
    found_via: str = ""


@record
class PciDevice:
    """One NVIDIA display/3D controller on the PCI bus (read from sysfs, no driver needed)."""

    address: str  # "0000:01:00.0"
    device_id: str = ""  # "0x2335"
    pci_class: str = ""  # "0x030200"


@record
class Hardware:
    """Whether the machine has NVIDIA GPU hardware at all, decided without the driver.

    PCI vendor 0x10de with a display class (0x03xxxx) under /sys/bus/pci/devices, plus WSL's
    /dev/dxg (GPU paravirtualisation: the Windows host's GPU).  A snapshot without this section
    (written by an older cudafix) has ``Snapshot.hardware = None``: unknown, never "no GPU".
    """

    nvidia_pci: List[PciDevice] = dataclasses.field(default_factory=list)
    dxg: bool = False  # /dev/dxg exists (WSL 2)
    found_via: str = ""  # what was read
    unknown: Optional[str] = None  # why the PCI bus could not be read (then nothing is known)


@record
class GPUInfo:
    """The GPUs of the machine and which of them CUDA will enumerate."""

    gpus: List[GPU] = dataclasses.field(default_factory=list)
    # Indices (into ``gpus``) CUDA will enumerate, in CUDA order, given CUDA_VISIBLE_DEVICES /
    # CUDA_DEVICE_ORDER; None when it cannot be decided.
    visible: Optional[List[int]] = None
    found_via: Dict[str, str] = dataclasses.field(default_factory=_field_dict)
    unknown: Dict[str, str] = dataclasses.field(default_factory=_field_dict)


@record
class ArchCoverage:
    """Device code really present in a CUDA library (read from its .nv_fatbin section)."""

    library: str = ""  # path of the scanned file
    sass: List[str] = dataclasses.field(default_factory=list)  # ["sm_75", "sm_90", "sm_100a", ...]
    ptx: List[str] = dataclasses.field(default_factory=list)  # ["compute_37", ...]
    largest_ptx_bytes: Optional[int] = None  # sum of PTX sizes per arch, max over archs (JIT cache sizing)
    ptx_bytes: Dict[str, int] = dataclasses.field(default_factory=dict)  # compute_XY -> total PTX bytes
    found_via: str = ""
    unknown: Optional[str] = None
    # compute_XY -> the newest PTX ISA version of its entries ("9.2"); absent = not read (an older
    # snapshot): the driver's JIT accepts PTX up to its own CUDA release's ISA (cudafix/knowledge/compat.py)
    ptx_isa: Dict[str, str] = dataclasses.field(default_factory=dict)


@record
class PythonDist:
    """An installed distribution (torch, torchvision, nvidia-*)."""

    name: str
    version: str
    location: str = ""  # the site-packages (or prefix) it was found in
    origin: str = "unknown"  # "pip" | "conda" | "unknown"
    conda_build: Optional[str] = None  # conda build string, e.g. py3.8_cuda11.3_cudnn8.2.0_0
    conda_channel: Optional[str] = None
    requires: List[str] = dataclasses.field(default_factory=list)  # Requires-Dist / conda depends
    found_via: str = ""


@record
class AllocConfKeys:
    """Which PYTORCH_CUDA_ALLOC_CONF option names the installed torch's own parser spells out,
    read from the strings of its libraries (cudafix.probes.pyenv.alloc_conf; docs/alloc-conf.md)."""

    libraries: List[str] = dataclasses.field(default_factory=list)  # the files read (libc10_cuda.so, libc10.so)
    parser: str = ""  # "regex" (1.x), "lexer" (<= 2.8), "tokenizer" (2.9+): how torch splits the value
    max_split_check: Optional[str] = None  # ">" or ">=" from "max_split_size_mb too small, must be > "
    accepted: List[str] = dataclasses.field(default_factory=list)  # names the parser compares against
    rejected: List[str] = dataclasses.field(default_factory=list)  # names looked up and not in the parser
    uncertain: List[str] = dataclasses.field(default_factory=list)  # only as a string's tail or in pieces
    found_via: str = ""
    unknown: Optional[str] = None  # why the names could not be read (then: cudafix's cited table)


class _Installed:
    """What a torch / torchvision installation says about its version (not a dataclass: a mixin)."""

    version: Optional[str]
    dist: "PythonDist"

    @property
    def full_version(self) -> Optional[str]:
        """The version as the user sees it: version.py's ("2.14.1+cu130"), else the dist's."""
        return self.version or self.dist.version


@record
class TorchBuild(_Installed):
    """One torch installation found on sys.path (there may be several: a problem of its own)."""

    dist: PythonDist
    package_dir: Optional[str] = None  # .../site-packages/torch
    version: Optional[str] = None  # torch/version.py __version__ ("2.14.1+cu130")
    cuda: Optional[str] = None  # torch/version.py cuda ("13.0"), None for CPU builds
    hip: Optional[str] = None
    git_version: Optional[str] = None
    arch: List[ArchCoverage] = dataclasses.field(default_factory=list)  # per scanned library
    # PYTORCH_CUDA_ALLOC_CONF names read from torch's libraries; None: not read (old snapshot, CPU build)
    alloc_conf: Optional[AllocConfKeys] = None
    unknown: Dict[str, str] = dataclasses.field(default_factory=_field_dict)
    found_via: Dict[str, str] = dataclasses.field(default_factory=_field_dict)


@record
class TorchvisionBuild(_Installed):
    """One torchvision installation found on sys.path."""

    dist: PythonDist
    package_dir: Optional[str] = None
    version: Optional[str] = None  # torchvision/version.py __version__ ("0.29.1+cu130")
    cuda: Optional[str] = None  # "13.0" when version.py records a CUDA build
    requires_torch: Optional[str] = None  # "torch==2.14.1" from Requires-Dist
    unknown: Dict[str, str] = dataclasses.field(default_factory=_field_dict)
    found_via: Dict[str, str] = dataclasses.field(default_factory=_field_dict)


@record
class Toolkit:
    """A CUDA toolkit install (nvcc + headers), wherever it came from."""

    path: str
    version: Optional[str] = None  # "12.1.105" (version.json) or "12.1" (nvcc / version.txt)
    nvcc: Optional[str] = None
    sources: List[str] = dataclasses.field(default_factory=list)  # "CUDA_HOME", "/usr/local/cuda*", "PATH", "conda"
    found_via: str = ""
    unknown: Optional[str] = None


@record
class CondaPackage:
    """A CUDA-related record of the env's conda-meta/."""

    name: str
    version: str
    build: str = ""
    channel: str = ""
    depends: List[str] = dataclasses.field(default_factory=list)
    found_via: str = ""


@record
class ToolkitInfo:
    """CUDA toolkits, the CUDA_HOME extension builds use, conda CUDA packages and nvidia-* wheels."""

    toolkits: List[Toolkit] = dataclasses.field(default_factory=list)
    cuda_home: Optional[str] = None  # what torch.utils.cpp_extension would pick (CUDA_HOME > CUDA_PATH > nvcc > /usr/local/cuda)
    cuda_home_via: Optional[str] = None  # "CUDA_HOME" | "CUDA_PATH" | "PATH nvcc" | "/usr/local/cuda"
    conda_packages: List[CondaPackage] = dataclasses.field(default_factory=list)  # CUDA-related records of conda-meta
    nvidia_wheels: List[PythonDist] = dataclasses.field(default_factory=list)  # pip nvidia-* / cuda-toolkit dists
    found_via: Dict[str, str] = dataclasses.field(default_factory=_field_dict)
    unknown: Dict[str, str] = dataclasses.field(default_factory=_field_dict)


@record
class LibraryResolution:
    """Which file the glibc loader would load for one soname torch needs."""

    soname: str  # "libnvJitLink.so.13"
    requested_by: str  # path of the object whose DT_NEEDED (or dlopen) asks for it
    how: str = "needed"  # "needed" | "dlopen"
    resolved: Optional[str] = None  # the file the loader picks in this environment
    resolved_via: Optional[str] = None  # "DT_RPATH", "LD_LIBRARY_PATH", "DT_RUNPATH", "ld.so.cache", "default dirs", "loaded"
    resolved_version: Optional[str] = None  # version from the real file name, e.g. "13.0.88"
    expected: Optional[str] = None  # torch's own copy: what resolves without LD_LIBRARY_PATH
    expected_version: Optional[str] = None
    others: List[str] = dataclasses.field(default_factory=list)  # other copies seen on the machine
    unknown: Optional[str] = None
    # resolved through LD_PRELOAD: the entries of LD_PRELOAD that name the resolved file
    preloaded_as: List[str] = dataclasses.field(default_factory=list)


@record
class LibraryInfo:
    """Which file the loader picks for each CUDA library torch needs."""

    resolutions: List[LibraryResolution] = dataclasses.field(default_factory=list)
    ld_library_path: List[str] = dataclasses.field(default_factory=list)
    found_via: Dict[str, str] = dataclasses.field(default_factory=_field_dict)
    unknown: Dict[str, str] = dataclasses.field(default_factory=_field_dict)


@record
class JitCache:
    """The driver's PTX JIT cache: where, how big, usable or not."""

    path: Optional[str] = None  # CUDA_CACHE_PATH or ~/.nv/ComputeCache
    maxsize: Optional[int] = None  # effective CUDA_CACHE_MAXSIZE in bytes
    maxsize_via: Optional[str] = None  # "CUDA_CACHE_MAXSIZE" | "driver default"
    disabled: bool = False
    writable: Optional[bool] = None
    used_bytes: Optional[int] = None
    unknown: Dict[str, str] = dataclasses.field(default_factory=_field_dict)


@record
class NodeInfo:
    """Which machine of a cluster this is, and what NCCL can use on it (docs/fleet.md)."""

    hostname: Optional[str] = None
    engine: Optional[str] = None  # "slurm" | "ray" | "kubernetes" | None (not under a cluster engine)
    node_id: Optional[str] = None  # the engine's own id: SLURMD_NODENAME, Ray's node id, the k8s node name
    net_interfaces: Optional[List[str]] = None  # /sys/class/net (NCCL_SOCKET_IFNAME names these)
    ib_devices: Optional[List[str]] = None  # /sys/class/infiniband (NCCL_IB_HCA names these)
    # what NCCL can really use (None: not probed, e.g. an older snapshot): interfaces with an
    # IPv4/IPv6 address that are running (getifaddrs, as NCCL); active RDMA ports "mlx5_0:1"
    socket_interfaces: Optional[List[str]] = None
    ib_ports: Optional[List[str]] = None
    found_via: Dict[str, str] = dataclasses.field(default_factory=_field_dict)
    unknown: Dict[str, str] = dataclasses.field(default_factory=_field_dict)


@record
class ExtensionModule:
    """One CUDA-bearing or torch-linked shared object the env can import (not torch's own libraries)."""

    path: str
    package: Optional[str] = None  # owning distribution / conda package / torch extension name
    package_version: Optional[str] = None
    owner_via: str = ""  # "RECORD of torchvision-0.29.1.dist-info", "conda-meta/x.json", ...
    location: str = ""  # "site-packages" | "sys.path" | "conda lib" | "torch extension cache"
    sass: List[str] = dataclasses.field(default_factory=list)
    ptx: List[str] = dataclasses.field(default_factory=list)
    ptx_bytes: Dict[str, int] = dataclasses.field(default_factory=dict)
    fatbin_via: str = ""
    cudart: Optional[str] = None  # CUDA major it was built against: "13" (DT_NEEDED libcudart.so.13)
    cudart_linkage: str = ""  # "shared" | "static" | "none" ("" = unknown)
    cudart_via: str = ""
    cudart_version: Optional[int] = None  # a static runtime's CUDART_VERSION (13000 = 13.0), read from its code
    torch_linked: bool = False  # DT_NEEDED names libc10 / libtorch* (its torch symbols are checked)
    torch_symbols_checked: int = 0  # how many torch symbols were looked up
    missing_torch_symbols: List[str] = dataclasses.field(default_factory=list)  # first few, loader order, mangled
    missing_torch_symbols_count: int = 0
    missing_demangled: Optional[str] = None  # the first missing symbol, demangled
    checked_against: Optional[str] = None  # the torch/lib directory the symbols were looked up in
    # The first DT_NEEDED library ld.so cannot find when this module is loaded after `import torch`
    # (breadth first, as ld.so maps them, before any symbol is bound; cudafix.probes.pyenv.extload);
    # looked up only for modules with missing torch symbols.  None: none missing, or not looked up.
    missing_needed: Optional[str] = None
    missing_needed_by: str = ""  # the object whose DT_NEEDED names it (the module or one of its libraries)
    unknown: Dict[str, str] = dataclasses.field(default_factory=_field_dict)
    ptx_isa: Dict[str, str] = dataclasses.field(default_factory=dict)  # compute_XY -> PTX ISA ("9.2"); as ArchCoverage.ptx_isa


@record
class ExtensionInfo:
    """Every extension module found on the target interpreter's sys.path, conda lib/ and torch's
    extension cache.  Added to schema /1 (docs/snapshot.md): older snapshots load with scanned=False."""

    modules: List[ExtensionModule] = dataclasses.field(default_factory=list)
    roots: List[str] = dataclasses.field(default_factory=list)  # directories scanned
    files_seen: int = 0  # shared objects examined
    scanned: bool = False  # False: no scan in this snapshot (old file, or the probe failed)
    found_via: Dict[str, str] = dataclasses.field(default_factory=_field_dict)
    unknown: Dict[str, str] = dataclasses.field(default_factory=_field_dict)


@record
class PythonInfo:
    """The interpreter whose environment was inspected."""

    executable: str = ""
    version: str = ""  # "3.8.18"
    prefix: str = ""
    conda_prefix: Optional[str] = None  # set when the prefix is a conda env (has conda-meta/)
    platform: str = ""  # "linux-x86_64"


@record
class Snapshot:
    """The whole recorded state: machine, env, torch build, libraries, variables."""

    schema: str = SCHEMA
    created: str = ""  # ISO 8601 UTC
    cudafix_version: str = ""
    source: str = ""  # "probed" | a fixture's provenance ("recorded on H200 device machine", ...)
    host: Dict[str, str] = dataclasses.field(default_factory=_field_dict)  # os, kernel, glibc, machine
    node: NodeInfo = dataclasses.field(default_factory=NodeInfo)  # cluster identity (absent in older files: unknown)
    python: PythonInfo = dataclasses.field(default_factory=PythonInfo)
    driver: DriverInfo = dataclasses.field(default_factory=DriverInfo)
    gpus: GPUInfo = dataclasses.field(default_factory=GPUInfo)
    torch: List[TorchBuild] = dataclasses.field(default_factory=list)
    torchvision: List[TorchvisionBuild] = dataclasses.field(default_factory=list)
    toolkits: ToolkitInfo = dataclasses.field(default_factory=ToolkitInfo)
    libraries: LibraryInfo = dataclasses.field(default_factory=LibraryInfo)
    jit_cache: JitCache = dataclasses.field(default_factory=JitCache)
    extensions: ExtensionInfo = dataclasses.field(default_factory=ExtensionInfo)
    env: Dict[str, str] = dataclasses.field(default_factory=_field_dict)  # the CUDA/torch variables that are set
    assumed: Dict[str, Any] = dataclasses.field(default_factory=dict)  # what --assume-* replaced
    probe_errors: Dict[str, str] = dataclasses.field(default_factory=_field_dict)  # probe name -> error
    hardware: Optional[Hardware] = None  # None: not probed (older snapshot) -- unknown
    wsl: WslInfo = dataclasses.field(default_factory=WslInfo)  # probed=False in older files: unknown
    windows: WindowsInfo = dataclasses.field(default_factory=WindowsInfo)
    # Other installed distributions that pin torch exactly (torchaudio, torchtext, xformers ...):
    # a torch change must move them too (cudafix.plans.planner).
    torch_pinned: List[PythonDist] = dataclasses.field(default_factory=list)
    torch_import: TorchImport = dataclasses.field(default_factory=TorchImport)  # cudafix.model.install

    # -- JSON round trip -------------------------------------------------------------------

    def to_dict(self) -> Dict[str, Any]:
        return record_asdict(self)  # dataclasses.asdict's dict, faster (cudafix/model/record.py)

    def to_json(self, indent: Optional[int] = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent, sort_keys=False)

    @classmethod
    def from_dict(cls, data: Dict[str, Any]) -> "Snapshot":
        schema = data.get("schema")
        if schema != SCHEMA:
            raise SnapshotError("unsupported snapshot schema %r (expected %r)" % (schema, SCHEMA))
        return _build(cls, data)

    @classmethod
    def from_json(cls, text: str) -> "Snapshot":
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise SnapshotError("not a JSON snapshot: %s" % exc) from None
        if not isinstance(data, dict):
            raise SnapshotError("not a JSON snapshot: top level is not an object")
        return cls.from_dict(data)

    @classmethod
    def load(cls, path: str) -> "Snapshot":
        try:
            with open(path, encoding="utf-8") as fh:
                text = fh.read()
        except (OSError, UnicodeDecodeError) as exc:
            raise SnapshotError("cannot read snapshot %s: %s" % (path, exc)) from None
        return cls.from_json(text)

    # -- convenience for rules -------------------------------------------------------------

    @property
    def primary_torch(self) -> Optional[TorchBuild]:
        """The torch that `import torch` would pick: the first on sys.path."""
        return self.torch[0] if self.torch else None

    def visible_gpus(self) -> List[GPU]:
        if self.gpus.visible is None:
            return list(self.gpus.gpus)
        by_index = {i: g for i, g in enumerate(self.gpus.gpus)}
        return [by_index[i] for i in self.gpus.visible if i in by_index]


class SnapshotError(ValueError):
    """A snapshot file that cannot be used; the message is one line for the user."""


# -- generic dataclass builder (typing-driven, Python 3.8 compatible) ---------------------

_HINTS: Dict[type, Dict[str, Any]] = {}


def _hints(cls: type) -> Dict[str, Any]:
    if cls not in _HINTS:
        import typing  # only to read a snapshot: `status` on this machine builds one without it (issue 23)

        # the annotations' names: typing's (the modules import them for the type checker only)
        # and the class's own module's (model.platform too)
        names = dict(vars(typing))
        names.update(vars(sys.modules[cls.__module__]))
        _HINTS[cls] = typing.get_type_hints(cls, names)
    return _HINTS[cls]


def _convert(tp: Any, value: Any) -> Any:
    import typing  # a dict lookup: _hints imported it

    origin = getattr(tp, "__origin__", None)
    args = getattr(tp, "__args__", ()) or ()
    if value is None:
        if tp is typing.Any or (origin is typing.Union and type(None) in args):
            return None
        # null where the model has no None: every reader would crash on it (a malformed file)
        raise SnapshotError("expected %s, got null" % (getattr(tp, "__name__", None) or tp))
    if origin is typing.Union:  # Optional[X]
        inner = [a for a in args if a is not type(None)]
        return _convert(inner[0], value) if len(inner) == 1 else value
    if origin in (list, typing.List):
        if not isinstance(value, list):
            raise SnapshotError("expected a list, got %r" % type(value).__name__)
        return [_convert(args[0], v) for v in value] if args else list(value)
    if origin in (dict, typing.Dict):
        if not isinstance(value, dict):
            raise SnapshotError("expected an object, got %r" % type(value).__name__)
        return {k: _convert(args[1], v) for k, v in value.items()} if args else dict(value)
    if dataclasses.is_dataclass(tp):
        if not isinstance(value, dict):
            raise SnapshotError("expected an object for %s" % tp.__name__)
        return _build(tp, value)
    if tp is int and isinstance(value, bool):
        raise SnapshotError("expected an integer, got a boolean")
    if tp in (int, float, str, bool) and not isinstance(value, tp):
        if tp is float and isinstance(value, int):
            return float(value)
        raise SnapshotError("expected %s, got %r" % (tp.__name__, value))
    return value


def _build(cls: type, data: Dict[str, Any]) -> Any:
    hints = _hints(cls)
    kwargs = {}
    for f in dataclasses.fields(cls):
        if f.name in data:
            try:
                kwargs[f.name] = _convert(hints[f.name], data[f.name])
            except SnapshotError as exc:
                raise SnapshotError("%s.%s: %s" % (cls.__name__, f.name, exc)) from None
    # Unknown keys are ignored on purpose: a newer cudafix may add fields to schema /1.
    try:
        return cls(**kwargs)
    except TypeError as exc:
        raise SnapshotError("%s: %s" % (cls.__name__, exc)) from None
