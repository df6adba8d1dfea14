"""The semantics of CUDA_VISIBLE_DEVICES / CUDA_DEVICE_ORDER, per NVIDIA's "CUDA
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

Pure functions over the snapshot's GPU list: the GPU probe and the rules both use them.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import List, Optional, Tuple

from cudafix.model.record import record
from cudafix.model.snapshot import GPU
from cudafix.model.lazyre import lazy_re

INDEX = "index"
UUID = "uuid"
MIG = "mig"
INVALID = "invalid"

_UUID_RE = lazy_re(r"^GPU-[0-9a-fA-F-]+$")


@record(frozen=True)
class VisibleEntry:
    """One parsed CUDA_VISIBLE_DEVICES entry and the GPU it selects, if any."""

    text: str  # the entry as written (stripped)
    kind: str  # INDEX | UUID | MIG | INVALID (syntax only)
    index: Optional[int] = None  # for INDEX


@record(frozen=True)
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


@record(frozen=True)
class VisibleResult:
    """CUDA_VISIBLE_DEVICES as CUDA reads it: the visible GPUs and where parsing stopped."""

    indices: Optional[List[int]]  # into the gpus list, CUDA order; None = cannot decide
    reason: str  # how it was decided, or why it could not be
    invalid: Tuple[str, ...] = ()  # entries that match no GPU (or are malformed)
    stopped_at: Optional[int] = None  # position of the first entry that stops parsing


def pci_key(g: GPU) -> str:
    bus = (g.pci_bus_id or "").lower()
    # NVML gives "00000000:00:06.0", /proc gives "0000:00:06.0": compare on the last 3 fields.
    return ":".join(bus.split(":")[-2:]) if bus else ""


def cuda_order(gpus: List[GPU], device_order: Optional[str]) -> Tuple[Optional[List[int]], str]:
    """CUDA's enumeration order of all GPUs (as indices into ``gpus``), or None with a reason."""
    n = len(gpus)
    pci = sorted(range(n), key=lambda i: (pci_key(gpus[i]), gpus[i].index))
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
