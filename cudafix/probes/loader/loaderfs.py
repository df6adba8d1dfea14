"""The filesystem as the loader simulation sees it: one object every access goes through.

`FileSystem` answers from the real filesystem.  `RecordingFileSystem` answers the same and
records a stat signature of everything it was asked about, so a cached simulation result can
later be checked by re-stat'ing exactly what the cold run looked at (cudafix/probes/loader/libraries.py,
"result cache").  The simulation code is the same with or without a cache: only the object differs.

Both carry the probe root (cudafix.store.paths.probe_root; "/" outside tests): ``machine(path)``
maps a path the machine names -- a default directory, an ld.so.cache entry, an LD_LIBRARY_PATH /
LD_PRELOAD entry, an absolute DT_RPATH/DT_RUNPATH entry -- into the laid-out tree
(cudafix.probes.machine.host.machine_path).  Paths that come from a real file the simulation already
holds (the torch library it starts at, $ORIGIN, the executable) are host paths and never mapped.
"""

from __future__ import annotations

import glob
import os
import re
import stat
import time

TYPE_CHECKING = False
if TYPE_CHECKING:
    from types import ModuleType
    from typing import Any, Callable, Dict, IO, List, Optional, Sequence, Set, Tuple, TypeVar

    T = TypeVar("T")

from cudafix.probes.binfmt.elf import MULTIARCH_TRIPLETS, ElfFile, read_elf
from cudafix.probes.loader.ldcache import LD_SO_CACHE, CacheEntry, LdCache, read_ld_cache
from cudafix.probes.machine.host import machine_path, open_regular
from cudafix.store import cachefile


class FileSystem:
    """Direct access.  Every method is total for a missing path (False / None), never raises OSError."""

    recording = False

    def __init__(self, root: str = "/", keep: Tuple[str, ...] = ()) -> None:
        self.root = root or "/"
        self.keep = tuple(k for k in keep if k)

    def machine(self, path: str) -> str:
        """``path`` as the machine names it, where it lies under the probe root."""
        return path if self.root == "/" else machine_path(self.root, path, self.keep)

    def exists(self, path: str) -> bool:
        return os.path.exists(path)

    def isfile(self, path: str) -> bool:
        return os.path.isfile(path)

    def isdir(self, path: str) -> bool:
        return os.path.isdir(path)

    def realpath(self, path: str) -> str:
        return os.path.realpath(path)

    def file_id(self, path: str) -> Optional[Tuple[int, int]]:
        """(st_dev, st_ino): the same file under two names is one loaded object."""
        try:
            st = os.stat(path)
        except OSError:
            return None
        return st.st_dev, st.st_ino

    def glob(self, pattern: str) -> List[str]:
        return glob.glob(pattern)

    def read_elf(self, path: str, with_sections: bool = False) -> Tuple[Optional[ElfFile], Optional[str]]:
        return read_elf(path, with_sections=with_sections)

    def ld_cache_path(self) -> str:
        return self.machine(LD_SO_CACHE)

    def read_ld_cache(self) -> LdCache:
        return self._rooted(read_ld_cache(self.ld_cache_path()))

    def _rooted(self, cache: LdCache) -> LdCache:
        """The tree's cache names the tree's files by their machine paths: map them once."""
        if self.root == "/" or cache.unknown:
            return cache
        return LdCache(entries=[CacheEntry(name=e.name, path=self.machine(e.path), flags=e.flags, hwcap=e.hwcap)
                                for e in cache.entries], found_via=cache.found_via)

    def open_text(self, path: str) -> IO[str]:
        return open_regular(path, text=True)  # never a FIFO (docs/security.md)

    def note_cwd(self) -> None:
        """The answer now depends on the current directory (an empty search-path entry)."""


