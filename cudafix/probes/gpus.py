"""GPUs (status only): NVML when available, else /proc/driver/nvidia/gpus/*/information.

Also the pure semantics of CUDA_VISIBLE_DEVICES / CUDA_DEVICE_ORDER, per NVIDIA's "CUDA
Environment Variables" (CUDA Programming Guide appendix,
https://docs.nvidia.com/cuda/cuda-programming-guide/05-appendices/environment-variables.html):

- unset: every GPU is visible; empty string: none is;
- a comma-separated list of integer indices, GPU UUIDs (``GPU-8932f937-...``, or a unique
  prefix such as ``GPU-8932f937``) or a MIG instance (``MIG-<GPU-UUID>/<GI>/<CI>`` / ``MIG-<uuid>``);
- "If an invalid index is encountered, only devices with indices that appear before the invalid
  index in the list are visible" (``0,2,-1,1`` -> 0 and 2);
- the list order is the CUDA enumeration order (``2,1``: device 2 becomes ordinal 0);
- CUDA_DEVICE_ORDER: FASTEST_FIRST (default, "a simple heuristic") or PCI_BUS_ID.

Assumptions (not stated by NVIDIA, kept explicit): spaces around an entry are ignored; an index
is decimal digits only; a duplicate entry is treated as undecidable.
"""

from __future__ import annotations

import dataclasses
import glob
import os
import re
from typing import Dict, List, Optional, Tuple

from cudafix.probes.host import join_root, read_text
from cudafix.model.snapshot import GPU, GPUInfo

INDEX = "index"
UUID = "uuid"
MIG = "mig"
INVALID = "invalid"

_UUID_RE = re.compile(r"^GPU-[0-9a-fA-F-]+$")


@dataclasses.dataclass(frozen=True)
class VisibleEntry:
    """One parsed CUDA_VISIBLE_DEVICES entry and the GPU it selects, if any."""

    text: str  # the entry as written (stripped)
    kind: str  # INDEX | UUID | MIG | INVALID (syntax only)
    index: Optional[int] = None  # for INDEX


@dataclasses.dataclass(frozen=True)
class VisibleDevicesSpec:
    """CUDA_VISIBLE_DEVICES, parsed without knowing the GPUs."""

    is_set: bool
    raw: Optional[str]
    entries: Tuple[VisibleEntry, ...] = ()
    # Position of the first syntactically invalid entry (parsing stops there), else None.
    stopped_at: Optional[int] = None

    @property
    def hides_all(self) -> bool:
        """True when no entry can be used whatever the GPUs (empty, or the first entry invalid)."""
        return self.is_set and (not self.entries or self.stopped_at == 0)


def parse_cuda_visible_devices(value: Optional[str]) -> VisibleDevicesSpec:
    """Pure parse of a CUDA_VISIBLE_DEVICES value (None = unset)."""
    if value is None:
        return VisibleDevicesSpec(is_set=False, raw=None)
    if value.strip() == "":
        return VisibleDevicesSpec(is_set=True, raw=value, entries=(), stopped_at=None)
    entries = []
    stopped = None
    for pos, part in enumerate(value.split(",")):
        text = part.strip()
        if text.isdigit() and text.isascii():
            entry = VisibleEntry(text, INDEX, int(text))
        elif text.startswith("MIG-") and len(text) > 4:
            entry = VisibleEntry(text, MIG)
        elif _UUID_RE.match(text) and len(text) > 4:
            entry = VisibleEntry(text, UUID)
        else:
            entry = VisibleEntry(text, INVALID)
            if stopped is None:
                stopped = pos
        entries.append(entry)
    return VisibleDevicesSpec(is_set=True, raw=value, entries=tuple(entries), stopped_at=stopped)


@dataclasses.dataclass(frozen=True)
class VisibleResult:
    """CUDA_VISIBLE_DEVICES as CUDA reads it: the visible GPUs and where parsing stopped."""

    indices: Optional[List[int]]  # into the gpus list, CUDA order; None = cannot decide
    reason: str  # how it was decided, or why it could not be
    invalid: Tuple[str, ...] = ()  # entries that match no GPU (or are malformed)
    stopped_at: Optional[int] = None  # position of the first entry that stops parsing


def _pci_key(g: GPU) -> str:
    bus = (g.pci_bus_id or "").lower()
    # NVML gives "00000000:00:06.0", /proc gives "0000:00:06.0": compare on the last 3 fields.
    return ":".join(bus.split(":")[-2:]) if bus else ""


