"""The extension scan's directory walk, each directory's listing cached by the directory's stat.

Adding, removing or renaming an entry changes its directory's mtime and ctime, so a directory
whose ``stat_sig`` is what it was when it was listed still holds the same names: its
subdirectories and shared objects come from the cache, one ``stat`` instead of a ``scandir``
and a type check per entry.  A listing whose directory changed within ``cachefile.RACY_NS`` of
the scan is not stored (a change in the same timestamp tick could keep the mtime equal).  A
file rewritten in place keeps its directory's mtime: the caller stats every file it yields.

A walk that met no racy directory is stored whole, in a file of its own: the directories in order
with the stat each had, and the files found.  The next walk of the root is one stat per directory
against that file; the listings (a larger file) are read only when one of the stats differs.

Real paths are derived, not resolved: the walk never enters a symlinked directory, so below its
root a path's real form is the root's realpath joined with the same names; only a symlinked
file is resolved with ``os.path.realpath``.
"""

from __future__ import annotations

import os
import time

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

from cudafix.store import cachefile

DIRS_FILE = "extensions-dirs.json"  # each directory's listing, read only when a stored walk misses
DIRS_VERSION = 2  # 1 held the walks too
WALKS_FILE = "extensions-walks.json"  # the stored walks, with each directory's stat: all a warm scan reads
WALKS_VERSION = 1
MAX_DIRS = 20000  # directories visited per root: a bound on the walk of a huge PYTHONPATH entry

# Never entered: torch's and NVIDIA's own trees (other probes read them), metadata, sources.
SKIP_DIRS = {"__pycache__", "torch", "nvidia", "include", "share", "node_modules", ".git"}


class WalkLimit(Exception):
    pass


if TYPE_CHECKING:  # an annotation only: typing is not imported at run time (issue 23)
    Listing = Tuple[List[str], List[List[Any]]]  # (subdirectory names, [file name, is a symlink])


class DirCache:
    """Directory listings and whole walks of one env's scans, in its cache dir (none: every
    directory is read).  The walks (each directory visited with its stat, and the files found)
    are one file, the listings another, read only when a walk misses: a warm scan of the rich
    venv of docs/benchmarks.md parsed a 394 KB file that held both, to use 1,096 stats of it."""

    def __init__(self, cache_dir: Optional[str], is_candidate: Callable[[str], bool]) -> None:
        self.cache_dir = cache_dir
        self.is_candidate = is_candidate
        self.walks: Dict[str, Any] = cachefile.load(cache_dir, WALKS_FILE, WALKS_VERSION) if cache_dir else {}
        self._entries: Optional[Dict[str, Any]] = None
        self.used: Dict[str, Any] = {}  # listings this scan used or made
        self.used_walks: Dict[str, Any] = {}
        self.dirty = False  # a listing to store
        self.dirty_walks = False
        self.started_ns = time.time_ns()

    @property
    def entries(self) -> Dict[str, Any]:
        """The stored listings (read on first use)."""
        if self._entries is None:
            self._entries = cachefile.load(self.cache_dir, DIRS_FILE, DIRS_VERSION) if self.cache_dir else {}
        return self._entries

    def listing(self, d: str) -> Optional[Listing]:
        """Subdirectories worth entering and candidate files of ``d``; None when unreadable."""
        sig = cachefile.stat_sig(d)
        if sig is None:
            return None
        ent = self.used.get(d) or self.entries.get(d)  # listed already by this scan, or stored
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

    def whole_walk(self, key: str) -> Optional[List[List[Any]]]:
        """The files of a stored walk whose directories all still have their stored stat; None
        when any changed (or none is stored).  Marks it as this scan's."""
        ent = self.walks.get(key)
        if not (isinstance(ent, list) and len(ent) == 3 and all(isinstance(x, list) for x in ent)
                and len(ent[0]) == len(ent[1])):
            return None
        stat_sig = cachefile.stat_sig
        for d, sig in zip(ent[0], ent[1]):
            if not isinstance(d, str) or stat_sig(d) != sig:
                return None
        for f in ent[2]:
            if not (isinstance(f, list) and len(f) == 2 and isinstance(f[0], str) and (f[1] is None or isinstance(f[1], str))):
                return None
        self.used_walks[key] = ent
        return ent[2]

    def store_walk(self, key: str, visited: List[str], found: List[List[Any]]) -> None:
        """A walk each of whose directories has its listing in ``used`` (from the cache or new, not racy)."""
        ent = [visited, [self.used[d][0] for d in visited], found]
        if self.walks.get(key) != ent:
            self.dirty_walks = True
        self.used_walks[key] = ent

    def save(self) -> None:
        """Keep the walks and listings of what this scan visited (others are dropped), each file
        only when something in it is new."""
        if not self.cache_dir:
            return
        if self.dirty or self.dirty_walks:
            cachefile.store(self.cache_dir, WALKS_FILE, WALKS_VERSION, self.used_walks)
        if self.dirty:
            for visited, _sigs, _found in self.used_walks.values():  # a stored walk's listings: kept for when it misses
                for d in visited:
                    if d not in self.used and d in self.entries:
                        self.used[d] = self.entries[d]
            cachefile.store(self.cache_dir, DIRS_FILE, DIRS_VERSION, self.used)


