"""A small, bounded, pure-Python ELF reader: what the dynamic loader and the fatbin scanner need.

Reads ELF32/ELF64, little and big endian: the header (class, data, machine), section headers by
name, and the dynamic segment (DT_NEEDED, DT_SONAME, DT_RPATH, DT_RUNPATH, DT_FLAGS_1).
Everything is read with ``os.pread`` at known offsets, never the whole file (libtorch_cuda.so is
~500 MB).  Bad input never raises out of :func:`read_elf`: the answer is ``(None, reason)``.
Opening uses O_NONBLOCK and refuses non-regular files, so a FIFO named ``libfoo.so`` cannot hang us.
"""

from __future__ import annotations

import dataclasses
import os
import stat
import struct

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Dict, List, Optional, Tuple

from cudafix.model.record import record

ELF_MAGIC = b"\x7fELF"

# e_machine values we name in messages (others are reported by number).
EM_386 = 3
EM_X86_64 = 62
EM_AARCH64 = 183
EM_PPC64 = 21

# Dynamic tags (elf.h).
DT_NULL = 0
DT_NEEDED = 1
DT_STRTAB = 5
DT_STRSZ = 10
DT_SONAME = 14
DT_RPATH = 15
DT_RUNPATH = 29
DT_FLAGS_1 = 0x6FFFFFFB
DF_1_NODEFLIB = 0x800  # -z nodeflib: the loader skips ld.so.cache and the default dirs

PT_LOAD = 1
PT_DYNAMIC = 2
SHT_NOBITS = 8

# Bounds: real CUDA libraries have < 100 sections and < 200 dynamic entries; anything far
# beyond these is a corrupt or hostile file, not something worth reading.
MAX_SECTIONS = 65536
MAX_PHDRS = 4096
MAX_DYN_BYTES = 1 << 20
MAX_SHSTRTAB = 4 << 20
MAX_STRING = 64 << 10


@record(frozen=True)
class Section:
    """One ELF section header (name, file offset, size)."""

    name: str
    type: int
    addr: int
    offset: int  # file offset
    size: int
    align: int = 0  # sh_addralign (note entries are padded to it)


@record
class ElfFile:
    """What cudafix reads from one ELF file: class, machine, sections, dynamic entries."""

    path: str
    elf_class: int  # 32 or 64
    little_endian: bool
    machine: int  # e_machine
    etype: int  # e_type (2 EXEC, 3 DYN)
    file_size: int
    sections: Dict[str, Section] = dataclasses.field(default_factory=dict)  # first section of each name
    needed: List[str] = dataclasses.field(default_factory=list)
    soname: Optional[str] = None
    rpath: Optional[str] = None  # raw DT_RPATH string (':'-separated, DSTs unexpanded)
    runpath: Optional[str] = None  # raw DT_RUNPATH string
    flags_1: int = 0
    dynamic_note: Optional[str] = None  # why the dynamic section could not be read, if so

    @property
    def nodeflib(self) -> bool:
        return bool(self.flags_1 & DF_1_NODEFLIB)

    def compatible_with(self, other: "ElfFile") -> bool:
        """The loader only accepts objects of the same class, byte order and machine."""
        return (self.elf_class, self.little_endian, self.machine) == (
            other.elf_class,
            other.little_endian,
            other.machine,
        )


class ElfError(Exception):
    """Internal: a reason why a file cannot be read as ELF (never escapes the public API)."""


class _Reader:
    """pread with bounds checks against the file size."""

    def __init__(self, fd: int, size: int, path: str) -> None:
        self.fd = fd
        self.size = size
        self.path = path

    def read(self, offset: int, length: int, what: str) -> bytes:
        if offset < 0 or length < 0 or offset + length > self.size:
            raise ElfError("truncated: %s at offset %d (+%d) beyond file size %d" % (what, offset, length, self.size))
        data = os.pread(self.fd, length, offset)
        if len(data) != length:
            raise ElfError("short read of %s at offset %d" % (what, offset))
        return data

    def cstring(self, offset: int, limit: int, what: str) -> str:
        """A NUL-terminated string starting at ``offset``, at most ``limit`` bytes."""
        limit = min(limit, MAX_STRING, self.size - offset)
        if offset < 0 or limit <= 0:
            raise ElfError("%s: string offset %d outside the file" % (what, offset))
        chunk = os.pread(self.fd, limit, offset)
        end = chunk.find(b"\0")
        if end < 0:
            raise ElfError("%s: unterminated string at offset %d" % (what, offset))
        return chunk[:end].decode("utf-8", "surrogateescape")


