"""The startup hook's cache: per env, the plan for each fingerprint (stdlib only, Python 3.8).

The file is ``<env cache dir>/hook.json`` in the format of every cudafix cache
(cudafix.store.cachefile: ``{"version": 2, "entries": {key: entry}}``), read and written through
cudafix.store.safefs (the one trust check).  Here the key is the fingerprint
(cudafix.hook.fingerprint.fingerprint) and an entry is::

    {"post": <fingerprint after the entry's own env corrections>,
     "deps": [[path, stat sig or null], ...],            files whose change makes it stale (safefs.stat_sig)
     "ops": [[rule, op, name, value or null], ...],      in-process env corrections
     "preloads": [[rule, soname, path], ...],            libraries loaded at `import torch`
     "warns": [[rule, quiet if fixed, line if fixed, line if not], ...]}

newest first (JSON objects keep their order).  Parsed with json and checked field by field:
nothing in it can execute, and a malformed file is "no cache" as a whole.  In memory an entry is
an :class:`Entry` (a frozen dataclass).
"""

import dataclasses
from typing import Any, Optional, Tuple

from cudafix.store import cachefile, safefs

CACHE_FILE = "hook.json"
CACHE_VERSION = 2  # 1: the line format of hook.v1 (before 2026-12-01)
MAX_CACHE_BYTES = 1 << 20

_T = (str, type(None))  # a text field: str, or None
_SHAPES = (("deps", (str, (list, type(None)))), ("ops", (_T, _T, _T, _T)), ("preloads", (_T, _T, _T)), ("warns", (_T, bool, _T, _T)))


@dataclasses.dataclass(frozen=True)
class Entry:
    """A cache entry: the in-process plan for one fingerprint (what the hook applies and says)."""

    fp: str
    post_fp: str  # the fingerprint once the entry's own env corrections are applied
    stats: Tuple[Tuple[str, Any], ...] = ()  # (path, stat sig or None): files whose change makes it stale
    ops: Tuple[Tuple[Optional[str], ...], ...] = ()  # (rule, op, name, value)
    preloads: Tuple[Tuple[Optional[str], ...], ...] = ()  # (rule, soname, path)
    warns: Tuple[Tuple[Any, ...], ...] = ()  # (rule, quiet if fixed, line if fixed, line if not)

    def __post_init__(self):  # rows as tuples, whatever sequences the caller built them from
        for name in ("stats", "ops", "preloads", "warns"):
            object.__setattr__(self, name, tuple(tuple(row) for row in getattr(self, name)))


def _rows(value, shape):
    if not isinstance(value, list):
        raise ValueError("not a list")
    out = []
    for row in value:
        if not isinstance(row, list) or len(row) != len(shape) or not all(isinstance(x, t) for x, t in zip(row, shape)):
            raise ValueError("bad record")
        out.append(tuple(row))
    return out


def parse_entries(data, want=None):
    """The entries of a cache file's bytes (only those whose fingerprint or post-correction
    fingerprint is in ``want``, if given); ValueError when any part of it is malformed."""
    entries = []
    for fp, rec in cachefile.parse(data, CACHE_VERSION).items():
        if not isinstance(rec, dict) or not isinstance(rec.get("post"), str):
            raise ValueError("bad entry")
        e = Entry(fp, rec["post"], *(_rows(rec.get(name), shape) for name, shape in _SHAPES))
        if want is None or fp in want or e.post_fp in want:
            entries.append(e)
    return entries


def dump_entries(entries):
    """The cache file's bytes for ``entries`` (newest first; one entry per fingerprint)."""
    out = {}
    for e in entries:
        if e.fp not in out:
            out[e.fp] = {"post": e.post_fp, "deps": [list(x) for x in e.stats], "ops": [list(x) for x in e.ops],
                         "preloads": [list(x) for x in e.preloads], "warns": [list(x) for x in e.warns]}
    return cachefile.dump(CACHE_VERSION, out)


def entry_fresh(entry):
    """Every file the entry depends on has the stat signature it had (or is still absent)."""
    return all(safefs.stat_sig(path) == sig for path, sig in entry.stats)


def find_entry(data, fp):
    """In a cache file's bytes, the first entry (newest first) naming fp as its fingerprint or its
    post-correction one whose files are unchanged, or None; ValueError when malformed."""
    for e in parse_entries(data, (fp,)):
        if entry_fresh(e):
            return e
    return None


def read_cache(path, want=None):
    """(entries, None) or ([], reason); never raises.  The same checks as :func:`lookup`'s."""
    try:
        data, why = safefs.read_private(path, MAX_CACHE_BYTES)
        if data is None:
            return [], "no cache yet" if why == "no such file" else "cache not trusted (%s)" % why
        return parse_entries(data, want), None
    except Exception as exc:  # noqa: BLE001 - a cache is never worth an exception
        return [], "cache unusable (%s)" % type(exc).__name__


def lookup(path, fp):
    """The first fresh entry for fp in the cache file at path, or None (also for any cache that
    is not trusted: safefs's checks of the whole path, a regular file of ours writable by nobody
    else, at most MAX_CACHE_BYTES, well-formed).  Never raises, never blocks."""
    try:
        data, _ = safefs.read_private(path, MAX_CACHE_BYTES)
        if data is not None:
            return find_entry(data, fp)
    except Exception:  # noqa: BLE001 - a cache is never worth an exception: then none
        pass
    return None
