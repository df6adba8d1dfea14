"""The startup hook's cache: what an entry is keyed on, and the entries (stdlib only, Python 3.8).

The key is the fingerprint of this interpreter's environment, sys.path and machine, with the
environment as the loader saw it at exec (:func:`keyed`).  Used by the check at `import torch`
(cudafix/hook/runtime.py) and by its cold path (cudafix/hook/plan.py), which both import it:
neither imports the other's module at its top.

The file is ``<env cache dir>/hook.json`` in the format of every cudafix cache
(cudafix.store.cachefile: ``{"version": 2, "entries": {key: entry}}``), read and written through
cudafix.store.safefs (the one trust check).  An entry is::

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
import os
import sys
from typing import Any, Optional, Tuple

from cudafix import __version__ as VERSION  # the one copy (the package is imported already)
from cudafix.knowledge import env_vars
from cudafix.knowledge.env_vars import LOADER_VARS  # never changed in-process (docs/hook.md)
from cudafix.model.fixes import EnvOp
from cudafix.store import cachefile, paths, safefs


# The variables whose value changes cudafix's verdicts (os.environ's bytes keys): the HOOK rows of
# cudafix/knowledge/env_vars.py.  The policy variables (CUDAFIX_*) are not part of the fingerprint.
ENV_B = frozenset(n.encode("ascii") for n in env_vars.names(env_vars.HOOK))

# ENV_NAMES: the variables of the fingerprint, as str (a test keeps them a superset of what
# cudafix.probes.pyenv.environment reads)
ENV_NAMES = tuple(sorted(n.decode("ascii") for n in ENV_B))


# The cache's place: cudafix.store.paths (this runs at `import torch`, where importing it costs nothing
# that matters; the start module computes no path).
def cache_dir(prefix, environ):
    return paths.env_cache_dir(prefix, environ)


# The loader read LD_LIBRARY_PATH / LD_PRELOAD once, at exec: a script that changes them in
# os.environ before `import torch` changes nothing for the libraries torch loads.  So the loader
# simulation (and the fingerprint of what it found) uses the values of the exec-time environment
# block, /proc/self/environ, not os.environ's (issue 18 item 2).
def exec_loader_vars():
    """{name: value or None} of LOADER_VARS at exec; None when /proc/self/environ is unreadable."""
    try:
        fd = os.open("/proc/self/environ", os.O_RDONLY | os.O_CLOEXEC)
        try:
            chunks = []
            while True:
                b = os.read(fd, 1 << 16)
                if not b:
                    break
                chunks.append(b)
        finally:
            os.close(fd)
    except OSError:
        return None
    out = dict.fromkeys(LOADER_VARS)
    for item in b"".join(chunks).split(b"\0"):
        name, eq, value = item.partition(b"=")
        if eq:
            n = name.decode("latin-1")
            if n in out:
                out[n] = os.fsdecode(value)
    return out


def loader_environ(environ=None):
    """A copy of ``environ`` (os.environ) whose LOADER_VARS are those the loader used (at exec)."""
    env = dict(os.environ if environ is None else environ)
    at_exec = exec_loader_vars()
    if at_exec is not None:
        for name, value in at_exec.items():
            if value is None:
                env.pop(name, None)
            else:
                env[name] = value
    return env


def path_part(sys_path=None):
    """The sys.path part of the fingerprint: each entry (but the stdlib, its zip and lib-dynload,
    which never hold torch) with its stat -- installing or removing a package changes its
    directory's mtime -- and the stat of the first torch/version.py."""
    parts = []
    torch = "torch=-"
    std = os.path.dirname(os.__file__)
    for entry in sys.path if sys_path is None else sys_path:
        if not isinstance(entry, str) or entry == std or entry.startswith(std + "/lib-dynload") or entry.endswith(".zip"):
            continue
        sig = ":".join(map(str, safefs.stat_sig(entry or ".") or ["-"]))
        parts.append("path=%s:%s" % (entry, sig))
        if sig != "-" and torch == "torch=-":
            vsig = safefs.stat_sig((entry or ".") + "/torch/version.py")
            if vsig is not None:
                torch = "torch=%s/torch/version.py:%s" % (entry or ".", ":".join(map(str, vsig)))
    parts.append(torch)
    return parts


