"""Read a libcuda's ``.note.cuda.fwd_compatibility`` ELF note without loading the library.

Every libcuda of the R535+ era carries one (the H200's driver libcuda 580.159.04 and its
cuda-compat 580.95.05 both do, docs/gpu.md): a standard ELF note (namesz, descsz, type, then the
name and the description, each padded to the section's alignment) whose owner is
"NVIDIA Corporation" and whose description is JSON, e.g.
``{"format":1,"CUDA version":"13.0","driver":[535,550,...,580],"device":[1,2,...]}``.
The NVIDIA Container Toolkit (>= 1.20, cmd/nvidia-cdi-hook/cudacompat/cuda-elf-header.go) reads
the same note to decide whether a container's compat libcuda is used; cudafix reads it with its
own ELF reader (no dlopen, no cuInit), and the rule (rules/driver.py) decides the same way.
"""

from __future__ import annotations

import json
import struct

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, List, Optional, Tuple

from cudafix.model.snapshot import FwdCompatNote
from cudafix.probes.binfmt.elf import read_section

SECTION = ".note.cuda.fwd_compatibility"
OWNER = "NVIDIA Corporation"
MAX_NOTE = 1 << 14  # the real note is 140 bytes


def _pad(n: int, align: int) -> int:
    return (n + align - 1) & ~(align - 1)


def parse_note(data: bytes, little_endian: bool = True, align: int = 4) -> Tuple[Optional[Tuple[str, int, bytes]], Optional[str]]:
    """The first note in ``data``: ``((owner, type, desc), None)`` or ``(None, reason)``."""
    end = "<" if little_endian else ">"
    if len(data) < 12:
        return None, "note of %d bytes is shorter than its header" % len(data)
    namesz, descsz, ntype = struct.unpack_from(end + "III", data, 0)
    align = align if align in (4, 8) else 4
    name_end = 12 + namesz
    desc_off = 12 + _pad(namesz, align)
    if name_end > len(data) or desc_off + descsz > len(data):
        return None, "note sizes (name %d, description %d) run past the section's %d bytes" % (namesz, descsz, len(data))
    owner = data[12:name_end].rstrip(b"\0").decode("utf-8", "replace")
    return (owner, ntype, data[desc_off:desc_off + descsz]), None


def _ints(value: Any) -> Optional[List[int]]:
    if not isinstance(value, list) or not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        return None
    return list(value)


def parse_fwd_desc(path: str, desc: bytes) -> Tuple[Optional[FwdCompatNote], Optional[str]]:
    """The JSON description as a FwdCompatNote, or ``(None, reason)``."""
    try:
        doc = json.loads(desc.rstrip(b"\0").decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        return None, "%s of %s is not JSON: %s" % (SECTION, path, exc)
    if not isinstance(doc, dict):
        return None, "%s of %s is not a JSON object" % (SECTION, path)
    drivers = _ints(doc.get("driver"))
    if drivers is None:
        return None, "%s of %s has no list of driver branches" % (SECTION, path)
    fmt = doc.get("format")
    cuda = doc.get("CUDA version")
    return FwdCompatNote(
        path=path,
        format=fmt if isinstance(fmt, int) and not isinstance(fmt, bool) else None,
        cuda_version=cuda if isinstance(cuda, str) else None,
        driver=drivers,
        device=_ints(doc.get("device")) or [],
    ), None


def read_fwd_note(path: str) -> Tuple[Optional[FwdCompatNote], Optional[str]]:
    """``(note, None)`` or ``(None, reason)`` for the libcuda at ``path``.  Never raises."""
    data, elf, why = read_section(path, SECTION, MAX_NOTE)
    if data is None:
        return None, "%s: %s" % (path, why)
    got, why = parse_note(data, elf.little_endian if elf else True, elf.sections[SECTION].align if elf else 4)
    if got is None:
        return None, "%s of %s: %s" % (SECTION, path, why)
    owner, _ntype, desc = got
    if owner != OWNER:
        return None, "%s of %s is owned by %r, not %r" % (SECTION, path, owner, OWNER)
    return parse_fwd_desc(path, desc)
