"""Which GPU architectures a CUDA library really carries: a bounded walk of its .nv_fatbin section.

Layout (checked against cuobjdump 13.1 on nvcc 13.0 builds and torch 2.14.1's libtorch_cuda.so;
see tests/test_fatbin.py), all little endian:

container header (16 bytes)  u32 magic 0xBA55ED50, u16 version (1), u16 header size (16),
                             u64 size of the entries that follow
entry header (>= 64 bytes)   @0  u16 kind: 1 = PTX, 2 = ELF (SASS)
                             @4  u32 size of this entry header (64, 80, 96, 112 seen)
                             @8  u64 payload size (padded; the next entry follows it)
                             @16 u32 compressed payload size (0 when not compressed)
                             @24 u16 minor, u16 major: a PTX entry's PTX ISA version (9.2 for
                                 nvcc 13.2's `.version 9.2`; tests/test_fatbin.py checks it
                                 against the `.version` line of nvcc's own PTX text)
                             @28 u32 arch number (75 = sm_75 / compute_75)
                             @40 u64 flags: 0x1 64-bit, 0x10 linux, 0x2000 / 0x8000 compressed,
                                 0x100000 arch-specific ("sm_90a"), 0x200000 family ("sm_100f")
                             @56 u64 uncompressed payload size (when compressed)

Only entry headers are read (a few thousand 64-byte preads), never payloads: the 332 MB
.nv_fatbin of libtorch_cuda.so is walked without touching most of its pages.  Results are cached
by (realpath, size, mtime_ns) in a small JSON file.
"""

from __future__ import annotations

import os
import struct

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Dict, Optional, Tuple

from cudafix.store import cachefile
from cudafix.probes.binfmt.elf import ElfError, open_regular, read_elf
from cudafix.model.snapshot import ArchCoverage
from cudafix.model.lazyre import lazy_re

FATBIN_MAGIC = 0xBA55ED50
KIND_PTX = 1
KIND_ELF = 2
FLAG_COMPRESSED_LZ4 = 0x2000
FLAG_COMPRESSED_ZSTD = 0x8000
FLAG_ARCH_SPECIFIC = 0x100000  # 'a': runs only on exactly this arch
FLAG_FAMILY_SPECIFIC = 0x200000  # 'f': runs on this arch family (same major)

MAX_ENTRIES = 200_000  # libcublasLt.so.13 has ~5,400; far more means a corrupt header chain
MAX_RESYNC_BYTES = 1 << 20  # how far we search for the next container magic after padding
ENTRY_READ = 64

CACHE_FILE = "fatbin-cache.json"
CACHE_VERSION = 2  # 2: the PTX ISA version of each PTX entry (ptx_isa)
CACHE_MAX_ENTRIES = 64

_ARCH_RE = lazy_re(r"^(sm|compute)_(\d+)([af]?)$")


class FatbinError(Exception):
    """Internal: why a fatbin walk stopped (becomes ArchCoverage.unknown)."""


def arch_sort_key(name: str) -> Tuple[int, str]:
    m = _ARCH_RE.match(name)
    return (int(m.group(2)), m.group(3)) if m else (1 << 30, name)


def scan_fatbin(path: str, cache_dir: Optional[str] = None) -> ArchCoverage:
    """SASS and PTX architectures in ``path``'s .nv_fatbin; never raises.

    ``cache_dir``: where to keep the result cache (None: no cache).
    """
    try:
        return _scan_cached(path, cache_dir)
    except Exception as exc:  # the probe contract: an unknown with a reason, never a traceback
        return ArchCoverage(library=path, unknown="fatbin scan failed: %s: %s" % (type(exc).__name__, exc))


def _scan_cached(path: str, cache_dir: Optional[str]) -> ArchCoverage:
    real = os.path.realpath(path)
    try:
        st = os.stat(real)
    except OSError as exc:
        return ArchCoverage(library=path, unknown="cannot stat %s: %s" % (path, exc.strerror or exc))
    key = {"size": st.st_size, "mtime_ns": st.st_mtime_ns}
    if cache_dir is not None:
        hit = _cache_get(cache_dir, real, key)
        if hit is not None:
            hit.library = path
            hit.found_via += " (cached)"
            return hit
    cov = scan_fatbin_uncached(real)
    cov.library = path
    if cache_dir is not None and cov.unknown is None:
        _cache_put(cache_dir, real, key, cov)
    return cov