def cuda_order(gpus: List[GPU], device_order: Optional[str]) -> Tuple[Optional[List[int]], str]:
    """CUDA's enumeration order of all GPUs (as indices into ``gpus``), or None with a reason."""
    n = len(gpus)
    pci = sorted(range(n), key=lambda i: (_pci_key(gpus[i]), gpus[i].index))
    order = (device_order or "").strip().upper()
    if order == "PCI_BUS_ID":
        return pci, "CUDA_DEVICE_ORDER=PCI_BUS_ID: PCI bus order"
    label = "CUDA_DEVICE_ORDER unset" if not order else "CUDA_DEVICE_ORDER=%s" % device_order
    if order not in ("", "FASTEST_FIRST"):
        label += " (not a documented value; CUDA's default FASTEST_FIRST assumed)"
    if n <= 1:
        return pci, label + (": one GPU" if n else ": no GPU found")
    names = {(g.name, g.compute_capability) for g in gpus}
    if len(names) == 1:
        return pci, label + ": FASTEST_FIRST over identical GPUs, assumed to keep PCI bus order"
    return None, label + ": FASTEST_FIRST order of different GPU models cannot be decided without CUDA"


def resolve_visible(gpus: List[GPU], cuda_visible_devices: Optional[str], device_order: Optional[str] = None) -> VisibleResult:
    spec = parse_cuda_visible_devices(cuda_visible_devices)
    order, order_reason = cuda_order(gpus, device_order)
    if not spec.is_set:
        if order is None:
            return VisibleResult(None, "CUDA_VISIBLE_DEVICES unset: all GPUs visible, but " + order_reason)
        return VisibleResult(order, "CUDA_VISIBLE_DEVICES unset: all GPUs visible; " + order_reason)
    if not spec.entries:
        return VisibleResult([], "CUDA_VISIBLE_DEVICES is empty: no GPU is visible")
    result = []  # type: List[int]
    invalid = []  # type: List[str]
    stopped = None
    for pos, entry in enumerate(spec.entries):
        if entry.kind == INVALID:
            invalid.append(entry.text)
            stopped = pos
            break
        if entry.kind == MIG:
            return VisibleResult(None, "CUDA_VISIBLE_DEVICES selects MIG instance %s; MIG instances are not enumerated by cudafix" % entry.text)
        if entry.kind == INDEX:
            assert entry.index is not None
            if entry.index >= len(gpus):
                invalid.append(entry.text)
                stopped = pos
                break
            if order is None:
                return VisibleResult(None, "CUDA_VISIBLE_DEVICES uses indices, which follow CUDA's order; " + order_reason)
            idx = order[entry.index]
        else:  # UUID or unique prefix
            if any(not g.uuid for g in gpus):
                return VisibleResult(None, "CUDA_VISIBLE_DEVICES uses UUIDs but some GPU UUIDs are unknown")
            matches = [i for i, g in enumerate(gpus) if (g.uuid or "").lower().startswith(entry.text.lower())]
            if len(matches) != 1:
                invalid.append(entry.text)
                stopped = pos
                break
            idx = matches[0]
        if idx in result:
            return VisibleResult(None, "CUDA_VISIBLE_DEVICES names GPU %d twice (%s); CUDA's handling of duplicates is not documented" % (gpus[idx].index, entry.text))
        result.append(idx)
    if stopped is not None:
        reason = "CUDA_VISIBLE_DEVICES=%r: entry %r matches no GPU, parsing stops there" % (spec.raw, invalid[0])
    else:
        reason = "CUDA_VISIBLE_DEVICES=%r: list order" % spec.raw
    return VisibleResult(result, reason, tuple(invalid), stopped)


def visible_indices(gpus: List[GPU], cuda_visible_devices: Optional[str], device_order: Optional[str] = None) -> Optional[List[int]]:
    """Indices into ``gpus`` that CUDA enumerates, in CUDA order; None when it cannot be decided."""
    return resolve_visible(gpus, cuda_visible_devices, device_order).indices


# -- /proc/driver/nvidia/gpus/<bus>/information ------------------------------------------------


def parse_gpu_information(text: str) -> Dict[str, str]:
    """'Key: \\t value' lines of /proc/driver/nvidia/gpus/*/information -> dict."""
    out = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip():
            out[key.strip()] = value.strip()
    return out


def read_proc_gpus(root: str = "/", limit: int = 256) -> Tuple[List[GPU], Optional[str]]:
    """GPUs listed by the kernel module (no NVML), in PCI bus order, or ([], reason)."""
    base = join_root(root, "/proc/driver/nvidia/gpus")
    if not os.path.isdir(base):
        return [], "%s does not exist" % base
    gpus = []
    for d in sorted(glob.glob(os.path.join(base, "*")))[:limit]:
        text, why = read_text(os.path.join(d, "information"), 65536)
        if text is None:
            continue
        fields = parse_gpu_information(text)
        name = fields.get("Model")
        if not name:
            continue
        gpus.append(GPU(
            index=0,
            name=name,
            uuid=fields.get("GPU UUID") or None,
            pci_bus_id=fields.get("Bus Location") or os.path.basename(d),
            found_via="/proc/driver/nvidia/gpus/%s/information" % os.path.basename(d),
        ))
    gpus.sort(key=_pci_key)
    for i, g in enumerate(gpus):
        g.index = i
    if not gpus:
        return [], "%s lists no readable GPU" % base
    return gpus, None


