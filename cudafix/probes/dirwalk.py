"""The extension scan's directory walk, each directory's listing cached by the directory's stat.

Adding, removing or renaming an entry changes its directory's mtime and ctime, so a directory
whose ``stat_sig`` is what it was when it was listed still holds the same names: its
subdirectories and shared objects come from the cache, one ``stat`` instead of a ``scandir``
and a type check per entry.  A listing whose directory changed within ``cachefile.RACY_NS`` of
the scan is not stored (a change in the same timestamp tick could keep the mtime equal).  A
file rewritten in place keeps its directory's mtime: the caller stats every file it yields.

Real paths are derived, not resolved: the walk never enters a symlinked directory, so below its
root a path's real form is the root's realpath joined with the same names; only a symlinked
file is resolved with ``os.path.realpath``.
"""

from __future__ import annotations

import os
import time
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

from cudafix.store import cachefile

DIRS_FILE = "extensions-dirs.json"
DIRS_VERSION = 1
MAX_DIRS = 20000  # directories visited per root: a bound on the walk of a huge PYTHONPATH entry

# Never entered: torch's and NVIDIA's own trees (other probes read them), metadata, sources.
SKIP_DIRS = {"__pycache__", "torch", "nvidia", "include", "share", "node_modules", ".git"}


class WalkLimit(Exception):
    pass


Listing = Tuple[List[str], List[List[Any]]]  # (subdirectory names, [file name, is a symlink])


class DirCache:
    """Directory listings of one env's scans, in its cache dir (none: every directory is read)."""

    def __init__(self, cache_dir: Optional[str], is_candidate: Callable[[str], bool]) -> None:
        self.cache_dir = cache_dir
        self.is_candidate = is_candidate
        self.entries: Dict[str, Any] = cachefile.load(cache_dir, DIRS_FILE, DIRS_VERSION) if cache_dir else {}
        self.used: Dict[str, Any] = {}
        self.dirty = False
        self.started_ns = time.time_ns()

    def listing(self, d: str) -> Optional[Listing]:
        """Subdirectories worth entering and candidate files of ``d``; None when unreadable."""
        sig = cachefile.stat_sig(d)
        if sig is None:
            return None
        ent = self.entries.get(d)
        if isinstance(ent, list) and len(ent) == 3 and ent[0] == sig and isinstance(ent[1], list) \
                and isinstance(ent[2], list):
            self.used[d] = ent
            return ent[1], ent[2]
        try:
            it = os.scandir(d)
        except OSError:
            return None
        dirs: List[str] = []
        files: List[List[Any]] = []
        with it:
            for e in it:
                name = e.name
                try:
                    if e.is_dir(follow_symlinks=False):
                        if name not in SKIP_DIRS and not name.endswith((".dist-info", ".egg-info")):
                            dirs.append(name)
                    elif self.is_candidate(name) and e.is_file():
                        files.append([name, e.is_symlink()])
                except OSError:
                    continue
        if not cachefile.racy([sig], self.started_ns):
            self.used[d] = [sig, dirs, files]
            self.dirty = True
        return dirs, files

    def save(self) -> None:
        """After a new listing: keep those of the directories this scan visited (others are dropped)."""
        if self.cache_dir and self.dirty:
            cachefile.store(self.cache_dir, DIRS_FILE, DIRS_VERSION, self.used)


def walk(root: str, max_depth: int, cache: DirCache) -> Iterator[Tuple[str, str]]:
    """(path, real path) of the candidate files under ``root``, depth first; a directory deeper
    than ``max_depth`` is not entered.  WalkLimit after MAX_DIRS directories."""
    stack: List[Tuple[str, str, int]] = [(root, os.path.realpath(root), 0)]
    visited = 0
    while stack:
        d, real_d, depth = stack.pop()
        visited += 1
        if visited > MAX_DIRS:
            raise WalkLimit("more than %d directories under %s: the rest were not examined" % (MAX_DIRS, root))
        got = cache.listing(d)
        if got is None:
            continue
        dirs, files = got
        d_, real_ = _slash(d), _slash(real_d)
        for name, is_link in files:
            path = d_ + name
            yield path, (os.path.realpath(path) if is_link else real_ + name)
        if depth + 1 < max_depth:
            for name in dirs:
                stack.append((d_ + name, real_ + name, depth + 1))


def _slash(d: str) -> str:
    """``d`` ready for a name to be appended: what os.path.join(d, name) gives for a plain name."""
    return d if d.endswith("/") or not d else d + "/"
