"""GPUs (status only): NVML when available, else /proc/driver/nvidia/gpus/*/information.

CUDA_VISIBLE_DEVICES / CUDA_DEVICE_ORDER semantics: cudafix/model/visible_devices.py.
"""

from __future__ import annotations

import glob
import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Dict, List, Optional, Tuple

from cudafix.probes.host import join_root, read_text
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


PYCACHE = "pycache"  # under the per-user cache dir (cudafix.store.paths.user_cache_dir)


def import_pynvml(env: Optional[Dict[str, str]] = None):  # type: ignore[no-untyped-def]
    """``import pynvml``; where the env keeps no bytecode of it and Python writes none
    (PYTHONDONTWRITEBYTECODE, as in the H200 image: 60-90 ms of compiling on every `status`), its
    bytecode goes to and comes from cudafix's private per-user cache (``sys.pycache_prefix``
    there, for this one import).  Python itself checks that bytecode against the source's mtime
    and size; a cache directory another user could write (cudafix.store.safefs) is not used."""
    import sys

    if "pynvml" in sys.modules or not sys.dont_write_bytecode or sys.pycache_prefix:
        import pynvml  # type: ignore

        return pynvml
    from importlib.machinery import PathFinder
    from importlib.util import cache_from_source

    spec = PathFinder.find_spec("pynvml")
    origin = getattr(spec, "origin", None) or ""
    prefix = None
    if origin.endswith(".py") and os.path.isabs(origin) and not os.path.exists(cache_from_source(origin)):
        from cudafix.store import paths, safefs

        d = os.path.join(paths.user_cache_dir(env), PYCACHE)
        fd = safefs.open_dir(d, create=True)
        if fd is not None:
            os.close(fd)
            prefix = d
    if prefix is None:
        import pynvml  # type: ignore

        return pynvml
    sys.dont_write_bytecode, sys.pycache_prefix = False, prefix
    try:
        import pynvml  # type: ignore
    finally:
        sys.dont_write_bytecode, sys.pycache_prefix = True, None
    return pynvml


def read_nvml_gpus(keep_nvml: bool = False) -> Tuple[Optional[List[GPU]], Optional[str]]:
    """GPUs via NVML (pynvml, optional), or (None, reason).  Shuts NVML down, unless ``keep_nvml``:
    then the caller does (:func:`shutdown_nvml`; cudafix.probes.ahead, after it has answered).

    pynvml is imported here and only when a driver is present: importing it costs 10-90 ms
    (a ~330 KB module, compiled on every run where no .pyc could be written), and without a
    kernel module nvmlInit can only fail.
    """
    if nvidia_driver_present() is None:
        return None, "no NVIDIA driver loaded (none of %s exists): NVML not queried" % ", ".join(DRIVER_MARKERS)
    try:
        pynvml = import_pynvml()
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
        if not keep_nvml:
            shutdown_nvml()


def shutdown_nvml() -> None:
    """nvmlShutdown, where pynvml was imported (it counts its nvmlInit calls)."""
    import sys

    pynvml = sys.modules.get("pynvml")
    if pynvml is not None:
        try:
            pynvml.nvmlShutdown()
        except Exception:
            pass


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