# -- NVML ---------------------------------------------------------------------------------------


def _s(value) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


# Where an NVIDIA GPU driver shows itself without loading anything: the kernel module (also the
# open one) in sysfs / procfs, Jetson's nvgpu, and WSL2 (no nvidia module: the host driver is
# reached through /dev/dxg, its user-space libraries live in /usr/lib/wsl/lib).
DRIVER_MARKERS = ("/sys/module/nvidia", "/proc/driver/nvidia", "/sys/module/nvgpu", "/dev/dxg", "/usr/lib/wsl/lib")


def nvidia_driver_present(root: str = "/") -> Optional[str]:
    """The first DRIVER_MARKERS path that exists (``None``: no NVIDIA driver on this machine)."""
    for marker in DRIVER_MARKERS:
        if os.path.exists(join_root(root, marker)):
            return marker
    return None


def read_nvml_gpus() -> Tuple[Optional[List[GPU]], Optional[str]]:
    """GPUs via NVML (pynvml, optional), or (None, reason).  Always shuts NVML down.

    pynvml is imported here and only when a driver is present: importing it costs 10-90 ms
    (a ~330 KB module, compiled on every run where no .pyc could be written), and without a
    kernel module nvmlInit can only fail.
    """
    if nvidia_driver_present() is None:
        return None, "no NVIDIA driver loaded (none of %s exists): NVML not queried" % ", ".join(DRIVER_MARKERS)
    try:
        import pynvml  # type: ignore
    except Exception as exc:
        return None, "pynvml (nvidia-ml-py) not importable: %s" % exc
    try:
        pynvml.nvmlInit()
    except Exception as exc:
        return None, "nvmlInit failed: %s" % (_s(exc) or type(exc).__name__)
    try:
        gpus = []
        count = pynvml.nvmlDeviceGetCount()
        for i in range(count):
            h = pynvml.nvmlDeviceGetHandleByIndex(i)
            g = GPU(index=i, name=_s(pynvml.nvmlDeviceGetName(h)), found_via="NVML")
            for attr, fn in (
                ("compute_capability", lambda h=h: "%d.%d" % tuple(pynvml.nvmlDeviceGetCudaComputeCapability(h))),
                ("memory_mib", lambda h=h: int(pynvml.nvmlDeviceGetMemoryInfo(h).total) // (1024 * 1024)),
                ("uuid", lambda h=h: _s(pynvml.nvmlDeviceGetUUID(h))),
                ("pci_bus_id", lambda h=h: _s(pynvml.nvmlDeviceGetPciInfo(h).busId)),
                ("mig_mode", lambda h=h: bool(pynvml.nvmlDeviceGetMigMode(h)[0])),
            ):
                try:
                    setattr(g, attr, fn())
                except Exception:  # e.g. NVML_ERROR_NOT_SUPPORTED for MIG on older GPUs
                    pass
            gpus.append(g)
        return gpus, None
    except Exception as exc:
        return None, "NVML query failed: %s" % (_s(exc) or type(exc).__name__)
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:
            pass


def probe_gpus(env: Optional[Dict[str, str]] = None, root: str = "/", use_nvml: bool = True) -> GPUInfo:
    env = dict(os.environ) if env is None else env
    info = GPUInfo()
    gpus = None  # type: Optional[List[GPU]]
    nvml_reason = None
    if use_nvml and root in ("", "/"):
        gpus, nvml_reason = read_nvml_gpus()
    elif use_nvml:
        nvml_reason = "NVML not used under a test root"
    else:
        nvml_reason = "NVML not used"
    if gpus is not None:
        info.found_via["gpus"] = "NVML"
    else:
        info.unknown["nvml"] = nvml_reason or "unknown"
        gpus, why = read_proc_gpus(root)
        if gpus:
            info.found_via["gpus"] = "/proc/driver/nvidia/gpus/*/information"
            info.unknown["compute_capability"] = "not in /proc (needs NVML)"
        else:
            info.unknown["gpus"] = "no GPU found: NVML: %s; /proc: %s" % (nvml_reason, why)
    info.gpus = gpus or []
    res = resolve_visible(info.gpus, env.get("CUDA_VISIBLE_DEVICES"), env.get("CUDA_DEVICE_ORDER"))
    info.visible = res.indices
    if res.indices is None:
        info.unknown["visible"] = res.reason
    else:
        info.found_via["visible"] = res.reason
    return info
