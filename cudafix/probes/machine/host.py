"""The host: OS, kernel release, glibc, machine — plus small I/O helpers the probes share.

The helpers never raise for a missing or unreadable file: they return ``(None, reason)`` so a
probe can record the reason under ``unknown``.
"""

from __future__ import annotations

import errno
import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Dict, Optional, Sequence, Tuple

# Files the probes read as text are small (version files, /proc entries, metadata).  Anything
# larger is read only up to this many bytes: a bogus multi-GB "version.json" must not stall us.
MAX_TEXT_BYTES = 1 << 20


def describe_oserror(exc: BaseException) -> str:
    """One short line for an OSError (symlink loops named as such)."""
    if isinstance(exc, OSError):
        if exc.errno == errno.ELOOP:
            return "symlink loop"
        if exc.errno == errno.ENOENT:
            return "does not exist"
        if exc.errno in (errno.EACCES, errno.EPERM):
            return "permission denied"
        if exc.strerror:
            return exc.strerror.lower()
    return "%s: %s" % (type(exc).__name__, exc)


def which(cmd: str, path: str) -> Optional[str]:
    """``shutil.which(cmd, path=path)`` for a plain command name on POSIX (shutil's own code
    elsewhere).  Importing shutil costs `cudafix status` its imports of bz2, lzma and fnmatch
    (docs/benchmarks.md, "Figures behind the code"): this is its POSIX branch, the same checks in the same order (tests/test_probe_which.py)."""
    if os.name == "nt" or os.path.dirname(cmd):
        import shutil

        return shutil.which(cmd, path=path)
    if not path:
        return None  # PATH='' matches nothing, whereas PATH=':' looks in the current directory
    seen = set()
    for d in path.split(os.pathsep):
        if d in seen:
            continue
        seen.add(d)
        name = os.path.join(d, cmd)
        if os.path.exists(name) and os.access(name, os.F_OK | os.X_OK) and not os.path.isdir(name):
            return name
    return None


def open_regular(path: str, text: bool = False):
    """``path`` opened for reading if it is a regular file; OSError otherwise.  A FIFO, socket or
    device (planted in a dist-info on sys.path) is refused by stat before any open, and the open
    is O_NONBLOCK + fstat again, so a swap in between cannot hang `status` or `import torch`
    either (docs/security.md).  procfs and sysfs files are regular files."""
    import errno
    import stat as st_

    if not st_.S_ISREG(os.stat(path).st_mode):
        raise OSError(errno.EINVAL, "not a regular file", path)
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        if not st_.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file", path)
    except BaseException:
        os.close(fd)
        raise
    return os.fdopen(fd, "r", encoding="utf-8", errors="replace") if text else os.fdopen(fd, "rb")


def read_text(path: str, limit: int = MAX_TEXT_BYTES) -> Tuple[Optional[str], Optional[str]]:
    """(text, None) or (None, reason).  Decodes UTF-8 with replacement; reads at most ``limit``.
    Only a regular file (:func:`open_regular`)."""
    try:
        with open_regular(path) as fh:
            data = fh.read(limit)
    except (OSError, ValueError) as exc:
        return None, "%s: %s" % (path, describe_oserror(exc))
    return data.decode("utf-8", "replace"), None


def join_root(root: str, path: str) -> str:
    """``path`` (absolute) under an injectable root directory ("/" in production)."""
    if not root or root == "/":
        return path
    return os.path.join(root, path.lstrip("/"))


def machine_path(root: str, path: str, keep: Sequence[str] = ()) -> str:
    """Where the probes read a path *the machine names* (a system directory, an ld.so.cache or
    LD_LIBRARY_PATH entry, an absolute DT_RPATH, $HOME) under the probe root (docs/wsl.md,
    "One root").  Unchanged under "/", for a relative path, and for one already inside the root
    or inside a ``keep`` directory (the inspected env's own prefix: an env that lives outside a
    laid-out tree is read where it is, e.g. LD_LIBRARY_PATH=$CONDA_PREFIX/lib)."""
    if not root or root == "/" or not path.startswith("/"):
        return path
    for base in (root,) + tuple(keep):
        if base and (path == base or path.startswith(base.rstrip("/") + "/")):
            return path
    return join_root(root, path)


def glibc_version() -> Optional[str]:
    try:
        value = os.confstr("CS_GNU_LIBC_VERSION")  # "glibc 2.36"
    except (AttributeError, ValueError, OSError):
        return None
    if not value:
        return None
    parts = value.split()
    return parts[-1] if parts and parts[0] == "glibc" else value


def probe_host() -> Dict[str, str]:
    """os, kernel (release), glibc, machine; keys whose value is unknown are left out."""
    info = {}  # type: Dict[str, str]
    if hasattr(os, "uname"):  # POSIX: what platform.uname() reads there, without importing platform (~1.4 ms)
        uname = os.uname()
        system = uname.sysname
    else:  # Windows has no os.uname
        import platform

        uname = platform.uname()
        system = uname.system
    info["os"] = system.lower() or "unknown"
    if uname.release:
        info["kernel"] = uname.release
    if uname.machine:
        info["machine"] = uname.machine
    glibc = glibc_version()
    if glibc:
        info["glibc"] = glibc
    return info