def scan_fatbin_uncached(path: str) -> ArchCoverage:
    from cudafix.probes.binfmt import pe as pe_mod  # a Windows DLL / .pyd: its .nv_fatb section (cudafix.probes.binfmt.pe)

    if pe_mod.is_pe(path):
        return _scan_pe(path, pe_mod)
    elf, reason = read_elf(path, with_dynamic=False)
    if elf is None:
        return ArchCoverage(library=path, unknown="%s: %s" % (path, reason))
    sec = elf.sections.get(".nv_fatbin")
    if sec is None:
        return ArchCoverage(
            library=path,
            found_via="ELF section headers of %s" % path,
            unknown="no .nv_fatbin section: %s carries no device code we can read" % os.path.basename(path),
        )
    if sec.offset + sec.size > elf.file_size:
        return ArchCoverage(
            library=path,
            unknown="truncated: .nv_fatbin (%d bytes at %d) extends past the end of the file (%d bytes)"
            % (sec.size, sec.offset, elf.file_size),
        )
    try:
        fd, _st = open_regular(path)
    except ElfError as exc:
        return ArchCoverage(library=path, unknown="%s: %s" % (path, exc))
    try:
        return _walk(fd, path, sec.offset, sec.size)
    except FatbinError as exc:
        return ArchCoverage(library=path, unknown="%s: %s" % (os.path.basename(path), exc))
    finally:
        os.close(fd)


def _scan_pe(path: str, pe_mod) -> ArchCoverage:
    pe, reason = pe_mod.read_pe(path)
    if pe is None:
        return ArchCoverage(library=path, unknown="%s: %s" % (path, reason))
    sec = pe.fatbin
    if sec is None:
        return ArchCoverage(library=path, found_via="PE section table of %s" % path,
                            unknown="no .nv_fatb section: %s carries no device code we can read" % os.path.basename(path))
    size = min(sec.virtual_size, sec.raw_size) if sec.virtual_size else sec.raw_size  # raw is FileAlignment-padded
    if sec.raw_offset + size > pe.file_size:
        return ArchCoverage(library=path, unknown="truncated: %s extends past the end of the file" % sec.name)
    try:
        fd, _st = open_regular(path)
    except ElfError as exc:
        return ArchCoverage(library=path, unknown="%s: %s" % (path, exc))
    try:
        return _walk(fd, path, sec.raw_offset, size)
    except FatbinError as exc:
        return ArchCoverage(library=path, unknown="%s: %s" % (os.path.basename(path), exc))
    finally:
        os.close(fd)


def _walk(fd: int, path: str, start: int, size: int) -> ArchCoverage:
    end = start + size
    _advise_random(fd, start, size)
    sass: Dict[str, int] = {}
    ptx_bytes: Dict[str, int] = {}
    ptx_isa: Dict[str, Tuple[int, int]] = {}
    containers = entries = 0
    pos = start
    while pos + 16 <= end:
        head = os.pread(fd, 16, pos)
        if len(head) < 16:
            raise FatbinError("truncated: short read at offset %d" % pos)
        magic, _version, hsize, fsize = struct.unpack("<IHHQ", head)
        if magic != FATBIN_MAGIC:
            nxt = _resync(fd, pos, end)
            if nxt is None:
                break  # trailing padding after the last container
            pos = nxt
            continue
        if hsize < 16 or pos + hsize + fsize > end:
            raise FatbinError(
                "truncated fatbin: container at offset %d claims %d bytes, section ends at %d"
                % (pos - start, hsize + fsize, end - start)
            )
        containers += 1
        q = pos + hsize
        cend = q + fsize
        while q < cend:
            entries += 1
            if entries > MAX_ENTRIES:
                raise FatbinError("more than %d fatbin entries: corrupt header chain" % MAX_ENTRIES)
            raw = os.pread(fd, ENTRY_READ, q)
            if len(raw) < ENTRY_READ or q + ENTRY_READ > cend:
                raise FatbinError("truncated fatbin entry at offset %d" % (q - start))
            kind, _ver, ehsize, payload = struct.unpack_from("<HHIQ", raw, 0)
            compressed_size, _ext = struct.unpack_from("<II", raw, 16)
            isa_minor, isa_major = struct.unpack_from("<HH", raw, 24)
            (arch,) = struct.unpack_from("<I", raw, 28)
            (flags,) = struct.unpack_from("<Q", raw, 40)
            (uncompressed,) = struct.unpack_from("<Q", raw, 56)
            if ehsize < ENTRY_READ or q + ehsize + payload > cend:
                raise FatbinError("corrupt fatbin entry at offset %d (header %d, payload %d)" % (q - start, ehsize, payload))
            suffix = "a" if flags & FLAG_ARCH_SPECIFIC else ("f" if flags & FLAG_FAMILY_SPECIFIC else "")
            if kind == KIND_ELF:
                name = "sm_%d%s" % (arch, suffix)
                sass[name] = sass.get(name, 0) + 1
            elif kind == KIND_PTX:
                name = "compute_%d%s" % (arch, suffix)
                is_compressed = bool(flags & (FLAG_COMPRESSED_LZ4 | FLAG_COMPRESSED_ZSTD)) or compressed_size
                # JIT cache sizing needs the PTX text size: the header records it for compressed entries.
                nbytes = uncompressed if (is_compressed and uncompressed) else payload
                ptx_bytes[name] = ptx_bytes.get(name, 0) + nbytes
                # Several containers (one per translation unit) may carry PTX of one arch written by
                # different toolkits: the newest ISA is what the driver must be able to JIT.
                if isa_major and (isa_major, isa_minor) > ptx_isa.get(name, (0, 0)):
                    ptx_isa[name] = (isa_major, isa_minor)
            q += ehsize + payload
        pos = cend
    if containers == 0:
        raise FatbinError("no fatbin container (magic 0x%08X) in .nv_fatbin" % FATBIN_MAGIC)
    return ArchCoverage(
        library=path,
        sass=sorted(sass, key=arch_sort_key),
        ptx=sorted(ptx_bytes, key=arch_sort_key),
        ptx_bytes=dict(sorted(ptx_bytes.items(), key=lambda kv: arch_sort_key(kv[0]))),
        largest_ptx_bytes=max(ptx_bytes.values()) if ptx_bytes else None,
        ptx_isa={k: "%d.%d" % ptx_isa[k] for k in sorted(ptx_isa, key=arch_sort_key)},
        found_via=".nv_fatbin of %s (%d containers, %d entries)" % (path, containers, entries),
    )


