"""Dynamic symbols of ELF shared objects: what an extension needs, and whether a library defines it.

Answers "would the loader find symbol S in library L" the way the loader does, through L's
``.gnu.hash`` table (bloom filter, bucket, hash chain, then one name compare), so a 5 MB
``.dynstr`` (libtorch_cpu.so) is never read whole: a lookup costs a few ``pread`` calls.
Libraries without ``.gnu.hash`` (very old toolchains) fall back to reading ``.dynsym`` once.

Only 64-bit little-endian objects are read (every CUDA platform torch ships: x86_64, aarch64,
ppc64le); others answer ``None`` (unknown).  Never raises out of the public functions.
"""

from __future__ import annotations

import array
import itertools
import os
import struct
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable, Dict, List, Optional, Pattern, Sequence, Set, Tuple

from cudafix.model.record import record
from cudafix.probes.binfmt.elf import ElfError, ElfFile, open_regular, read_elf

SYM_SIZE = 24  # Elf64_Sym
RELA_SIZE = 24  # Elf64_Rela
SHN_UNDEF = 0
STB_WEAK = 2
MAX_DYNSYM_BYTES = 64 << 20
MAX_EXT_STRTAB = 32 << 20  # an extension's own .dynstr is read whole (torchvision's: ~300 KB)
NO_VERSION = (None, None)


@record
class NeededSymbols:
    """Undefined (imported) dynamic symbols of one object, in the loader's relocation order."""

    strong: List[str]  # non-weak undefined: a miss is "undefined symbol" at dlopen (RTLD_NOW)
    weak: List[str]


def gnu_hash(name: bytes) -> int:
    h = 5381
    for c in name:
        h = (h * 33 + c) & 0xFFFFFFFF
    return h


def needed_symbols(path: str) -> Tuple[Optional[NeededSymbols], str]:
    """The object's undefined dynamic symbols, ordered as glibc binds them at RTLD_NOW:
    ``.rela.dyn`` first, then ``.rela.plt``; symbols no relocation names come last."""
    got, why = imports(path)
    if got is None:
        return None, why
    return NeededSymbols([n for n, w, _v, _f in got if not w], [n for n, w, _v, _f in got if w]), ""


def imports(path: str, files: Optional[Callable[[str], bool]] = None, unversioned: Optional[Pattern[bytes]] = None,
            ordered: bool = True) -> Tuple[Optional[List[Tuple[str, bool, Optional[str], Optional[str]]]], str]:
    """(name, weak, version, file) of each undefined dynamic symbol in binding order; version and
    file from the symbol's ``.gnu.version`` index into ``.gnu.version_r`` (e.g.
    ``__nvJitLinkAddData_12_1``, "libnvJitLink.so.12", "libnvJitLink.so.12"), None when unversioned.

    ``files`` / ``unversioned``: only the symbols whose version's file ``files`` accepts, and the
    unversioned ones whose name ``unversioned`` matches (None: none of them) -- chosen before any
    name is decoded: libtorch_cpu.so imports ~70,000 symbols, torch's import needs a few hundred.
    ``ordered=False``: in ``.dynsym`` order instead, the relocations not read (libtorch_cpu.so's
    are the largest part of this function's work: docs/benchmarks.md), for a caller that needs the
    order only when two of them fail."""
    elf, reason = read_elf(path, with_dynamic=False)
    if elf is None:
        return None, reason or "unreadable"
    if not (elf.elf_class == 64 and elf.little_endian):
        return None, "only 64-bit little-endian objects are read"
    dynsym = elf.sections.get(".dynsym")
    dynstr = elf.sections.get(".dynstr")
    if dynsym is None or dynstr is None:
        return [], ""
    if dynsym.size > MAX_DYNSYM_BYTES or dynstr.size > MAX_EXT_STRTAB:
        return None, "implausibly large dynamic symbol table"
    try:
        fd, _st = open_regular(path)
    except ElfError as exc:
        return None, str(exc)
    try:
        syms = _pread(fd, dynsym.offset, dynsym.size)
        strs = _pread(fd, dynstr.offset, dynstr.size)
        rels = []
        for sec_name in (".rela.dyn", ".rela.plt") if ordered else ():
            sec = elf.sections.get(sec_name)
            if sec is not None and sec.size <= MAX_DYNSYM_BYTES:
                rel = _pread(fd, sec.offset, sec.size)
                rels.append(rel[: len(rel) - len(rel) % RELA_SIZE])
    except (OSError, ValueError) as exc:
        return None, "cannot read dynamic symbols: %s" % exc
    finally:
        os.close(fd)
    syms = syms[: len(syms) - len(syms) % SYM_SIZE]
    nsyms = len(syms) // SYM_SIZE
    # Columns of the Elf64_Sym array, sliced in C: st_name (u32 0 of 6), st_shndx (u16 3 of 12).
    st_name = _column("I", syms, 0, 6)
    shndx = _column("H", syms, 3, 12)
    undefined = [i for i in itertools.compress(range(nsyms), map(SHN_UNDEF.__eq__, shndx)) if st_name[i]]
    versions = _needed_versions(path, elf, strs, nsyms)
    if files is not None or unversioned is not None:
        keep_file = {f: bool(files and files(f)) for _v, f in set(versions.values()) if f}
        undefined = [i for i in undefined
                     if (keep_file[versions[i][1]] if versions.get(i, NO_VERSION)[1]
                         else unversioned is not None and unversioned.match(strs, st_name[i]) is not None)]
    wanted = set(undefined)
    # binding order: .rela.dyn, then .rela.plt (r_info's high half: u32 3 of 6), then the rest
    order: List[int] = []
    for rel in rels:
        order.extend(i for i in dict.fromkeys(_column("I", rel, 3, 6)) if i in wanted)
    ordered = list(dict.fromkeys(order + undefined))
    out = []
    for i in ordered:
        off = st_name[i]
        end = strs.find(b"\0", off)
        name = strs[off:end if end >= 0 else len(strs)].decode("utf-8", "surrogateescape")
        weak = (syms[i * SYM_SIZE + 4] >> 4) == STB_WEAK
        out.append((name, weak) + versions.get(i, NO_VERSION))
    return out, ""


