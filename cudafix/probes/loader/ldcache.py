"""Read /etc/ld.so.cache directly (no `ldconfig -p` subprocess).

Formats (glibc sysdeps/generic/dl-cache.h):
- new: "glibc-ld.so.cache" "1.1", u32 nlibs, u32 len_strings, u8 flags, 3 pad, u32 extension
  offset, 3 x u32 unused (48 bytes), then nlibs x {i32 flags, u32 key, u32 value, u32 osversion,
  u64 hwcap}; string offsets are relative to the start of this header.
- old: "ld.so-1.7.0" (12 bytes with padding), u32 nlibs, nlibs x {i32 flags, u32 key, u32 value};
  string offsets relative to the end of the entry table.  glibc < 2.32 wrote old + new
  back to back (the new header 8-byte aligned after the old table); we prefer the new part.
Entries are kept in file order: ldconfig sorts them so the loader's first match is the choice.
"""

from __future__ import annotations

import dataclasses
import os
import struct

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Dict, List, Optional, Tuple

from cudafix.model.record import record
from cudafix.probes.binfmt.elf import ElfError, open_regular

LD_SO_CACHE = "/etc/ld.so.cache"
NEW_MAGIC = b"glibc-ld.so.cache1.1"
OLD_MAGIC = b"ld.so-1.7.0"
MAX_CACHE_BYTES = 64 << 20

FLAG_ELF_LIBC6 = 0x0003
FLAG_TYPE_MASK = 0x00FF
FLAG_REQUIRED_MASK = 0xFF00
# Per-architecture "required" bits (dl-cache.h); the loader only takes entries whose flags equal
# its own _DL_CACHE_DEFAULT_ID.
ARCH_FLAGS = {
    "x86_64": FLAG_ELF_LIBC6 | 0x0300,  # FLAG_X8664_LIB64
    "aarch64": FLAG_ELF_LIBC6 | 0x0A00,  # FLAG_AARCH64_LIB64
    "ppc64le": FLAG_ELF_LIBC6 | 0x0500,  # FLAG_POWERPC_LIB64
    "i686": FLAG_ELF_LIBC6,
}
HWCAP_EXTENSION = 1 << 62  # entry lives in a glibc-hwcaps subdirectory


@record(frozen=True)
class CacheEntry:
    """One /etc/ld.so.cache entry (soname, flags, path)."""

    name: str  # soname (the key)
    path: str
    flags: int
    hwcap: int = 0


@record
class LdCache:
    """The parsed /etc/ld.so.cache, or why it could not be read."""

    entries: List[CacheEntry] = dataclasses.field(default_factory=list)
    found_via: str = ""
    unknown: Optional[str] = None

    def lookup(self, soname: str, flags: Optional[int] = None) -> List[str]:
        """Paths for ``soname`` usable by a process of ``flags`` (default: this machine), in loader order."""
        want = native_flags() if flags is None else flags
        return [e.path for e in self.entries if e.name == soname and e.flags == want]

    def by_name(self, flags: Optional[int] = None) -> Dict[str, List[str]]:
        want = native_flags() if flags is None else flags
        out: Dict[str, List[str]] = {}
        for e in self.entries:
            if e.flags == want:
                out.setdefault(e.name, []).append(e.path)
        return out


def native_flags() -> int:
    return ARCH_FLAGS.get(os.uname().machine, FLAG_ELF_LIBC6)


def read_ld_cache(path: str = LD_SO_CACHE) -> LdCache:
    """Parse the cache at ``path``; never raises (a missing or corrupt cache is ``unknown``)."""
    try:
        fd, st = open_regular(path)
    except ElfError as exc:
        return LdCache(unknown="%s: %s" % (path, exc))
    try:
        if st.st_size > MAX_CACHE_BYTES:
            return LdCache(unknown="%s: implausibly large (%d bytes)" % (path, st.st_size))
        data = os.pread(fd, st.st_size, 0)
    except OSError as exc:
        return LdCache(unknown="%s: %s" % (path, exc.strerror or exc))
    finally:
        os.close(fd)
    entries, reason = parse_ld_cache(data)
    if entries is None:
        return LdCache(unknown="%s: %s" % (path, reason))
    return LdCache(entries=entries, found_via="%s (%s)" % (path, reason))


def parse_ld_cache(data: bytes) -> Tuple[Optional[List[CacheEntry]], str]:
    """Pure parser: ``(entries, format description)`` or ``(None, reason)``."""
    try:
        if data.startswith(NEW_MAGIC):
            return _parse_new(data, 0), "new format"
        if data.startswith(OLD_MAGIC):
            (nlibs,) = struct.unpack_from("<I", data, 12)
            table_end = 16 + nlibs * 12
            if table_end > len(data):
                return None, "truncated old-format table (%d entries)" % nlibs
            # glibc 2.31 and older append the new format, 8-byte aligned, after the old table.
            new_at = (table_end + 7) & ~7
            if data[new_at : new_at + len(NEW_MAGIC)] == NEW_MAGIC:
                return _parse_new(data, new_at), "new format after old"
            return _parse_old(data, nlibs, table_end), "old format"
        return None, "unknown cache format (magic %r)" % data[:20]
    except (struct.error, ValueError, IndexError) as exc:
        return None, "corrupt cache: %s" % exc


def _string(data: bytes, base: int, off: int) -> str:
    start = base + off
    if not 0 <= start < len(data):
        raise ValueError("string offset %d outside the cache" % off)
    stop = data.find(b"\0", start)
    if stop < 0:
        raise ValueError("unterminated string at %d" % start)
    return data[start:stop].decode("utf-8", "surrogateescape")


def _parse_new(data: bytes, at: int) -> List[CacheEntry]:
    nlibs, _len_strings = struct.unpack_from("<II", data, at + 20)
    table = at + 48
    if table + nlibs * 24 > len(data):
        raise ValueError("truncated entry table (%d entries)" % nlibs)
    # _string's checks inline, one iter_unpack over the table: every `status` parses this (~40 % less)
    size, find = len(data), data.find
    out = []
    for flags, key, value, _osv, hwcap in struct.iter_unpack("<iIIIQ", data[table:table + nlibs * 24]):
        strings = []
        for off in (key, value):
            start = at + off
            stop = find(b"\0", start) if 0 <= start < size else -2
            if stop < 0:
                _string(data, at, off)  # raises the ValueError that names the fault
            strings.append(data[start:stop].decode("utf-8", "surrogateescape"))
        out.append(CacheEntry(strings[0], strings[1], flags, hwcap))
    return out


def _parse_old(data: bytes, nlibs: int, table_end: int) -> List[CacheEntry]:
    out = []
    for i in range(nlibs):
        flags, key, value = struct.unpack_from("<iII", data, 16 + i * 12)
        out.append(CacheEntry(name=_string(data, table_end, key), path=_string(data, table_end, value), flags=flags))
    return out
