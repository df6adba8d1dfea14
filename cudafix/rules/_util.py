"""Small pure helpers shared by the rule modules (no I/O, Python 3.8+)."""

from __future__ import annotations

import re
import shlex

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import List, Optional, Sequence, Tuple

from cudafix.model.findings import OK, PROBLEM, UNKNOWN, Outcome
from cudafix.model import versions
from cudafix.model.snapshot import GPU, Snapshot, TorchBuild

MIB = 1024 * 1024
GIB = 1024 * MIB


def ok(message: str, *evidence: str, subject: str = "") -> Outcome:
    return Outcome(OK, message, tuple(e for e in evidence if e), subject=subject)


def unknown(message: str, *evidence: str, subject: str = "") -> Outcome:
    return Outcome(UNKNOWN, message, tuple(e for e in evidence if e), subject=subject)


def problem(message: str, evidence: Sequence[str], fix=None, severity: Optional[str] = None, subject: str = "") -> Outcome:
    return Outcome(PROBLEM, message, tuple(e for e in evidence if e), fix=fix, severity=severity, subject=subject)


def vtuple(text: Optional[str]) -> Tuple[int, ...]:
    """"12.1.105" -> (12, 1, 105); "2.4.1+cu121" -> (2, 4, 1); junk -> ()."""
    return versions.release(text)


def major_minor(text: Optional[str]) -> Optional[Tuple[int, int]]:
    return versions.major_minor(text)


def mm_str(mm: Tuple[int, int]) -> str:
    return "%d.%d" % mm


def base_version(v: Optional[str]) -> str:
    """"2.14.1+cu130" -> "2.14.1"."""
    return versions.public(v)


def fmt_bytes(n: Optional[int]) -> str:
    if n is None:
        return "unknown size"
    if n >= GIB and n % GIB == 0:
        return "%d GiB" % (n // GIB)
    if n >= GIB:
        return "%.1f GiB" % (n / float(GIB))
    if n >= MIB:
        return "%d MiB" % int(round(n / float(MIB)))
    if n >= 1024:
        return "%d KiB" % int(round(n / 1024.0))
    return "%d bytes" % n


def torch_label(t: TorchBuild) -> str:
    """"torch 2.14.1+cu130" (version.py first, else the distribution version)."""
    return "torch %s" % t.full_version


def torch_cuda_mm(t: TorchBuild) -> Optional[Tuple[int, int]]:
    return major_minor(t.cuda) if t.cuda else None


def gpu_label(g: GPU) -> str:
    cc = ""
    if g.compute_capability:
        mm = major_minor(g.compute_capability)
        cc = " (sm_%d%d)" % mm if mm else " (CC %s)" % g.compute_capability
    return "GPU%d %s%s" % (g.index, g.name, cc)


def env_value(snap: Snapshot, name: str) -> Optional[str]:
    """The variable's value, None when unset ('' is a value: set and empty)."""
    return snap.env.get(name)




def driver_cuda_int(snap: Snapshot) -> Tuple[Optional[int], str]:
    """The CUDA version the driver supports (cuDriverGetVersion encoding) and how it is known
    (cudafix.knowledge.compat.driver_cuda)."""
    from cudafix.knowledge import compat

    return compat.driver_cuda(snap)


def no_nvidia(snap: Snapshot) -> bool:
    """No GPU listed and no driver at all (kernel module, libcuda, or an assumed one)."""
    d = snap.driver
    return not snap.gpus.gpus and not d.kernel_version and not d.libcuda_path and not d.wsl and "driver" not in snap.assumed


def nvidia_hardware(snap: Snapshot) -> Optional[bool]:
    """Is there NVIDIA GPU hardware?  Decided from the hardware, not from the driver.

    True: a GPU is listed (NVML, /proc/driver/nvidia or --assume-gpu), or the PCI bus has an
    NVIDIA display/3D device, or WSL's /dev/dxg exists.  False: the PCI bus was read and holds
    none.  None: unknown (a snapshot without the hardware section, or an unreadable PCI bus).
    """
    if snap.gpus.gpus or "gpus" in snap.assumed:
        return True
    hw = snap.hardware
    if hw is None:
        return None
    if hw.nvidia_pci or hw.dxg:
        return True
    if hw.unknown:
        return None
    return False


def hardware_evidence(snap: Snapshot) -> str:
    """One sentence on what the hardware probe saw."""
    hw = snap.hardware
    if hw is None:
        return "the snapshot has no hardware section (written by an older cudafix)"
    if hw.unknown:
        return "PCI bus not readable: %s" % hw.unknown
    if hw.nvidia_pci:
        return "NVIDIA GPU(s) on the PCI bus: %s" % ", ".join(
            "%s (device %s, class %s)" % (d.address, d.device_id or "?", d.pci_class or "?") for d in hw.nvidia_pci)
    if hw.dxg:
        return "/dev/dxg present (WSL 2 GPU paravirtualisation)"
    return "no NVIDIA display/3D device (vendor 0x10de, class 0x03xxxx) on the PCI bus and no /dev/dxg (%s)" % hw.found_via


def driver_version(snap: Snapshot) -> Optional[str]:
    return snap.driver.kernel_version or snap.driver.libcuda_version


def ptx_jit_disabled(snap: Snapshot) -> Optional[str]:
    """Why the driver's PTX JIT is off in this environment (CUDA_DISABLE_PTX_JIT, CUDA_DISABLE_JIT), or None."""
    for name in ("CUDA_DISABLE_PTX_JIT", "CUDA_DISABLE_JIT"):
        if parse_int(env_value(snap, name)):
            return "%s=%s disables the driver's PTX JIT" % (name, env_value(snap, name))
    return None




def unique(seq: Sequence[str]) -> List[str]:
    seen: List[str] = []
    for s in seq:
        if s not in seen:
            seen.append(s)
    return seen


def recommend_commands(snap: Snapshot, gpus: Optional[Sequence[GPU]] = None, native_only: bool = False) -> Tuple[Tuple[str, ...], List[str]]:
    """The command that shows the plan for this env: rules state problems; which torch build to
    install, with every package paired to it, is decided once for all findings by the planner
    (cudafix.plans.planner, `cudafix fix`).  Returns ((command,), notes)."""
    exe = snap.python.executable
    cmd = "cudafix fix" + (" --python %s" % shlex.quote(exe) if exe else "")
    return (cmd,), []


def parse_int(text: Optional[str]) -> Optional[int]:
    if text is None:
        return None
    t = text.strip()
    if re.match(r"^[+-]?\d+$", t):
        return int(t)
    return None




def builds_extensions(snap: Snapshot) -> Optional[str]:
    """Evidence that this env builds CUDA extensions itself (so a build-time problem breaks
    something the user does), or None when the snapshot shows no such build: a module in torch's
    extension cache (torch.utils.cpp_extension.load with ninja, TORCH_EXTENSIONS_DIR), or a
    torch-linked module no installed package owns (built in place by setup.py / pip -e)."""
    for m in snap.extensions.modules:
        if m.location == "torch extension cache":
            return "this env builds extensions: %s is in torch's extension cache (%s)" % (m.path, m.owner_via or "torch.utils.cpp_extension.load")
    for m in snap.extensions.modules:
        if m.torch_linked and not m.package and m.location in ("site-packages", "sys.path"):
            return "this env builds extensions: %s links torch and no installed package owns it (built from source in place)" % m.path
    return None