def open_regular(path: str) -> Tuple[int, os.stat_result]:
    """Open a regular file read-only without blocking on FIFOs/devices; raise ElfError otherwise."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise ElfError("cannot open: %s" % (exc.strerror or exc)) from None
    except ValueError as exc:  # an embedded NUL byte in the path (e.g. from a hostile env value)
        raise ElfError("cannot open: %s" % exc) from None
    try:
        st = os.fstat(fd)
    except OSError as exc:
        os.close(fd)
        raise ElfError("cannot stat: %s" % (exc.strerror or exc)) from None
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise ElfError("not a regular file")
    return fd, st


def read_elf(path: str, with_sections: bool = True, with_dynamic: bool = True) -> Tuple[Optional[ElfFile], Optional[str]]:
    """Read ``path``; return ``(ElfFile, None)`` or ``(None, reason)``.  Never raises."""
    try:
        fd, st = open_regular(path)
    except ElfError as exc:
        return None, str(exc)
    try:
        return _parse(_Reader(fd, st.st_size, path), with_sections, with_dynamic), None
    except ElfError as exc:
        return None, str(exc)
    except (OSError, struct.error, ValueError, OverflowError, MemoryError) as exc:
        return None, "unreadable ELF: %s" % exc
    finally:
        os.close(fd)


def read_section(path: str, name: str, limit: int = 1 << 16) -> Tuple[Optional[bytes], Optional[ElfFile], Optional[str]]:
    """The bytes of section ``name`` (at most ``limit``), its file, or ``(None, elf, reason)``.  Never raises."""
    try:
        fd, st = open_regular(path)
    except ElfError as exc:
        return None, None, str(exc)
    try:
        r = _Reader(fd, st.st_size, path)
        elf = _parse(r, True, False)
        sec = elf.sections.get(name)
        if sec is None or sec.type == SHT_NOBITS:
            return None, elf, "no %s section" % name
        if sec.size > limit:
            return None, elf, "%s is %d bytes (more than %d)" % (name, sec.size, limit)
        return r.read(sec.offset, sec.size, name), elf, None
    except ElfError as exc:
        return None, None, str(exc)
    except (OSError, struct.error, ValueError, OverflowError, MemoryError) as exc:
        return None, None, "unreadable ELF: %s" % exc
    finally:
        os.close(fd)


def _parse(r: _Reader, with_sections: bool, with_dynamic: bool) -> ElfFile:
    if r.size < 16:
        raise ElfError("not an ELF file (%d bytes)" % r.size)
    ident = r.read(0, 16, "e_ident")
    if ident[:4] != ELF_MAGIC:
        raise ElfError("not an ELF file (magic %r)" % ident[:4])
    if ident[4] not in (1, 2):
        raise ElfError("bad ELF class %d" % ident[4])
    if ident[5] not in (1, 2):
        raise ElfError("bad ELF data encoding %d" % ident[5])
    is64 = ident[4] == 2
    end = "<" if ident[5] == 1 else ">"
    if is64:
        hfmt = end + "HHIQQQIHHHHHH"
    else:
        hfmt = end + "HHIIIIIHHHHHH"
    hsize = struct.calcsize(hfmt)
    (etype, machine, _ver, _entry, phoff, shoff, _flags, _ehsize, phentsize, phnum, shentsize, shnum, shstrndx) = struct.unpack(
        hfmt, r.read(16, hsize, "ELF header")
    )
    elf = ElfFile(
        path=r.path,
        elf_class=64 if is64 else 32,
        little_endian=end == "<",
        machine=machine,
        etype=etype,
        file_size=r.size,
    )
    if with_sections:
        elf.sections = _sections(r, is64, end, shoff, shentsize, shnum, shstrndx)
    if with_dynamic:
        try:
            _dynamic(r, elf, is64, end, phoff, phentsize, phnum)
        except ElfError as exc:
            # A file whose dynamic segment is damaged is still an ELF file (the loader would
            # refuse it; we say why instead of guessing its dependencies).
            elf.dynamic_note = str(exc)
    return elf


def _sections(r: _Reader, is64: bool, end: str, shoff: int, shentsize: int, shnum: int, shstrndx: int) -> Dict[str, Section]:
    if shoff == 0:
        return {}  # stripped of section headers (sstrip): legal for the loader
    fmt = end + ("IIQQQQIIQQ" if is64 else "IIIIIIIIII")
    need = struct.calcsize(fmt)
    if shentsize < need:
        raise ElfError("bad section header size %d" % shentsize)
    if shnum == 0 or shstrndx == 0xFFFF:
        # Extended numbering: the real values live in section header 0 (sh_size / sh_link).
        first = struct.unpack(fmt, r.read(shoff, need, "section header 0"))
        if shnum == 0:
            shnum = first[5]
        if shstrndx == 0xFFFF:
            shstrndx = first[6]
    if shnum > MAX_SECTIONS:
        raise ElfError("implausible section count %d" % shnum)
    table = r.read(shoff, shnum * shentsize, "section header table")
    raw = [struct.unpack_from(fmt, table, i * shentsize) for i in range(shnum)]
    if not 0 <= shstrndx < shnum:
        raise ElfError("section name table index %d out of range" % shstrndx)
    strsec = raw[shstrndx]
    if strsec[5] > MAX_SHSTRTAB:
        raise ElfError("implausible section name table size %d" % strsec[5])
    names = r.read(strsec[4], strsec[5], "section name table")
    out: Dict[str, Section] = {}
    for ent in raw:
        name_off, stype, _fl, addr, off, size, align = ent[0], ent[1], ent[2], ent[3], ent[4], ent[5], ent[8]
        if name_off >= len(names):
            continue
        stop = names.find(b"\0", name_off)
        name = names[name_off : stop if stop >= 0 else len(names)].decode("utf-8", "surrogateescape")
        if name and name not in out:
            out[name] = Section(name=name, type=stype, addr=addr, offset=off, size=size, align=align)
    return out


def _dynamic(r: _Reader, elf: ElfFile, is64: bool, end: str, phoff: int, phentsize: int, phnum: int) -> None:
    """Read the dynamic segment the way the loader finds it: PT_DYNAMIC + PT_LOAD address map."""
    if phoff == 0 or phnum == 0:
        return  # no program headers: not loadable, nothing to resolve
    fmt = end + ("IIQQQQQQ" if is64 else "IIIIIIII")
    need = struct.calcsize(fmt)
    if phentsize < need or phnum > MAX_PHDRS:
        raise ElfError("bad program header table (%d x %d)" % (phnum, phentsize))
    table = r.read(phoff, phnum * phentsize, "program header table")
    loads: List[Tuple[int, int, int]] = []  # (vaddr, filesz, offset)
    dyn: Optional[Tuple[int, int]] = None
    for i in range(phnum):
        ent = struct.unpack_from(fmt, table, i * phentsize)
        if is64:
            ptype, _flags, off, vaddr, _paddr, filesz = ent[0], ent[1], ent[2], ent[3], ent[4], ent[5]
        else:
            ptype, off, vaddr, _paddr, filesz = ent[0], ent[1], ent[2], ent[3], ent[4]
        if ptype == PT_LOAD:
            loads.append((vaddr, filesz, off))
        elif ptype == PT_DYNAMIC:
            dyn = (off, filesz)
    if dyn is None:
        return  # statically linked
    off, size = dyn
    if size > MAX_DYN_BYTES:
        raise ElfError("implausible dynamic segment size %d" % size)
    data = r.read(off, size, "dynamic segment")
    efmt = end + ("qQ" if is64 else "iI")
    esize = struct.calcsize(efmt)
    needed_offs: List[int] = []
    soname_off = rpath_off = runpath_off = None
    strtab = strsz = None
    for i in range(len(data) // esize):
        tag, val = struct.unpack_from(efmt, data, i * esize)
        if tag == DT_NULL:
            break
        if tag == DT_NEEDED:
            needed_offs.append(val)
        elif tag == DT_SONAME:
            soname_off = val
        elif tag == DT_RPATH:
            rpath_off = val
        elif tag == DT_RUNPATH:
            runpath_off = val
        elif tag == DT_STRTAB:
            strtab = val
        elif tag == DT_STRSZ:
            strsz = val
        elif tag == DT_FLAGS_1:
            elf.flags_1 = val
    if strtab is None:
        if needed_offs or soname_off is not None:
            raise ElfError("dynamic segment without DT_STRTAB")
        return
    str_file_off = _vaddr_to_offset(loads, strtab)
    if str_file_off is None:
        raise ElfError("DT_STRTAB address 0x%x is not in any PT_LOAD segment" % strtab)
    limit = strsz if strsz else MAX_STRING

    def s(o: int, what: str) -> str:
        if o >= limit:
            raise ElfError("%s: string offset %d beyond DT_STRSZ %d" % (what, o, limit))
        return r.cstring(str_file_off + o, limit - o, what)

    elf.needed = [s(o, "DT_NEEDED") for o in needed_offs]
    elf.soname = s(soname_off, "DT_SONAME") if soname_off is not None else None
    elf.rpath = s(rpath_off, "DT_RPATH") if rpath_off is not None else None
    elf.runpath = s(runpath_off, "DT_RUNPATH") if runpath_off is not None else None


def _vaddr_to_offset(loads: List[Tuple[int, int, int]], vaddr: int) -> Optional[int]:
    for base, filesz, off in loads:
        if base <= vaddr < base + filesz:
            return off + (vaddr - base)
    return None


# -- dynamic string tokens -------------------------------------------------------------------


# uname machine -> Debian/Ubuntu multiarch triplet (https://wiki.debian.org/Multiarch/Tuples)
MULTIARCH_TRIPLETS = {"x86_64": "x86_64-linux-gnu", "aarch64": "aarch64-linux-gnu", "ppc64le": "powerpc64le-linux-gnu"}


def default_lib_token(root: str = "/") -> str:
    """What glibc substitutes for $LIB: Debian/Ubuntu multiarch builds use lib/<triplet>.
    ``root``: the probe root the distribution is read under (cudafix.store.paths.probe_root)."""
    machine = os.uname().machine
    triplet = MULTIARCH_TRIPLETS.get(machine)
    base = root.rstrip("/")  # "" under "/": the paths below stay byte-identical
    if triplet and os.path.isdir(base + "/lib/" + triplet) and os.path.exists(base + "/etc/debian_version"):
        return "lib/" + triplet
    return "lib64" if machine in ("x86_64", "aarch64", "ppc64le", "s390x") else "lib"


def expand_dst(entry: str, origin: str, lib: Optional[str] = None, platform: Optional[str] = None) -> str:
    """Expand $ORIGIN/${ORIGIN}, $LIB/${LIB}, $PLATFORM/${PLATFORM} in one search-path entry.

    ``origin`` is the directory of the object the entry came from (for LD_LIBRARY_PATH: of the
    executable).  An unknown ``$NAME`` is kept literally, as glibc does.
    """
    if "$" not in entry:
        return entry
    values = {
        "ORIGIN": origin,
        "LIB": lib if lib is not None else default_lib_token(),
        "PLATFORM": platform if platform is not None else os.uname().machine,
    }
    out: List[str] = []
    i = 0
    while i < len(entry):
        ch = entry[i]
        if ch == "$":
            matched = False
            for name, value in values.items():
                for token in ("${%s}" % name, "$" + name):
                    if entry.startswith(token, i):
                        nxt = i + len(token)
                        # "$ORIGINX" is not $ORIGIN: the bare form must end at a non-identifier char.
                        if token[1] != "{" and nxt < len(entry) and (entry[nxt].isalnum() or entry[nxt] == "_"):
                            continue
                        out.append(value)
                        i = nxt
                        matched = True
                        break
                if matched:
                    break
            if matched:
                continue
        out.append(ch)
        i += 1
    return "".join(out)


def split_path_list(value: Optional[str], separators: str = ":") -> List[str]:
    """Split an RPATH/RUNPATH (':') or LD_LIBRARY_PATH (':' and ';') value.

    Empty elements are kept as "" (glibc searches the current directory for them).
    """
    if value is None:
        return []
    parts = [value]
    for sep in separators:
        parts = [p for part in parts for p in part.split(sep)]
    return parts
