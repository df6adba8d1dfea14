"""Small JSON result caches in cudafix's cache dir, validated by re-stat (the fatbin cache's rules).

- A cache file is read and written only through cudafix.store.safefs: the whole directory path
  ours (or root's) with no other user's link followed, the file a regular one of ours that
  nobody else can write (docs/security.md); a corrupt, foreign or other-version file is
  ignored (and rewritten by the next store).
- Writes are atomic (temp file + rename): a reader sees the old file or the new one.
- An unwritable cache dir only costs speed.

A cached result is served only if every file and directory it was computed from still has the
same ``stat_sig`` (safefs.stat_sig: type and mode, device, inode, size, mtime_ns, ctime_ns), or
is still absent.
A directory's mtime changes when an entry is added, removed or renamed in it, so a re-stat of
each searched directory covers "a library appeared where the loader looks".  Timestamps are
coarse (a kernel tick): a change in the same tick as the recording could keep mtime equal, so
results whose inputs changed within ``RACY_NS`` of the recording are not stored (git's "racy
clean" rule).
"""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: the hook reads its cache through this module at `import torch`
    from typing import Any, Dict

from cudafix.store import safefs
from cudafix.store.safefs import stat_sig  # noqa: F401  the one stat signature (also the hook cache's)

MAX_BYTES = 8 << 20
RACY_NS = 2_000_000_000  # inputs modified this recently are not trusted to show a later change


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
        mtime = safefs.sig_mtime_ns(sig)
        if mtime is not None and mtime >= started_ns - RACY_NS:
            return True
    return False


def parse(raw: bytes, version: int) -> Dict[str, Any]:
    """The entries of a cache file's bytes: ``{"version": version, "entries": {key: entry}}``.
    ValueError when it is not that (corrupt, truncated, another version)."""
    import json  # here: `status` imports this module before it forks its probes (cudafix.probes.ahead)

    data = json.loads(raw.decode("utf-8"))
    if not isinstance(data, dict) or data.get("version") != version or not isinstance(data.get("entries"), dict):
        raise ValueError("not a cudafix cache of version %r" % (version,))
    return data["entries"]


def dump(version: int, entries: Dict[str, Any]) -> bytes:
    """The bytes of a cache file (the one format of every cudafix cache; :func:`parse` reads it)."""
    import json

    return json.dumps({"version": version, "entries": entries}, separators=(",", ":")).encode("ascii")


def load(cache_dir: str, filename: str, version: int) -> Dict[str, Any]:
    """The entries of ``cache_dir/filename``, or {} for a missing, foreign, corrupt or old file."""
    raw, _ = safefs.read_private(os.path.join(cache_dir, filename), MAX_BYTES)
    if raw is None:
        return {}
    try:
        return parse(raw, version)
    except (ValueError, UnicodeDecodeError):
        return {}


def store(cache_dir: str, filename: str, version: int, entries: Dict[str, Any]) -> bool:
    """Write ``entries`` atomically; False (nothing else) when it cannot be: a cache only saves time."""
    try:
        data = dump(version, entries)
    except (TypeError, ValueError):
        return False
    return safefs.write_private(os.path.join(cache_dir, filename), data)