def walk(root: str, max_depth: int, cache: DirCache, workers: int = 1) -> Iterator[Tuple[str, str]]:
    """(path, real path) of the candidate files under ``root``, depth first; a directory deeper
    than ``max_depth`` is not entered.  WalkLimit after MAX_DIRS directories.

    A walk whose every listing could be stored is stored whole (the directories in order with
    their stats, and the files found): the next walk of the root checks one stat per directory
    against it and yields the stored files, without reading a listing.  ``workers`` > 1: a walk
    that reads listings walks the root's subdirectories in that many processes (:func:`_split`),
    with the same result."""
    key = "\0walk\0%s\0%d" % (root, max_depth)  # never a directory's path: those hold no NUL
    stored = cache.whole_walk(key)
    if stored is not None:
        for path, real in stored:
            yield path, (os.path.realpath(path) if real is None else real)
        return
    top = (root, os.path.realpath(root), 0)
    got = _split(top, max_depth, cache, workers) if workers > 1 else None
    visited, found, whole = got if got is not None else _tree([top], max_depth, cache, root)
    for path, real in found:
        yield path, (os.path.realpath(path) if real is None else real)
    if whole:
        cache.store_walk(key, visited, found)


def _tree(stack: List[Tuple[str, str, int]], max_depth: int, cache: DirCache,
          root: str) -> Tuple[List[str], List[List[Any]], bool]:
    """The directories visited from ``stack`` (depth first, in the order a walk pops them), the
    files found (``[path, real path or None for a symlink]``) and whether every listing could be
    stored."""
    visited: List[str] = []
    found: List[List[Any]] = []
    whole = True  # every listing cacheable: the walk can be stored
    while stack:
        d, real_d, depth = stack.pop()
        if len(visited) >= MAX_DIRS:
            raise WalkLimit("more than %d directories under %s: the rest were not examined" % (MAX_DIRS, root))
        visited.append(d)
        got = cache.listing(d)
        if got is None:
            whole = False
            continue
        whole = whole and d in cache.used
        dirs, files = got
        d_, real_ = _slash(d), _slash(real_d)
        for name, is_link in files:
            found.append([d_ + name, None if is_link else real_ + name])
        if depth + 1 < max_depth:
            for name in dirs:
                stack.append((d_ + name, real_ + name, depth + 1))
    return visited, found, whole


# Below this many subdirectories of a root, walking them in several processes costs more than
# it saves (a fork against a listing: docs/benchmarks.md, "Figures behind the code").
SPLIT_MIN_DIRS = 16


def _split(top: Tuple[str, str, int], max_depth: int, cache: DirCache,
           workers: int) -> Optional[Tuple[List[str], List[List[Any]], bool]]:
    """:func:`_tree` from ``top``, its subdirectories' trees walked in ``workers`` processes
    (cudafix.forks.split_work) and put together in the order one walk visits them: the
    H200 image's site-packages is 3,639 directories, listed one by one in one process.  Each
    process brings back the listings it read, for the cache.  None: not split (too few
    subdirectories, an unreadable root, no fork here)."""
    root, real_root, _depth = top
    got = cache.listing(root) if max_depth > 1 else None
    if got is None or len(got[0]) < SPLIT_MIN_DIRS:
        return None
    from cudafix import forks

    dirs, files = got
    root_, real_ = _slash(root), _slash(real_root)
    subtrees = [(root_ + name, real_ + name) for name in reversed(dirs)]  # the order one walk pops them in

    def work(share: List[Tuple[str, str]]) -> Dict[str, Any]:
        out: Dict[str, Any] = {}
        for d, real_d in share:
            visited, found, whole = _tree([(d, real_d, 1)], max_depth, cache, root)
            # cache.dirty: whether this process has listed anything new (a child's answers are used all together)
            out[d] = (visited, found, whole, {v: cache.used[v] for v in visited if v in cache.used}, cache.dirty)
        return out

    answers = forks.split_work([(t, 0) for t in subtrees], workers, work, SPLIT_MIN_DIRS)
    if not answers:
        return None
    visited = [root]
    found: List[List[Any]] = [[root_ + name, None if is_link else real_ + name] for name, is_link in files]
    whole = root in cache.used
    for d, real_d in subtrees:
        if d in answers:  # a child's walk: its listings join this process's
            v, f, w, used, dirty = answers[d]
            cache.used.update(used)
            cache.dirty = cache.dirty or dirty
        else:  # no child answered for it: walked here
            v, f, w = _tree([(d, real_d, 1)], max_depth, cache, root)
        visited.extend(v)
        found.extend(f)
        whole = whole and w
        if len(visited) > MAX_DIRS:
            raise WalkLimit("more than %d directories under %s: the rest were not examined" % (MAX_DIRS, root))
    return visited, found, whole


def _slash(d: str) -> str:
    """``d`` ready for a name to be appended: what os.path.join(d, name) gives for a plain name."""
    return d if d.endswith("/") or not d else d + "/"