def machine_part():
    """The driver's version file and the GPUs it lists."""
    try:
        fd = os.open("/sys/module/nvidia/version", os.O_RDONLY)
        try:
            driver = os.read(fd, 256).decode("latin-1")
        finally:
            os.close(fd)
    except (OSError, ValueError):
        driver = "-"
    try:
        gpus = ",".join(sorted(os.listdir("/proc/driver/nvidia/gpus")))
    except (OSError, ValueError):
        gpus = "-"
    return ["driver=" + driver, "gpus=" + gpus]


def fingerprint(environ, syspath_part, machine=None):
    """Digest of everything an entry's verdicts depend on, for this env mapping.

    The text: the parts (non-empty, without NUL) NUL-separated, NUL NUL, the names of the set
    ENV_B variables (sorted), NUL NUL, their values as os.environ stores them ('' differs from
    unset).  The digest: its length and hash() of the text read as an integer, both byte orders:
    the integer modulo 2**61-1 (sys.hash_info.modulus), computed in C in one pass; unlike hash()
    of str/bytes, hash() of an int is not salted per process.
    """
    data = getattr(environ, "_data", None) if environ is os.environ else None
    if data is None:  # a plain mapping of str: encoded as os.environ stores its values
        data = {}
        for name in ENV_B:
            v = environ.get(name.decode("ascii"))
            if v is not None:
                data[name] = os.fsencode(v)
    names = sorted(n for n in data if n in ENV_B)
    head = ["cudafix " + VERSION, sys.version, sys.prefix] + list(machine_part() if machine is None else machine)
    text = "\0".join(head + list(syspath_part)).encode("utf-8", "surrogateescape")
    text += b"\0\0" + b"\0".join(names) + b"\0\0" + b"\0".join(data[n] for n in names)
    return "%x.%x.%x" % (len(text), hash(int.from_bytes(text, "little")), hash(int.from_bytes(text, "big")))


def apply_op(environ, op, name, value):
    EnvOp(op, name, value).apply(environ)  # ValueError for an op this cudafix does not know


def keyed(environ, start_path, cache_file):
    """What the check at `import torch` is keyed on, in one call: (the sys.path part, the
    environment as the loader saw it at exec plus the rest as it is now, its fingerprint, the
    env's cache file).  The cold path recomputes from that same environment."""
    syspath = path_part(start_path)
    seen = loader_environ(environ)
    return syspath, seen, fingerprint(seen, syspath), os.path.join(cache_dir(sys.prefix, environ), cache_file)


# -- the entries --------------------------------------------------------------------------

CACHE_FILE = "hook.json"
CACHE_VERSION = 2  # 1: the line format of hook.v1 (before 2026-12-01)
MAX_CACHE_BYTES = 1 << 20

_T = (str, type(None))  # a text field: str, or None
_SHAPES = (("deps", (str, (list, type(None)))), ("ops", (_T, _T, _T, _T)), ("preloads", (_T, _T, _T)), ("warns", (_T, bool, _T, _T)))


@dataclasses.dataclass(frozen=True)
class Entry:
    """A cache entry: the in-process plan for one fingerprint (what the hook applies and says).
    Its rows are tuples (the two builders, :func:`parse_entries` and hook/plan.py's build_entry,
    make them so)."""

    fp: str
    post_fp: str  # the fingerprint once the entry's own env corrections are applied
    stats: Tuple[Tuple[str, Any], ...] = ()  # (path, stat sig or None): files whose change makes it stale
    ops: Tuple[Tuple[Optional[str], ...], ...] = ()  # (rule, op, name, value)
    preloads: Tuple[Tuple[Optional[str], ...], ...] = ()  # (rule, soname, path)
    warns: Tuple[Tuple[Any, ...], ...] = ()  # (rule, quiet if fixed, line if fixed, line if not)


def _rows(value, shape):
    if not isinstance(value, list):
        raise ValueError("not a list")
    out = []
    for row in value:
        if not isinstance(row, list) or len(row) != len(shape) or not all(isinstance(x, t) for x, t in zip(row, shape)):
            raise ValueError("bad record")
        out.append(tuple(row))
    return tuple(out)


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
