"""Where cudafix keeps its caches.

Never a place another user can write (it could plant a cache we
then trust): the env prefix when we own it,
else the user's cache dir.  Callers must still treat every cache as untrusted input.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: `typing` is not imported at `import torch` (hookenv; docs/benchmarks.md)
    from typing import Mapping, Optional


def user_cache_dir(env: Optional[Mapping[str, str]] = None) -> str:
    """$XDG_CACHE_HOME/cudafix or ~/.cache/cudafix (no HOME: a per-uid dir under /tmp)."""
    env = os.environ if env is None else env
    xdg = env.get("XDG_CACHE_HOME")
    if xdg and os.path.isabs(xdg):
        return os.path.join(xdg, "cudafix")
    home = env.get("HOME")
    if home and os.path.isabs(home):
        return os.path.join(home, ".cache", "cudafix")
    local = env.get("LOCALAPPDATA")  # Windows: no HOME, no os.getuid
    if local and os.path.isabs(local):
        return os.path.join(local, "cudafix", "cache")
    getuid = getattr(os, "getuid", None)
    return os.path.join("/tmp", "cudafix-%d" % getuid()) if getuid else os.path.join(os.path.expanduser("~"), ".cudafix-cache")


ROOT_VAR = "CUDAFIX_ROOT"


def probe_root(env: Optional[Mapping[str, str]] = None) -> str:
    """The filesystem root every probe reads /sys, /proc, /dev, /etc and /usr under: "/", or
    $CUDAFIX_ROOT when it names an existing directory (tests lay a WSL or driver tree out in a
    temp dir).  The one place probes take it from (cudafix.probes.take_snapshot passes it on)."""
    env = os.environ if env is None else env
    root = env.get(ROOT_VAR) or ""
    if root and os.path.isabs(root) and os.path.isdir(root):
        return os.path.normpath(root)
    return "/"


_M61 = (1 << 61) - 1


def env_key(prefix: str) -> str:
    """A short stable key for one Python environment (its sys.prefix).

    Computed with builtins only (no hashlib): cheap to import at `import torch`, where the
    startup hook's check (cudafix.hook.runtime) looks its cache up.  Changing it orphans every cache.
    """
    n = int.from_bytes(os.path.abspath(prefix).encode("utf-8", "surrogateescape"), "little") % _M61
    return "%016x" % (n * 0x9E3779B97F4A7C15 % _M61)


def env_cache_dir(prefix: Optional[str] = None, env: Optional[Mapping[str, str]] = None) -> str:
    """Per-environment cache dir: <user cache>/envs/<key of sys.prefix>."""
    return os.path.join(user_cache_dir(env), "envs", env_key(prefix or sys.prefix))
