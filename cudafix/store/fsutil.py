"""Writing files so that readers never see half of one."""

from __future__ import annotations

import os
from typing import List, Optional


def atomic_write(path: str, data: bytes, mode: Optional[int] = 0o600, mtime: Optional[float] = None,
                 fsync: bool = False, make_dirs: bool = False) -> None:
    """Write ``data`` to ``path`` through a temporary file in the same directory + os.replace.

    Readers (and concurrent writers) see the old file or a whole new one, never a mix.  ``mode``
    is set before the rename (None keeps mkstemp's 0600); ``mtime`` stamps the file (activation
    compares it with what it watches).  Raises OSError; the temporary file never stays behind.
    """
    import tempfile  # only when writing: warm paths that only read never import it

    directory = os.path.dirname(os.path.abspath(path))
    if make_dirs:  # the env's own etc/conda/activate.d (`hooks install`): the env owner's tree
        os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            if fsync:
                fh.flush()
                os.fsync(fh.fileno())
        if mode is not None:
            os.chmod(tmp, mode)
        if mtime is not None:
            os.utime(tmp, (mtime, mtime))
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def scratch_dirs(base: str, names) -> List[str]:
    """Create (if missing) and return directories ``names`` under ``base``, a private scratch dir
    made by tempfile.mkdtemp (mode 0700, ours): nobody else can have planted anything there, so
    plain makedirs is safe; refused for any other base (docs/security.md)."""
    from cudafix.store import safefs  # the one trust check

    st = os.lstat(base)
    if not safefs.trusted(st, os.getuid(), True) or st.st_mode & 0o077:
        raise OSError("not a private scratch directory: %s" % base)
    out = []
    for n in names:
        p = os.path.join(base, n)
        os.makedirs(p, mode=0o700, exist_ok=True)
        out.append(p)
    return out
