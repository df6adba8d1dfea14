"""GPUs (status only): NVML when available, else /proc/driver/nvidia/gpus/*/information.

CUDA_VISIBLE_DEVICES / CUDA_DEVICE_ORDER semantics: cudafix/model/visible_devices.py.
"""

from __future__ import annotations

import glob
import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Dict, List, Optional, Tuple

from cudafix.probes.machine import nvml
from cudafix.probes.machine.host import join_root, read_text
from cudafix.model.snapshot import GPU, GPUInfo
from cudafix.model.visible_devices import pci_key, resolve_visible


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
    gpus.sort(key=pci_key)
    for i, g in enumerate(gpus):
        g.index = i
    if not gpus:
        return [], "%s lists no readable GPU" % base
    return gpus, None


# -- NVML ---------------------------------------------------------------------------------------


def _s(value) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def read_nvml_gpus(keep_nvml: bool = False) -> Tuple[Optional[List[GPU]], Optional[str]]:
    """GPUs via NVML (pynvml, optional), or (None, reason).  Shuts NVML down, unless ``keep_nvml``:
    then the caller does (:func:`cudafix.probes.machine.nvml.shutdown`; cudafix.probes.ahead, after it
    has answered).

    pynvml is imported here and only when a driver is present: importing it is costly (a ~330 KB
    module, compiled on every run where no .pyc could be written: docs/benchmarks.md, "Figures
    behind the code"), and without a
    kernel module nvmlInit can only fail.  NVML starts on a thread meanwhile (nvml.begin).
    """
    if nvml.nvidia_driver_present() is None:
        return None, "no NVIDIA driver loaded (none of %s exists): NVML not queried" % ", ".join(nvml.DRIVER_MARKERS)
    nvml.begin()
    try:
        try:
            pynvml = nvml.import_pynvml()
        except Exception as exc:
            return None, "pynvml (nvidia-ml-py) not importable: %s" % exc
        try:
            pynvml.nvmlInit()
        except Exception as exc:
            return None, "nvmlInit failed: %s" % (_s(exc) or type(exc).__name__)
        return _query(pynvml)
    finally:
        if not keep_nvml:
            nvml.shutdown()


def _query(pynvml) -> Tuple[Optional[List[GPU]], Optional[str]]:  # type: ignore[no-untyped-def]
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


def probe_gpus(env: Optional[Dict[str, str]] = None, root: str = "/", use_nvml: bool = True,
               keep_nvml: bool = False) -> GPUInfo:
    env = dict(os.environ) if env is None else env
    info = GPUInfo()
    gpus = None  # type: Optional[List[GPU]]
    nvml_reason = None
    if use_nvml and root in ("", "/"):
        gpus, nvml_reason = read_nvml_gpus(keep_nvml)
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