def _column(typecode: str, data: bytes, start: int, step: int) -> "array.array":
    """One field of an array of fixed-size little-endian records: every ``step``-th item from ``start``."""
    arr = array.array(typecode)
    arr.frombytes(data[: len(data) - len(data) % arr.itemsize])
    if sys.byteorder != "little":
        arr.byteswap()
    return arr[start::step]


def _needed_versions(path: str, elf: ElfFile, strs: bytes, nsyms: int) -> Dict[int, Tuple[Optional[str], Optional[str]]]:
    """symbol index -> (version name, file) from .gnu.version / .gnu.version_r (elf.h Elf64_Verneed,
    Elf64_Vernaux); {} when the object has none or they cannot be read."""
    vs, vr = elf.sections.get(".gnu.version"), elf.sections.get(".gnu.version_r")
    if vs is None or vr is None or vs.size > MAX_DYNSYM_BYTES or vr.size > (1 << 20):
        return {}
    try:
        fd, _st = open_regular(path)
    except ElfError:
        return {}
    try:
        versym = _pread(fd, vs.offset, min(vs.size, 2 * nsyms))
        need = _pread(fd, vr.offset, vr.size)
    except (OSError, ValueError):
        return {}
    finally:
        os.close(fd)

    def cstr(off: int) -> str:
        end = strs.find(b"\0", off)
        return strs[off:end if end >= 0 else len(strs)].decode("utf-8", "surrogateescape")

    names: Dict[int, Tuple[str, str]] = {}
    try:
        off = 0
        for _ in range(4096):  # bounded: a real object names a few dozen
            _ver, cnt, vfile, aux, nxt = struct.unpack_from("<HHIII", need, off)
            a = off + aux
            for _ in range(min(cnt, 4096)):
                _hash, _flags, other, vname, anext = struct.unpack_from("<IHHII", need, a)
                names[other] = (cstr(vname), cstr(vfile))
                if not anext:
                    break
                a += anext
            if not nxt:
                break
            off += nxt
    except struct.error:
        return {}
    out: Dict[int, Tuple[Optional[str], Optional[str]]] = {}
    if not names:
        return out
    col = _column("H", versym, 0, 1)
    named = set(names) | {v | 0x8000 for v in names}  # with the hidden bit
    for i in itertools.compress(range(len(col)), map(named.__contains__, col)):  # selected in C
        out[i] = names[col[i] & 0x7FFF]
    return out


def _pread(fd: int, offset: int, size: int) -> bytes:
    data = os.pread(fd, size, offset)
    if len(data) != size:
        raise ValueError("short read at offset %d" % offset)
    return data