class RecordingFileSystem(FileSystem):
    """FileSystem that records path -> stat_sig (None: absent) of everything it was asked about."""

    recording = True

    def __init__(self, root: str = "/", keep: Tuple[str, ...] = ()) -> None:
        super().__init__(root, keep)
        self.sigs: Dict[str, Optional[List[int]]] = {}
        self.dangling: Set[str] = set()  # absent but present as a symlink: its target may appear
        self.cwd: Optional[str] = None
        # what elf.default_lib_token() reads to expand $LIB (the machine is in the cache key)
        triplet = MULTIARCH_TRIPLETS.get(os.uname().machine)
        for p in (["/lib/" + triplet] if triplet else []) + ["/etc/debian_version"]:
            self.sig(self.machine(p))

    def sig(self, path: str) -> Optional[List[int]]:
        path = os.fspath(path)
        if path in self.sigs:
            return self.sigs[path]
        sig = self._stat(path)
        if not os.path.isabs(path):
            self.cwd = os.getcwd()
        if sig is None:  # absent: it can appear only by an entry added to an existing ancestor
            d = os.path.dirname(os.path.abspath(path))
            while d not in self.sigs:
                if self._stat(d) is not None or d == os.path.dirname(d):
                    break
                d = os.path.dirname(d)
        return sig

    def _stat(self, path: str) -> Optional[List[int]]:
        sig = self.sigs[path] = cachefile.stat_sig(path)
        if sig is None and os.path.lexists(path):
            self.dangling.add(path)
        return sig

    def merge(self, sigs: Dict[str, Optional[List[int]]], dangling: Sequence[str], cwd: Optional[str]) -> None:
        """What another recording (a helper process's, over the same tree) was asked about."""
        for path, sig in sigs.items():
            self.sigs.setdefault(path, sig)
        self.dangling.update(dangling)
        self.cwd = self.cwd or cwd

    def deps(self) -> List[list]:
        """What a hit re-stats: every existing path, and the absent ones a directory can't vouch for."""
        return [[p, s] for p, s in self.sigs.items() if s is not None or p in self.dangling]

    def exists(self, path: str) -> bool:
        return self.sig(path) is not None

    def isfile(self, path: str) -> bool:
        sig = self.sig(path)
        return sig is not None and stat.S_ISREG(sig[0])

    def isdir(self, path: str) -> bool:
        sig = self.sig(path)
        return sig is not None and stat.S_ISDIR(sig[0])

    def realpath(self, path: str) -> str:
        self.sig(path)
        return os.path.realpath(path)

    def file_id(self, path: str) -> Optional[Tuple[int, int]]:
        self.sig(path)
        return super().file_id(path)

    def glob(self, pattern: str) -> List[str]:
        # the listed directory (unescaped: glob.escape wraps *, ? and [ in brackets)
        self.sig(re.sub(r"\[([*?\[])\]", r"\1", os.path.dirname(pattern)) or ".")
        return glob.glob(pattern)

    def read_elf(self, path: str, with_sections: bool = False) -> Tuple[Optional[ElfFile], Optional[str]]:
        self.sig(path)
        return read_elf(path, with_sections=with_sections)

    def read_ld_cache(self) -> LdCache:
        path = self.ld_cache_path()
        self.sig(path)
        return self._rooted(read_ld_cache(path))

    def open_text(self, path: str) -> IO[str]:
        self.sig(path)
        return open_regular(path, text=True)  # never a FIFO (docs/security.md)

    def note_cwd(self) -> None:
        self.cwd = os.getcwd()


REAL = FileSystem()


# -- a whole answer, kept by what it read -----------------------------------------------------
#
# A probe that reads the filesystem only through a FileSystem can keep its whole answer in
# cache_dir (cudafix.store.cachefile's rules: owned JSON file, atomic write, anything odd ignored):
# the answer changes only when its key or something it read changes.
#
# file  versioned by the format, cudafix's version and the stat of the modules that compute and
#       shape the answer (:func:`code_version`; other code: the whole file is ignored and rewritten);
# key   everything the probe takes besides the filesystem (the caller's: a JSON string);
# deps  every filesystem fact the cold run used, recorded by a RecordingFileSystem: each path it
#       tested, stat'ed, resolved, parsed, listed or opened (stat_sig, or "absent" plus the stat of
#       the nearest existing parent directory, whose mtime changes when an entry appears there; a
#       dangling symlink is kept itself: its target may appear elsewhere), and the cwd when an empty
#       search-path entry made it a search directory.
# A hit needs the same key and every dep re-stat'ing the same; else the probe runs again.  An
# answer is not stored while an input is younger than cachefile.RACY_NS (coarse mtimes).
# Known limit: a symlink chain re-pointed to another hard link of the very same inode keeps every
# stat equal (a realpath string could then be stale).


def code_version(fmt: int, modules: Sequence[ModuleType]) -> list:
    """A cache file's version: its format, cudafix's version and the stat of ``modules``' files."""
    from cudafix import __version__

    return [fmt, __version__, [cachefile.stat_sig(getattr(m, "__file__", None) or "") for m in modules]]


def cached_run(cache_dir: str, filename: str, version: Any, key: str, root: str, keep: Tuple[str, ...],
               compute: Callable[[FileSystem], T], encode: Callable[[T], Any], decode: Callable[[Any], Optional[T]],
               max_entries: int) -> T:
    """``compute(fs)``'s answer for ``key``, from ``cache_dir/filename`` where nothing it read has
    changed (``decode`` of the stored form; None: malformed, compute again), else computed through
    a RecordingFileSystem and stored (``encode``), the oldest entries dropped past ``max_entries``."""
    entries = cachefile.load(cache_dir, filename, version)
    ent = entries.get(key)
    if isinstance(ent, dict):
        cwd = ent.get("cwd")
        try:
            same_cwd = cwd is None or cwd == os.getcwd()
        except OSError:
            same_cwd = False
        if same_cwd and cachefile.sigs_unchanged(ent.get("deps")):
            hit = decode(ent.get("result"))
            if hit is not None:
                return hit
    started = time.time_ns()
    rec = RecordingFileSystem(root, keep)
    result = compute(rec)
    if cachefile.racy(rec.sigs.values(), started):
        return result  # an input changed moments ago: recorded mtimes may not show the next change
    entries.pop(key, None)
    entries[key] = {"cwd": rec.cwd, "deps": rec.deps(), "result": encode(result)}
    while len(entries) > max_entries:  # insertion order: drop the oldest
        entries.pop(next(iter(entries)))
    cachefile.store(cache_dir, filename, version, entries)
    return result
