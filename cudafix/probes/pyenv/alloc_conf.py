"""Which PYTORCH_CUDA_ALLOC_CONF option names the installed torch's parser accepts, read from the
strings of its own libraries (never by importing torch).

torch's parser compares each key against string literals (``key == "expandable_segments"``) in
libc10_cuda.so (torch <= 2.8) and, since the generic AcceleratorAllocatorConfig (2.9+), libc10.so.
A library takes part when it carries one of the parser's error texts (the anchors below).  For one
name, its state in those libraries:

- ``literal``: a NUL-terminated string of exactly that name in .rodata (the usual case);
- ``tail``: the end of a longer identifier-like string (the linker may merge "foo_bar" into
  "x_foo_bar", but torch 2.5.1's "release_expandable_segment" is a function name, not the key
  "expandable_segment"): uncertain;
- ``pieces``: not contiguous anywhere, but every byte lies in an 8-byte window found in .rodata or
  .text (GCC may build or compare a literal with 16-byte constants and 8-byte immediates):
  uncertain;
- ``inside``: only inside longer strings, e.g. a message (torch 2.0.1 names
  ``roundup_bypass_threshold_mb`` only in "backend:cudaMallocAsync ignores ...", and rejects
  it): not a key;
- ``absent``.

Proof against torch's own parser on real builds: docs/alloc-conf.md (tools.alloc_conf_proof).
Results are cached per library by (realpath, size, mtime_ns) and per name.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable, Dict, Iterable, List, Optional, Tuple

from cudafix.model.snapshot import AllocConfKeys
from cudafix.probes.binfmt.elf import ElfError, open_regular, read_elf
from cudafix.store import cachefile
from cudafix.model.lazyre import lazy_re

LIBS = ("libc10_cuda.so", "libc10.so")  # where the parsers live (c10/cuda, c10/core)
ANCHOR_TOKENIZER = b"Unrecognized key '"  # 2.9+: "Unrecognized key 'x' in CUDA allocator config."
ANCHOR_OPTION = b"Unrecognized CachingAllocator option: "  # 1.x - 2.8
ANCHOR_LEXER = b"settings, expected "  # consumeToken of the ',' ':' '[' lexer (absent from 1.10's regex split)
MAX_SPLIT_GE = b"max_split_size_mb too small, must be >= "
MAX_SPLIT_GT = b"max_split_size_mb too small, must be > "

PRESENT = ("literal",)
MAYBE = ("tail", "pieces")
WINDOW = 8
MAX_SECTION = 64 << 20  # libc10*.so sections are < 2 MB; far more is not a c10 library
NAME_RE = lazy_re(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
_IDENT = lazy_re(rb"^[A-Za-z0-9_]+$")

CACHE_FILE = "alloc-conf-cache.json"
CACHE_VERSION = 1
CACHE_MAX_ENTRIES = 32


class _Lib:
    """The sections of one library, read lazily (.text only when a name needs the piece search)."""

    def __init__(self, path: str) -> None:
        self.path = path
        elf, why = read_elf(path, with_dynamic=False)
        if elf is None:
            raise ElfError(why or "unreadable")
        self.elf = elf
        self._cache: Dict[str, bytes] = {}

    def section(self, name: str) -> bytes:
        if name not in self._cache:
            sec = self.elf.sections.get(name)
            if sec is None or sec.size > MAX_SECTION or sec.offset + sec.size > self.elf.file_size:
                self._cache[name] = b""
            else:
                fd, _ = open_regular(self.path)
                try:
                    self._cache[name] = os.pread(fd, sec.size, sec.offset)
                finally:
                    os.close(fd)
        return self._cache[name]


def name_state(rodata: bytes, text_of: Callable[[], bytes], name: str) -> str:
    """How ``name`` occurs in a library (see the module doc); ``text_of()`` returns .text lazily."""
    b = name.encode("ascii")
    if b"\0" + b + b"\0" in rodata:
        return "literal"
    start = rodata.find(b)
    inside = start >= 0
    while start >= 0:
        end = start + len(b)
        run_start = rodata.rfind(b"\0", 0, start) + 1
        if rodata[end:end + 1] == b"\0" and _IDENT.match(rodata[run_start:end]):
            return "tail"
        start = rodata.find(b, start + 1)
    if inside:
        # Only inside longer strings: a message ("... ignores max_split_size_mb,
        # roundup_bypass_threshold_mb, ...") or a longer name ("expandable_segment" inside
        # "expandable_segments"): not something the parser compares a key with.
        return "inside"
    if len(b) < WINDOW:
        return "absent"
    text = text_of()

    def found(i: int) -> bool:
        w = b[i:i + WINDOW]
        return w in rodata or w in text

    last = len(b) - WINDOW
    if not (found(0) and found(last)):  # the first and last bytes lie in one window each
        return "absent"
    covered = [False] * len(b)
    for i in range(last + 1):
        if i in (0, last) or found(i):
            for j in range(i, i + WINDOW):
                covered[j] = True
    return "pieces" if all(covered) else "absent"


def _scan(path: str, names: Iterable[str]) -> Dict[str, object]:
    """Anchors and name states of one library (uncached)."""
    lib = _Lib(path)
    rodata = lib.section(".rodata")
    out: Dict[str, object] = {
        "tokenizer": ANCHOR_TOKENIZER in rodata,
        "option": ANCHOR_OPTION in rodata,
        "lexer": ANCHOR_LEXER in rodata,
        "max_split": ">=" if MAX_SPLIT_GE in rodata else (">" if MAX_SPLIT_GT in rodata else None),
    }
    out["names"] = {n: name_state(rodata, lambda: lib.section(".text"), n) for n in names}
    return out


def _scan_cached(path: str, names: List[str], cache_dir: Optional[str]) -> Tuple[Dict[str, object], bool]:
    real = os.path.realpath(path)
    st = os.stat(real)
    key = {"size": st.st_size, "mtime_ns": st.st_mtime_ns}
    entries = cachefile.load(cache_dir, CACHE_FILE, CACHE_VERSION) if cache_dir else {}
    ent = entries.get(real)
    if isinstance(ent, dict) and ent.get("key") == key and isinstance(ent.get("result"), dict):
        res = ent["result"]
        known = res.get("names")
        if isinstance(known, dict) and all(isinstance(known.get(n), str) for n in names):
            return res, True
        missing = [n for n in names if not isinstance((known or {}).get(n), str)]
        more = _scan(real, missing)
        res = dict(res, names=dict(known or {}, **more["names"]))  # type: ignore[arg-type]
    else:
        res = _scan(real, names)
    if cache_dir:
        entries.pop(real, None)
        entries[real] = {"key": key, "result": res}
        while len(entries) > CACHE_MAX_ENTRIES:
            entries.pop(next(iter(entries)))
        cachefile.store(cache_dir, CACHE_FILE, CACHE_VERSION, entries)
    return res, False


def _rank(state: Optional[str]) -> int:
    return 2 if state in PRESENT else (1 if state in MAYBE else 0)


def read_alloc_keys(package_dir: str, names: Iterable[str], cache_dir: Optional[str] = None) -> AllocConfKeys:
    """The states of ``names`` in torch's allocator-config libraries; never raises."""
    try:
        return _read(package_dir, names, cache_dir)
    except Exception as exc:  # the probe contract: an unknown with a reason
        return AllocConfKeys(unknown="allocator option scan failed: %s: %s" % (type(exc).__name__, exc))


