"""Windows PE files (DLL, .pyd, .exe) read the way cudafix.probes.binfmt.elf reads ELF: headers only, bounded.

What cudafix needs from a Windows CUDA stack (docs/windows.md):
- sections: a CUDA DLL's device code lives in ``.nv_fatb`` (an image's section names are 8 bytes:
  MSVC truncates ``.nv_fatbin``), walked by cudafix.probes.binfmt.fatbin like ELF's ``.nv_fatbin``;
- imports: the DLLs it needs at load time (import directory) and on first call (delay-load
  directory): what the Windows loader must find before WinError 126;
- the version resource's VS_FIXEDFILEINFO: nvcuda.dll's file version carries the driver version.

Layout: Microsoft's "PE Format" specification
(https://learn.microsoft.com/en-us/windows/win32/debug/pe-format) and VS_FIXEDFILEINFO
(https://learn.microsoft.com/en-us/windows/win32/api/verrsrc/ns-verrsrc-vs_fixedfileinfo).
Checked against binutils' objdump -p / -h, llvm-readobj --coff-imports and pefile on the DLLs
of real Windows wheels (tests/test_pe.py).  Pure Python, no Windows API: runs on any OS.
"""

from __future__ import annotations

import dataclasses
import os
import struct
from typing import Dict, List, Optional, Tuple

from cudafix.probes.binfmt.elf import ElfError, open_regular

MAX_SECTIONS = 96
MAX_IMPORTS = 4096
MAX_RES_ENTRIES = 4096
MAX_NAME = 512
RT_VERSION = 16
FIXED_SIGNATURE = 0xFEEF04BD
DIR_IMPORT, DIR_RESOURCE, DIR_DELAY = 1, 2, 13


class PeError(Exception):
    """Not a PE file, or a header that does not hold together."""


@dataclasses.dataclass(frozen=True)
class PeSection:
    name: str
    virtual_address: int
    virtual_size: int
    raw_offset: int
    raw_size: int


@dataclasses.dataclass
class PeFile:
    path: str
    machine: int = 0  # 0x8664 x64, 0xAA64 arm64, 0x14C x86
    pe32_plus: bool = True
    image_base: int = 0
    file_size: int = 0
    sections: List[PeSection] = dataclasses.field(default_factory=list)
    imports: List[str] = dataclasses.field(default_factory=list)  # DLL names, file order
    delay_imports: List[str] = dataclasses.field(default_factory=list)
    file_version: Optional[Tuple[int, int, int, int]] = None  # VS_FIXEDFILEINFO dwFileVersionMS/LS
    product_version: Optional[Tuple[int, int, int, int]] = None
    notes: List[str] = dataclasses.field(default_factory=list)  # what could not be read, and why

    def section(self, name: str) -> Optional[PeSection]:
        for s in self.sections:
            if s.name == name:
                return s
        return None

    @property
    def fatbin(self) -> Optional[PeSection]:
        """The device-code section: ``.nv_fatb`` in an image (``.nv_fatbin`` when a string table names it)."""
        return self.section(".nv_fatbin") or self.section(".nv_fatb")


class _Reader:
    def __init__(self, fd: int, size: int) -> None:
        self.fd = fd
        self.size = size

    def read(self, off: int, n: int) -> bytes:
        if off < 0 or n < 0 or off + n > self.size:
            raise PeError("read of %d bytes at %d past the end of the file (%d bytes)" % (n, off, self.size))
        data = os.pread(self.fd, n, off)
        if len(data) != n:
            raise PeError("short read at %d" % off)
        return data


def is_pe(path: str) -> bool:
    """Starts with "MZ"; never blocks (a FIFO or device is not a regular file: False)."""
    try:
        fd, _st = open_regular(path)
    except ElfError:
        return False
    try:
        return os.pread(fd, 2, 0) == b"MZ"
    except OSError:
        return False
    finally:
        os.close(fd)