def _resync(fd: int, pos: int, end: int) -> Optional[int]:
    """Skip zero padding between containers; anything else where a header belongs is corruption
    (skipping it would silently drop that container's architectures)."""
    magic = struct.pack("<I", FATBIN_MAGIC)
    limit = min(end, pos + MAX_RESYNC_BYTES)
    chunk = os.pread(fd, limit - pos, pos)
    i = chunk.find(magic)
    gap = chunk if i < 0 else chunk[:i]
    if gap.strip(b"\0") != b"":
        raise FatbinError("corrupt .nv_fatbin: no container header at offset %d" % pos)
    if i >= 0:
        return pos + i
    return None if limit == end else limit  # all padding: keep looking, or done


def _advise_random(fd: int, start: int, size: int) -> None:
    """We touch ~1 page per entry; tell the kernel not to read ahead the payloads."""
    advise = getattr(os, "posix_fadvise", None)
    if advise is not None:
        try:
            advise(fd, start, size, os.POSIX_FADV_RANDOM)
        except OSError:
            pass


# -- cache ------------------------------------------------------------------------------------


def _load_cache(cache_dir: str) -> Dict[str, dict]:
    # Trusted only if ours and writable by nobody else; corrupt or old = empty (cachefile.load).
    return cachefile.load(cache_dir, CACHE_FILE, CACHE_VERSION)


def _cache_get(cache_dir: str, real: str, key: Dict[str, int]) -> Optional[ArchCoverage]:
    ent = _load_cache(cache_dir).get(real)
    if not isinstance(ent, dict) or ent.get("key") != key or not isinstance(ent.get("result"), dict):
        return None
    r = ent["result"]
    try:
        cov = ArchCoverage(
            library=real,
            sass=[str(x) for x in r["sass"]],
            ptx=[str(x) for x in r["ptx"]],
            ptx_bytes={str(k): int(v) for k, v in r["ptx_bytes"].items()},
            largest_ptx_bytes=None if r["largest_ptx_bytes"] is None else int(r["largest_ptx_bytes"]),
            ptx_isa={str(k): str(v) for k, v in r["ptx_isa"].items()},
            found_via=str(r["found_via"]),
        )
    except (KeyError, TypeError, ValueError, AttributeError):
        return None
    return cov


def _cache_put(cache_dir: str, real: str, key: Dict[str, int], cov: ArchCoverage) -> None:
    entries = _load_cache(cache_dir)
    entries.pop(real, None)
    entries[real] = {
        "key": key,
        "result": {
            "sass": cov.sass,
            "ptx": cov.ptx,
            "ptx_bytes": cov.ptx_bytes,
            "largest_ptx_bytes": cov.largest_ptx_bytes,
            "ptx_isa": cov.ptx_isa,
            "found_via": cov.found_via,
        },
    }
    while len(entries) > CACHE_MAX_ENTRIES:  # dicts keep insertion order: drop the oldest
        entries.pop(next(iter(entries)))
    cachefile.store(cache_dir, CACHE_FILE, CACHE_VERSION, entries)  # atomic; errors only cost speed
