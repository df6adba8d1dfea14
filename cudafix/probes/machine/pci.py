"""NVIDIA GPU hardware from the PCI bus: is there an NVIDIA GPU at all, with or without a driver?

The answer must not come from the driver (a machine whose driver is missing is exactly the
case to tell apart from a machine without any NVIDIA GPU).  Linux lists every PCI function in
sysfs with its vendor and class (https://www.kernel.org/doc/html/latest/PCI/sysfs-pci.html);
NVIDIA's PCI vendor id is 0x10de and GPUs use base class 0x03 (display controller: 0x0300 VGA,
0x0302 3D controller for data-center GPUs; https://pci-ids.ucw.cz/read/PD/03).  WSL 2 exposes
no PCI device for the GPU but /dev/dxg, its GPU paravirtualisation device
(https://devblogs.microsoft.com/directx/directx-heart-linux/).
"""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import List, Optional, Tuple

from cudafix.model.snapshot import Hardware, PciDevice
from cudafix.probes.machine.host import describe_oserror, join_root, read_text

PCI_DEVICES = "/sys/bus/pci/devices"
DXG = "/dev/dxg"
NVIDIA_VENDOR = 0x10DE
DISPLAY_BASE_CLASS = 0x03
MAX_PCI_FUNCTIONS = 4096  # a bound on what we read; real machines have a few hundred at most


def _hex(text: Optional[str]) -> Optional[int]:
    try:
        return int((text or "").strip(), 16)
    except ValueError:
        return None


def is_nvidia_gpu(vendor: Optional[int], pci_class: Optional[int]) -> bool:
    """Vendor 0x10de and base class 0x03 (the class file is 0xCCSSPP: class, subclass, prog-if)."""
    return vendor == NVIDIA_VENDOR and pci_class is not None and (pci_class >> 16) == DISPLAY_BASE_CLASS


def list_nvidia_pci(root: str = "/") -> Tuple[Optional[List[PciDevice]], str]:
    """(devices, found_via) or (None, why) when the PCI bus cannot be listed."""
    base = join_root(root, PCI_DEVICES)
    try:
        names = sorted(os.listdir(base))[:MAX_PCI_FUNCTIONS]
    except OSError as exc:
        return None, "%s: %s" % (base, describe_oserror(exc))
    out: List[PciDevice] = []
    for name in names:
        d = os.path.join(base, name)
        vendor_text, _ = read_text(os.path.join(d, "vendor"), 64)
        if _hex(vendor_text) != NVIDIA_VENDOR:
            continue
        class_text, _ = read_text(os.path.join(d, "class"), 64)
        if not is_nvidia_gpu(NVIDIA_VENDOR, _hex(class_text)):
            continue  # NVIDIA's HDMI audio, USB-C and bridge functions are not GPUs
        device_text, _ = read_text(os.path.join(d, "device"), 64)
        out.append(PciDevice(address=name, device_id=(device_text or "").strip(), pci_class=(class_text or "").strip()))
    return out, "%s (%d PCI functions read)" % (PCI_DEVICES, len(names))


def probe_hardware(root: str = "/") -> Hardware:
    """NVIDIA GPUs on the PCI bus and WSL's /dev/dxg; never raises for a missing file."""
    hw = Hardware()
    hw.dxg = os.path.exists(join_root(root, DXG))
    devices, via = list_nvidia_pci(root)
    if devices is None:
        if hw.dxg:
            hw.found_via = DXG
        else:
            hw.unknown = via
        return hw
    hw.nvidia_pci = devices
    hw.found_via = via + ("; %s present" % DXG if hw.dxg else "")
    return hw


__all__ = ["probe_hardware", "list_nvidia_pci", "is_nvidia_gpu", "NVIDIA_VENDOR"]