class SymbolTable:
    """Defined dynamic symbols of one library, looked up through its .gnu.hash table."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.error: Optional[str] = None
        self._fd: Optional[int] = None
        self._names: Optional[Set[str]] = None  # fallback: every defined name (no .gnu.hash)
        elf, reason = read_elf(path, with_dynamic=False)
        if elf is None:
            self.error = reason or "unreadable"
            return
        if not (elf.elf_class == 64 and elf.little_endian):
            self.error = "only 64-bit little-endian objects are read"
            return
        try:
            self._open(elf)
        except (ElfError, OSError, ValueError, struct.error) as exc:
            self.error = "cannot read the dynamic symbols of %s: %s" % (os.path.basename(path), exc)
            self.close()

    def _open(self, elf: ElfFile) -> None:
        self._dynsym = elf.sections.get(".dynsym")
        self._dynstr = elf.sections.get(".dynstr")
        if self._dynsym is None or self._dynstr is None:
            self._names = set()
            return
        self._fd, _st = open_regular(self.path)
        gh = elf.sections.get(".gnu.hash")
        if gh is None:
            self._names = self._all_defined()
            return
        table = _pread(self._fd, gh.offset, gh.size)
        nbuckets, self._symoffset, bloom_size, self._shift = struct.unpack_from("<IIII", table, 0)
        if nbuckets == 0 or bloom_size == 0:
            raise ValueError("empty .gnu.hash")
        self._bloom = struct.unpack_from("<%dQ" % bloom_size, table, 16)
        b0 = 16 + 8 * bloom_size
        self._buckets = struct.unpack_from("<%dI" % nbuckets, table, b0)
        c0 = b0 + 4 * nbuckets
        self._chains = table[c0:]

    def _all_defined(self) -> Set[str]:
        assert self._fd is not None and self._dynsym is not None and self._dynstr is not None
        if self._dynsym.size > MAX_DYNSYM_BYTES:
            raise ValueError("implausibly large .dynsym")
        syms = _pread(self._fd, self._dynsym.offset, self._dynsym.size)
        strs = _pread(self._fd, self._dynstr.offset, self._dynstr.size)
        out = set()
        for i in range(1, len(syms) // SYM_SIZE):
            st_name, _info, _other, st_shndx = struct.unpack_from("<IBBH", syms, i * SYM_SIZE)
            if st_shndx != SHN_UNDEF and st_name:
                end = strs.find(b"\0", st_name)
                out.add(strs[st_name:end].decode("utf-8", "surrogateescape"))
        return out

    def defines(self, name: str) -> Optional[bool]:
        """True / False; None when this library could not be read."""
        if self.error is not None:
            return None
        if self._names is not None:
            return name in self._names
        raw = name.encode("utf-8", "surrogateescape")
        h = gnu_hash(raw)
        word = self._bloom[(h // 64) % len(self._bloom)]
        if not (word >> (h % 64)) & 1 or not (word >> ((h >> self._shift) % 64)) & 1:
            return False
        idx = self._buckets[h % len(self._buckets)]
        if idx < self._symoffset:
            return False
        while True:
            ci = 4 * (idx - self._symoffset)
            if ci + 4 > len(self._chains):
                return False
            (ch,) = struct.unpack_from("<I", self._chains, ci)
            if (ch | 1) == (h | 1) and self._name_is(idx, raw):
                return True
            if ch & 1:
                return False
            idx += 1

    def _name_is(self, idx: int, raw: bytes) -> bool:
        assert self._fd is not None and self._dynsym is not None and self._dynstr is not None
        ent = os.pread(self._fd, SYM_SIZE, self._dynsym.offset + idx * SYM_SIZE)
        if len(ent) < SYM_SIZE:
            return False
        st_name, _info, _other, st_shndx = struct.unpack_from("<IBBH", ent, 0)
        if st_shndx == SHN_UNDEF:
            return False
        got = os.pread(self._fd, len(raw) + 1, self._dynstr.offset + st_name)
        return got == raw + b"\0"

    def close(self) -> None:
        if self._fd is not None:
            try:
                os.close(self._fd)
            except OSError:
                pass
            self._fd = None


def missing_from(names: Sequence[str], tables: Sequence[SymbolTable]) -> Tuple[List[str], Optional[str]]:
    """The names none of ``tables`` defines (in order); an unreadable table makes the answer unknown."""
    bad = [t for t in tables if t.error is not None]
    if bad:
        return [], bad[0].error
    return [n for n in names if not any(t.defines(n) for t in tables)], None