def read_pe(path: str) -> Tuple[Optional[PeFile], Optional[str]]:
    """(PeFile, None) or (None, reason); never raises."""
    try:
        fd, st = open_regular(path)
    except ElfError as exc:
        return None, str(exc)
    try:
        return _parse(_Reader(fd, st.st_size), path), None
    except (PeError, struct.error, ValueError, OverflowError) as exc:  # a crafted field: this file, not the probe
        return None, "not a readable PE file: %s" % exc
    except OSError as exc:
        return None, "cannot read: %s" % (exc.strerror or exc)
    finally:
        os.close(fd)


def _parse(r: _Reader, path: str) -> PeFile:
    if r.read(0, 2) != b"MZ":
        raise PeError("no MZ signature")
    (lfanew,) = struct.unpack("<I", r.read(0x3C, 4))
    if r.read(lfanew, 4) != b"PE\0\0":
        raise PeError("no PE signature at 0x%x" % lfanew)
    machine, nsec, _ts, symptr, nsyms, optsize, _ch = struct.unpack("<HHIIIHH", r.read(lfanew + 4, 20))
    if nsec > MAX_SECTIONS:
        raise PeError("%d sections" % nsec)
    opt = lfanew + 24
    (magic,) = struct.unpack("<H", r.read(opt, 2))
    if magic not in (0x10B, 0x20B):
        raise PeError("optional header magic 0x%x" % magic)
    pe = PeFile(path=path, machine=machine, pe32_plus=magic == 0x20B, file_size=r.size)
    if pe.pe32_plus:
        (pe.image_base,) = struct.unpack("<Q", r.read(opt + 24, 8))
        ndir_off, dirs_off = opt + 108, opt + 112
    else:
        (pe.image_base,) = struct.unpack("<I", r.read(opt + 28, 4))
        ndir_off, dirs_off = opt + 92, opt + 96
    (ndirs,) = struct.unpack("<I", r.read(ndir_off, 4))
    ndirs = min(ndirs, 16, max(0, (opt + optsize - dirs_off) // 8))
    dirs = [struct.unpack("<II", r.read(dirs_off + 8 * i, 8)) for i in range(ndirs)]
    strtab = symptr + nsyms * 18 if symptr else 0
    for i in range(nsec):
        raw = r.read(opt + optsize + 40 * i, 40)
        name = raw[:8].rstrip(b"\0").decode("utf-8", "replace")
        vsize, va, rsize, roff = struct.unpack("<IIII", raw[8:24])
        # ASCII digits only: str.isdigit() is also true of "²", which int() refuses (issue 36)
        if name.startswith("/") and 0 < len(name) - 1 <= 7 and all(c in "0123456789" for c in name[1:]) and strtab:
            name = _cstr(r, strtab + int(name[1:])) or name  # a long name (mingw images keep a string table)
        pe.sections.append(PeSection(name, va, vsize, roff, rsize))

    def rva(n: int) -> Optional[Tuple[int, int]]:
        return dirs[n] if n < len(dirs) and dirs[n][0] else None

    for n, fill, what in ((DIR_IMPORT, _imports, "imports"), (DIR_DELAY, _delay_imports, "delay imports"),
                          (DIR_RESOURCE, _version, "version resource")):
        d = rva(n)
        if d is None:
            continue
        try:
            fill(r, pe, d[0])
        except (PeError, struct.error) as exc:
            pe.notes.append("%s: %s" % (what, exc))
    return pe


def rva_to_offset(pe: PeFile, rva: int) -> int:
    for s in pe.sections:
        if s.virtual_address <= rva < s.virtual_address + max(s.virtual_size, s.raw_size):
            off = rva - s.virtual_address
            if off >= s.raw_size:
                raise PeError("RVA 0x%x lies in the uninitialised part of %s" % (rva, s.name))
            return s.raw_offset + off
    raise PeError("RVA 0x%x is in no section" % rva)


def _cstr(r: _Reader, off: int) -> str:
    data = os.pread(r.fd, MAX_NAME, off)
    end = data.find(b"\0")
    return (data if end < 0 else data[:end]).decode("utf-8", "replace")


def _imports(r: _Reader, pe: PeFile, rva: int) -> None:
    off = rva_to_offset(pe, rva)
    for i in range(MAX_IMPORTS):
        desc = r.read(off + 20 * i, 20)
        oft, _ts, _fw, name_rva, ft = struct.unpack("<IIIII", desc)
        if not (oft or name_rva or ft):
            return
        pe.imports.append(_cstr(r, rva_to_offset(pe, name_rva)))
    raise PeError("more than %d import descriptors" % MAX_IMPORTS)


def _delay_imports(r: _Reader, pe: PeFile, rva: int) -> None:
    off = rva_to_offset(pe, rva)
    for i in range(MAX_IMPORTS):
        attrs, name, _mod, iat, _int, _b, _u, _ts = struct.unpack("<8I", r.read(off + 32 * i, 32))
        if not (attrs or name or iat):
            return
        if not attrs & 1:  # version 1 (VC 6): the fields are VAs, not RVAs
            name -= pe.image_base & 0xFFFFFFFF
        pe.delay_imports.append(_cstr(r, rva_to_offset(pe, name)))
    raise PeError("more than %d delay-import descriptors" % MAX_IMPORTS)


def _res_entries(r: _Reader, base: int, off: int) -> List[Tuple[int, int]]:
    nnamed, nid = struct.unpack("<HH", r.read(base + off + 12, 4))
    if nnamed + nid > MAX_RES_ENTRIES:
        raise PeError("%d resource entries" % (nnamed + nid))
    return [struct.unpack("<II", r.read(base + off + 16 + 8 * i, 8)) for i in range(nnamed + nid)]


def _version(r: _Reader, pe: PeFile, rva: int) -> None:
    """RT_VERSION -> first name -> first language -> VS_VERSIONINFO -> VS_FIXEDFILEINFO."""
    base = rva_to_offset(pe, rva)
    off = 0
    for level in range(3):
        entries = _res_entries(r, base, off)
        if level == 0:
            entries = [e for e in entries if e[0] == RT_VERSION]
        if not entries:
            return
        target = entries[0][1]
        if level < 2:
            if not target & 0x80000000:
                raise PeError("resource level %d is a leaf" % level)
            off = target & 0x7FFFFFFF
        else:
            if target & 0x80000000:
                raise PeError("resource leaf is a directory")
            data_rva, size = struct.unpack("<II", r.read(base + target, 8))
            blob = r.read(rva_to_offset(pe, data_rva), min(size, 1 << 16))
            at = blob.find(struct.pack("<I", FIXED_SIGNATURE))
            if at < 0 or at + 24 > len(blob):
                raise PeError("VS_VERSIONINFO without VS_FIXEDFILEINFO")
            fms, fls, pms, pls = struct.unpack("<IIII", blob[at + 8:at + 24])
            pe.file_version = (fms >> 16, fms & 0xFFFF, fls >> 16, fls & 0xFFFF)
            pe.product_version = (pms >> 16, pms & 0xFFFF, pls >> 16, pls & 0xFFFF)


def nvidia_driver_version(file_version: Tuple[int, int, int, int]) -> Optional[str]:
    """NVIDIA's Windows file version -> the driver version users see: 32.0.15.6094 -> "560.94".

    The driver number is the last digit of the third field followed by the fourth field
    (27.21.14.5541 is driver 455.41: microsoft/WSL#6423's DirectX log of the 455.41 WSL driver).
    """
    third, fourth = file_version[2], file_version[3]
    if fourth > 9999:
        return None
    digits = "%d%04d" % (third % 10, fourth)
    return "%d.%s" % (int(digits[:3]), digits[3:])


def summary(pe: PeFile) -> Dict[str, object]:
    return {"sections": [s.name for s in pe.sections], "imports": pe.imports, "delay_imports": pe.delay_imports,
            "file_version": ".".join(map(str, pe.file_version)) if pe.file_version else None}