def _read(package_dir: str, names: Iterable[str], cache_dir: Optional[str]) -> AllocConfKeys:
    wanted = sorted({n for n in names if NAME_RE.match(n)})
    libdir = os.path.join(package_dir, "lib")
    paths = [os.path.join(libdir, n) for n in LIBS if os.path.isfile(os.path.join(libdir, n))]
    if not any(p.endswith("libc10_cuda.so") for p in paths):
        return AllocConfKeys(unknown="no libc10_cuda.so in %s: the CUDA allocator's parser was not found" % libdir)
    used: List[str] = []
    states: Dict[str, str] = {}
    tokenizer = lexer = option = False
    max_split = None
    cached = []
    for p in paths:
        try:
            res, hit = _scan_cached(p, wanted, cache_dir)
        except (OSError, ElfError) as exc:
            return AllocConfKeys(unknown="%s: %s" % (p, exc))
        if not (res.get("tokenizer") or res.get("option")):
            continue  # no allocator parser in this library (libc10.so before 2.9)
        used.append(p)
        cached.append(hit)
        tokenizer = tokenizer or bool(res.get("tokenizer"))
        option = option or bool(res.get("option"))
        lexer = lexer or bool(res.get("lexer"))
        max_split = max_split or res.get("max_split")
        for n, s in (res.get("names") or {}).items():  # type: ignore[union-attr]
            if n in wanted and _rank(s) > _rank(states.get(n)):
                states[n] = s
    if not used:
        return AllocConfKeys(unknown="no allocator parser text (%r / %r) in %s" % (
            ANCHOR_TOKENIZER.decode(), ANCHOR_OPTION.decode(), ", ".join(paths)))
    parser = "tokenizer" if tokenizer else ("lexer" if lexer else "regex")
    accepted = [n for n in wanted if states.get(n) in PRESENT]
    uncertain = [n for n in wanted if states.get(n) in MAYBE]
    rejected = [n for n in wanted if n not in accepted and n not in uncertain]
    via = "string literals of %s (parser: %s)%s" % (", ".join(used), parser, " (cached)" if all(cached) else "")
    return AllocConfKeys(libraries=used, parser=parser, max_split_check=max_split if isinstance(max_split, str) else None,
                         accepted=accepted, rejected=rejected, uncertain=uncertain, found_via=via)
