"""The version of a statically linked CUDA runtime, read from the binary without running it.

A module linked with ``-cudart static`` (nvcc's default) carries its own copy of the runtime.
Its version is not in the runtime's strings (CUDA 12.9 and 13.0 measured: ``strings -a`` shows no
"12.9"/"13.0"/"12090"/"13000"); ``cudaRuntimeGetVersion`` returns it as a constant written by an
internal function: ``movl $CUDART_VERSION, (%rdi)`` (x86-64 bytes ``c7 07 imm32``), e.g. 13000 for
CUDA 13.0 (verified against running ``cudaRuntimeGetVersion`` of the same runtime, which needs no
GPU: tests/test_cudart_static.py).  This reader finds ``cudaRuntimeGetVersion`` in ``.symtab`` (a
local symbol, gone when the module is stripped), looks at its body and at the first bytes of the
functions it calls directly; in a stripped module it finds that internal function by its exact
bytes in ``.text``.  The constant is accepted only when exactly one plausible value is found.
Anything else (not x86-64, no or several candidates) is ``(None, reason)``: unknown, never a guess.
"""

from __future__ import annotations

import os
import struct

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import List, Optional, Set, Tuple

from cudafix.probes.binfmt.elf import EM_X86_64, ElfError, open_regular, read_elf

SYMBOL = b"cudaRuntimeGetVersion"
STT_FUNC = 2
MAX_STRTAB = 64 << 20
MAX_SYMTAB = 64 << 20
BODY = 512  # bytes of cudaRuntimeGetVersion looked at
CALLEE = 24  # bytes at the start of each function it calls
MAX_CALLS = 16


def plausible(v: int) -> bool:
    """CUDART_VERSION is major * 1000 + minor * 10 (9.0 = 9000 ... 13.0 = 13000)."""
    return 9000 <= v < 100000 and v % 10 == 0


def _movl_rdi(code: bytes, limit: int) -> List[int]:
    out, i = [], code.find(b"\xc7\x07")
    while 0 <= i <= limit and i + 6 <= len(code):
        out.append(struct.unpack_from("<I", code, i + 2)[0])
        i = code.find(b"\xc7\x07", i + 1)
    return out


def static_cudart_version(path: str) -> Tuple[Optional[int], str]:
    """``(13000, how)`` or ``(None, why not)``.  Never raises."""
    elf, reason = read_elf(path, with_dynamic=False)
    if elf is None:
        return None, reason or "unreadable"
    if not (elf.elf_class == 64 and elf.little_endian and elf.machine == EM_X86_64):
        return None, "the static runtime's version is read from x86-64 code only"
    symtab, strtab, text = (elf.sections.get(n) for n in (".symtab", ".strtab", ".text"))
    if text is None:
        return None, "no .text section"
    try:
        fd, _st = open_regular(path)
    except ElfError as exc:
        return None, str(exc)
    try:
        if symtab is not None and strtab is not None and strtab.size <= MAX_STRTAB and symtab.size <= MAX_SYMTAB:
            got = _read(fd, symtab, strtab, text)
            if got[0] is not None:
                return got
        return _scan(fd, text)
    except (OSError, ValueError, struct.error) as exc:
        return None, "unreadable: %s" % exc
    finally:
        os.close(fd)


# The runtime's internal version function, byte for byte in CUDA 12.9 and 13.0 (and in the
# stripped libnvjpeg torchvision bundles): test %rdi,%rdi; je +11; movl $V,(%rdi); xor %eax,%eax; ret
SIG_HEAD = b"\x48\x85\xff\x74\x0b\xc7\x07"
SIG_TAIL = b"\x31\xc0\xc3"
MAX_TEXT = 512 << 20
CHUNK = 8 << 20


def _scan(fd: int, text) -> Tuple[Optional[int], str]:
    """A stripped module: the version function found by its exact bytes in .text."""
    if text.size > MAX_TEXT:
        return None, ".text too large to scan (%d bytes)" % text.size
    found: Set[int] = set()
    step = len(SIG_HEAD) + 4 + len(SIG_TAIL)
    pos = 0
    while pos < text.size:
        chunk = os.pread(fd, min(CHUNK + step, text.size - pos), text.offset + pos)
        i = chunk.find(SIG_HEAD)
        while 0 <= i and i + step <= len(chunk):
            if chunk[i + len(SIG_HEAD) + 4:i + step] == SIG_TAIL:
                v = struct.unpack_from("<I", chunk, i + len(SIG_HEAD))[0]
                if plausible(v):
                    found.add(v)
            i = chunk.find(SIG_HEAD, i + 1)
        pos += CHUNK
    if len(found) != 1:
        return None, "no .symtab and %s" % (
            "several candidate versions %s" % sorted(found) if found else "the runtime's version function was not found in .text")
    v = found.pop()
    return v, "the constant the static runtime's version function returns (movl $%d, found by its bytes in .text)" % v


def _read(fd: int, symtab, strtab, text) -> Tuple[Optional[int], str]:
    strs = os.pread(fd, strtab.size, strtab.offset)
    names: Set[int] = set()
    i = strs.find(b"\0" + SYMBOL + b"\0")
    while i >= 0:
        names.add(i + 1)
        i = strs.find(b"\0" + SYMBOL + b"\0", i + 1)
    if not names:
        return None, "no cudaRuntimeGetVersion in .symtab"
    syms = os.pread(fd, symtab.size, symtab.offset)
    funcs = []
    for off in range(0, len(syms) - 23, 24):
        st_name, info, _other, shndx, value, size = struct.unpack_from("<IBBHQQ", syms, off)
        if st_name in names and info & 0xF == STT_FUNC and shndx != 0:
            funcs.append((value, size))
    if not funcs:
        return None, "cudaRuntimeGetVersion is not a defined function in .symtab"

    def at(vaddr: int, n: int) -> bytes:
        if not text.addr <= vaddr < text.addr + text.size:
            return b""
        return os.pread(fd, min(n, text.addr + text.size - vaddr), text.offset + vaddr - text.addr)

    found: Set[int] = set()
    for value, size in funcs:
        body = at(value, min(size or BODY, BODY))
        found.update(v for v in _movl_rdi(body, len(body)) if plausible(v))
        calls, j = 0, body.find(b"\xe8")
        while 0 <= j and j + 5 <= len(body) and calls < MAX_CALLS:
            target = value + j + 5 + struct.unpack_from("<i", body, j + 1)[0]
            found.update(v for v in _movl_rdi(at(target, CALLEE), CALLEE - 6) if plausible(v))
            calls += 1
            j = body.find(b"\xe8", j + 1)
    if len(found) != 1:
        return None, "cudaRuntimeGetVersion's constant not found (%s)" % (
            "candidates %s" % sorted(found) if found else "no movl $imm,(%rdi) in it or its direct callees")
    v = found.pop()
    return v, "the constant cudaRuntimeGetVersion returns (movl $%d in its code, .symtab)" % v
