"""The environment variables CUDA and torch read, and the driver's JIT (PTX -> SASS) cache.

Only variables that are set are recorded; an empty value is kept as "" (distinct from unset:
``CUDA_VISIBLE_DEVICES=''`` means *no GPU*).
"""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Dict, Mapping, Optional, Tuple

from cudafix.knowledge import env_vars, jit_cache
from cudafix.model.snapshot import JitCache

# Variables read by the CUDA driver/runtime, by torch, by the dynamic loader, and by conda
# activation: the table's PROBE rows (cudafix/knowledge/env_vars.py, each row cited).
VARIABLES = env_vars.names(env_vars.PROBE)
# Any other variable with these prefixes is recorded too (CUDA reads more than it documents).
PREFIXES = env_vars.PROBE_PREFIXES

# CUDA_CACHE_MAXSIZE's bounds: cudafix/knowledge/jit_cache.py.  The driver's default size is
# unknown (no cited change point): no size is recorded for it, only that it is the default.
CACHE_MAX_BYTES = jit_cache.MAX_BYTES
CACHE_DEFAULT_NOTE = jit_cache.DEFAULT_UNKNOWN_NOTE
MAX_CACHE_FILES = 200000


def collect_env(env: Mapping[str, str]) -> Dict[str, str]:
    """The set CUDA/torch variables (empty values kept), sorted by name."""
    out = {}
    for k in sorted(env):
        if k in VARIABLES or k.startswith(PREFIXES):
            out[k] = env[k]
    return out


def parse_cache_maxsize(value: Optional[str]) -> Tuple[Optional[int], Optional[str]]:
    """(effective bytes, None) or (None, reason).  None value -> (None, the driver default's note)."""
    if value is None:
        return None, CACHE_DEFAULT_NOTE
    text = value.strip()
    if not text.isdigit():
        return None, "CUDA_CACHE_MAXSIZE=%r is not a byte count" % value
    n = int(text)
    return min(n, CACHE_MAX_BYTES), None


def parse_flag(value: Optional[str]) -> Optional[bool]:
    """CUDA's 0/1 switches: unset/"0" -> False, a non-zero integer -> True, anything else -> None."""
    if value is None:
        return False
    text = value.strip()
    if text.lstrip("-").isdigit():
        return int(text) != 0
    return None


def _nearest_existing(path: str) -> str:
    p = os.path.abspath(path)
    for _ in range(64):
        if os.path.exists(p):
            return p
        parent = os.path.dirname(p)
        if parent == p:
            break
        p = parent
    return p


def dir_size(path: str, max_files: int = MAX_CACHE_FILES) -> Tuple[Optional[int], Optional[str]]:
    """Bytes used under ``path`` (no symlinks followed; at most ``max_files`` files)."""
    total = 0
    count = 0
    stack = [path]
    while stack:
        d = stack.pop()
        try:
            it = os.scandir(d)
        except OSError as exc:
            if d == path:
                return None, "%s: %s" % (path, exc.strerror or exc)
            continue
        with it:
            for de in it:
                count += 1
                if count > max_files:
                    return None, "more than %d entries under %s; not counted" % (max_files, path)
                try:
                    if de.is_dir(follow_symlinks=False):
                        stack.append(de.path)
                    elif de.is_file(follow_symlinks=False):
                        total += de.stat(follow_symlinks=False).st_size
                except OSError:
                    continue
    return total, None


def probe_jit_cache(env: Mapping[str, str], home: Optional[str] = None, root: str = "/",
                    keep: Tuple[str, ...] = ()) -> JitCache:
    """``root`` / ``keep``: the probe root the cache directory (a path the machine names) lies
    under, reported as read (cudafix.probes.machine.host.machine_path)."""
    jc = JitCache()
    path = env.get("CUDA_CACHE_PATH")
    if path:
        jc.path = path
    else:
        home = home or env.get("HOME") or os.path.expanduser("~")
        if home and home != "~":
            jc.path = os.path.join(home, ".nv", "ComputeCache")
        else:
            jc.unknown["path"] = "no CUDA_CACHE_PATH and no HOME"
    if jc.path and root != "/":
        from cudafix.probes.machine.host import machine_path

        jc.path = machine_path(root, jc.path, keep)

    size, why = parse_cache_maxsize(env.get("CUDA_CACHE_MAXSIZE"))
    if size is None and "CUDA_CACHE_MAXSIZE" not in env:
        jc.maxsize_via = "driver default"
        jc.unknown["maxsize_default"] = CACHE_DEFAULT_NOTE
    elif size is None:
        jc.unknown["maxsize"] = why or "unknown"
    else:
        jc.maxsize = size
        if "CUDA_CACHE_MAXSIZE" in env:
            jc.maxsize_via = "CUDA_CACHE_MAXSIZE"
            if int(env["CUDA_CACHE_MAXSIZE"].strip()) > CACHE_MAX_BYTES:
                jc.unknown["maxsize_clamped"] = "CUDA_CACHE_MAXSIZE above the 4 GiB maximum; 4 GiB used"

    disabled = parse_flag(env.get("CUDA_CACHE_DISABLE"))
    if disabled is None:
        jc.unknown["disabled"] = "CUDA_CACHE_DISABLE=%r is not 0/1" % env.get("CUDA_CACHE_DISABLE")
    else:
        jc.disabled = disabled

    if jc.path:
        if os.path.isdir(jc.path):
            jc.writable = os.access(jc.path, os.W_OK | os.X_OK)
            jc.used_bytes, why = dir_size(jc.path)
            if why:
                jc.unknown["used_bytes"] = why
        else:
            parent = _nearest_existing(jc.path)
            if os.path.exists(jc.path):
                jc.writable = False
                jc.unknown["used_bytes"] = "%s is not a directory" % jc.path
            else:
                jc.writable = os.path.isdir(parent) and os.access(parent, os.W_OK | os.X_OK)
                jc.used_bytes = 0
    return jc
