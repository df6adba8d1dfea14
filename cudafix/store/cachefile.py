"""Small JSON result caches in cudafix's cache dir, validated by re-stat (the fatbin cache's rules).

- A cache file is read only if we own it and nobody else can write it (another
  user could otherwise feed us a forged cache);
  a corrupt, foreign or other-version file is ignored (and rewritten by the next store).
- Writes are atomic (temp file + rename): a reader sees the old file or the new one.
- An unwritable cache dir only costs speed.

A cached result is served only if every file and directory it was computed from still has the
same ``stat_sig``: (type and mode, device, inode, size, mtime_ns, ctime_ns), or is still absent.
A directory's mtime changes when an entry is added, removed or renamed in it, so a re-stat of
each searched directory covers "a library appeared where the loader looks".  Timestamps are
coarse (a kernel tick): a change in the same tick as the recording could keep mtime equal, so
results whose inputs changed within ``RACY_NS`` of the recording are not stored (git's "racy
clean" rule).
"""

from __future__ import annotations

import json
import os
import stat
from typing import Any, Dict, List, Optional

MAX_BYTES = 8 << 20
RACY_NS = 2_000_000_000  # inputs modified this recently are not trusted to show a later change


def stat_sig(path: str) -> Optional[List[int]]:
    """What a re-stat compares (following symlinks); None when ``path`` cannot be stat'ed."""
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    return [st.st_mode, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]


def sigs_unchanged(deps: Any) -> bool:
    """True when every ``[path, sig]`` pair of ``deps`` still holds (malformed: False)."""
    if not isinstance(deps, list):
        return False
    for item in deps:
        if not isinstance(item, list) or len(item) != 2 or not isinstance(item[0], str):
            return False
        if stat_sig(item[0]) != item[1]:
            return False
    return True


def racy(sigs: Any, started_ns: int) -> bool:
    """True when a recorded mtime is within RACY_NS of ``started_ns`` (or after it)."""
    for sig in sigs:
        if sig is not None and sig[4] >= started_ns - RACY_NS:
            return True
    return False


def safe_to_read(path: str) -> bool:
    """Trust only a cache file we own that nobody else can write (else it could be forged)."""
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISREG(st.st_mode) and st.st_uid == os.getuid() and not (st.st_mode & 0o022)


def load(cache_dir: str, filename: str, version: int) -> Dict[str, Any]:
    """The entries of ``cache_dir/filename``, or {} for a missing, foreign, corrupt or old file."""
    path = os.path.join(cache_dir, filename)
    if not safe_to_read(path):
        return {}
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.loads(fh.read(MAX_BYTES))
    except (OSError, ValueError, UnicodeDecodeError):
        return {}
    if not isinstance(data, dict) or data.get("version") != version or not isinstance(data.get("entries"), dict):
        return {}
    return data["entries"]


def store(cache_dir: str, filename: str, version: int, entries: Dict[str, Any]) -> None:
    """Write ``entries`` atomically; errors are swallowed (a cache only saves time)."""
    from cudafix.store.fsutil import atomic_write

    try:
        os.makedirs(cache_dir, mode=0o700, exist_ok=True)
        data = json.dumps({"version": version, "entries": entries}).encode("utf-8")
        atomic_write(os.path.join(cache_dir, filename), data, mode=None)
    except (OSError, TypeError, ValueError):
        pass
