"""cudafix's startup hook: the part of cudafix that runs in every interpreter of the env.

It is named by ``cudafix.pth`` (an ``import`` line: Python < 3.15) and by ``cudafix.start``
(a PEP 829 entry point, ``_cudafix_startup:run``: Python >= 3.15, where a matching ``.start``
file disables the ``.pth`` import line).  :func:`run` is guarded so that it does its work at
most once per process whichever of the two (or both) called it.

What it does at interpreter start, in about 0.1 ms (docs/hook.md, docs/benchmarks.md):

1. compute a fingerprint of what cudafix's verdicts depend on (the CUDA/torch variables, the
   driver's ``/sys/module/nvidia/version``, the GPUs under ``/proc/driver/nvidia/gpus``,
   sys.path and the mtime of its directories, torch's ``version.py`` stat, this version);
2. look it up in the per-env cache written by :mod:`cudafix.hookplan`;
3. fresh entry: apply the cached in-process env corrections now, and install a
   ``sys.meta_path`` finder reacting to the name ``torch`` only if ``import torch`` has work
   (library preloads, warnings); stale or absent: install the finder, which runs the cold path
   (probes + rules, no torch import, no cuInit, no NVML) when -- and only if -- torch is imported.

Rules for this file (DESIGN.md hard constraints 1, 2, 7): Python >= 3.8; at start it imports
nothing but ``os`` and ``sys`` (already loaded by every interpreter); it never loads libcuda or
libnvidia-ml, never imports torch, never spawns a process, never raises, and prints only under
``CUDAFIX_DEBUG=1``.  ``ctypes`` and ``warnings`` are imported at ``import torch`` time only.

The cache is untrusted input: a file (or directory) not owned by this user, writable by
others, not a regular file, truncated or malformed is ignored.  Its format is line-based text
with hex-encoded fields, parsed with ``bytes.split`` / ``bytes.fromhex`` only -- nothing that
can execute or crash on garbage.
"""

import os
import stat
import sys

VERSION = "0.1.0"  # == cudafix.__version__ (tests/test_startup_cache.py checks)
CACHE_FILE = "hook.v1"
MAGIC = b"cudafix-hook-cache 1"
MAX_CACHE_BYTES = 1 << 20

# Variables whose value changes cudafix's verdicts (the probes read them).  The policy variables
# (CUDAFIX_MODE / _SKIP / _DEBUG / _DISABLE) are applied at start, so they are not in it.
ENV_NAMES = (
    # what the probes record (cudafix.probes.environment.VARIABLES; a test keeps this a superset)
    "LD_LIBRARY_PATH", "LD_PRELOAD",
    "CUDA_HOME", "CUDA_PATH", "CUDA_ROOT", "CUDA_TOOLKIT_ROOT_DIR", "CUDACXX",
    "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER",
    "CUDA_LAUNCH_BLOCKING", "CUDA_MODULE_LOADING", "CUDA_MODULE_DATA_LOADING",
    "CUDA_CACHE_DISABLE", "CUDA_CACHE_PATH", "CUDA_CACHE_MAXSIZE",
    "CUDA_FORCE_PTX_JIT", "CUDA_FORCE_JIT", "CUDA_DISABLE_PTX_JIT", "CUDA_DISABLE_JIT",
    "CUDA_FORCE_PRELOAD_LIBRARIES", "CUDA_MANAGED_FORCE_DEVICE_ALLOC",
    "CUDA_DEVICE_MAX_CONNECTIONS", "CUDA_DEVICE_MAX_COPY_CONNECTIONS", "CUDA_LOG_FILE",
    "CUDA_MPS_PIPE_DIRECTORY", "CUDA_MPS_LOG_DIRECTORY",
    "PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF", "PYTORCH_HIP_ALLOC_CONF",
    "PYTORCH_NVML_BASED_CUDA_CHECK", "PYTORCH_NO_CUDA_MEMORY_CACHING",
    "TORCH_CUDA_ARCH_LIST", "TORCH_USE_CUDA_DSA", "TORCH_USE_RTLD_GLOBAL", "TORCH_EXTENSIONS_DIR",
    "TRITON_PTXAS_PATH", "TRITON_CUOBJDUMP_PATH", "TRITON_NVDISASM_PATH", "TRITON_LIBCUDA_PATH",
    "NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES",
    "CONDA_PREFIX", "CONDA_DEFAULT_ENV", "CONDA_SHLVL", "CONDA_OVERRIDE_CUDA", "VIRTUAL_ENV",
    # and what else the verdicts depend on: nvcc on PATH, torch on PYTHONPATH, the JIT cache's
    # default location, the what-if overrides
    "PATH", "PYTHONPATH", "HOME", "XDG_CACHE_HOME", "CUDAFIX_ASSUME_DRIVER", "CUDAFIX_ASSUME_GPU",
)

DRIVER_VERSION_FILE = "/sys/module/nvidia/version"
GPUS_DIR = "/proc/driver/nvidia/gpus"
WARNED_VAR = "CUDAFIX_WARNED"  # rule ids already warned about in this process tree

# Variables the dynamic loader reads at exec: changing them inside a running process does not
# change its own library search and would silently alter every child, so the in-process plan
# never touches them (preloads do that job; activation fixes the variables themselves).
LOADER_VARS = ("LD_LIBRARY_PATH", "LD_PRELOAD")

_M61 = (1 << 61) - 1
_M89 = (1 << 89) - 1


class CudafixWarning(UserWarning):
    """Category of cudafix's warnings at ``import torch`` (filter it like any warning)."""


# -- small pure helpers (shared with cudafix.hookplan and paths.py; tests keep them equal) ----


def digest(data):
    """A deterministic change-detecting digest of bytes (no hashlib: it is not loaded at start).

    ``hash()`` of an int is stable across processes (unlike str/bytes hashing); the value of
    the bytes modulo two Mersenne primes plus the length catches any accidental change.
    """
    n = int.from_bytes(data, "little")
    return "%x.%x.%x" % (len(data), n % _M61, n % _M89)


def _b(text):
    return text.encode("utf-8", "surrogateescape")


def env_key(prefix):
    """Short stable key of one environment: must equal cudafix.paths.env_key."""
    n = int.from_bytes(_b(os.path.realpath(prefix)), "little") % _M61
    return "%016x" % (n * 0x9E3779B97F4A7C15 % _M61)  # spread short paths over the key space


def user_cache_dir(environ):
    xdg = environ.get("XDG_CACHE_HOME")
    if xdg and os.path.isabs(xdg):
        return os.path.join(xdg, "cudafix")
    home = environ.get("HOME")
    if home and os.path.isabs(home):
        return os.path.join(home, ".cache", "cudafix")
    return os.path.join("/tmp", "cudafix-%d" % os.getuid())


def cache_dir(prefix, environ):
    """Must equal cudafix.paths.env_cache_dir(prefix, environ)."""
    return os.path.join(user_cache_dir(environ), "envs", env_key(prefix))


def stat_sig(path):
    """'mtime_ns:size:ino' of a path, '-' when it cannot be stat'ed."""
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return "-"
    return "%d:%d:%d" % (st.st_mtime_ns, st.st_size, st.st_ino)


def _read_small(path, limit=4096):
    try:
        with open(path, "rb") as fh:
            return fh.read(limit)
    except (OSError, ValueError):
        return b"-"


def path_part(sys_path=None):
    """The sys.path-dependent part of the fingerprint, taken once at start.

    Each entry with its stat (a package installed or removed changes its directory's mtime),
    and the stat of the first ``torch/version.py`` on it.
    """
    parts = []
    torch = "torch=-"
    for entry in sys.path if sys_path is None else sys_path:
        if not isinstance(entry, str):
            continue
        parts.append("path=%s:%s" % (entry, stat_sig(entry or ".")))
        if torch == "torch=-":
            vp = os.path.join(entry or ".", "torch", "version.py")
            sig = stat_sig(vp)
            if sig != "-":
                torch = "torch=%s:%s" % (vp, sig)
    parts.append(torch)
    return parts


def machine_part():
    try:
        gpus = ",".join(sorted(os.listdir(GPUS_DIR)))
    except (OSError, ValueError):
        gpus = "-"
    return ["driver=" + _read_small(DRIVER_VERSION_FILE).decode("latin-1"), "gpus=" + gpus]


def fingerprint(environ, syspath_part, machine=None):
    """Digest of everything an entry's verdicts depend on, for this env mapping."""
    parts = ["cudafix " + VERSION, sys.version, sys.prefix]
    for name in ENV_NAMES:
        value = environ.get(name)
        parts.append(name if value is None else name + "=" + value)
    parts.extend(machine_part() if machine is None else machine)
    parts.extend(syspath_part)
    return digest(_b("\0".join(parts)))


def apply_op(environ, op, name, value):
    """cudafix.fixes.EnvOp.apply, re-implemented without the package (tests keep them equal)."""
    if op == "set":
        environ[name] = value or ""
    elif op == "unset":
        environ.pop(name, None)
    elif op == "prepend-path":
        parts = [p for p in environ.get(name, "").split(":") if p and p != value]
        environ[name] = ":".join([value or ""] + parts)
    elif op == "remove-path":
        if name in environ:
            old = environ[name].split(":")
            parts = [p for p in old if p != value]
            if parts != old:
                if any(parts):
                    environ[name] = ":".join(parts)
                else:
                    del environ[name]
    else:
        raise ValueError("unknown op %r" % (op,))


# -- the cache file ----------------------------------------------------------------------
#
#   cudafix-hook-cache 1
#   E <fingerprint> <fingerprint after the entry's env ops>      one per entry, newest first
#   S <path> <stat sig>                                          extra files the entry depends on
#   O <rule> <op> <name> <value>                                 in-process env correction
#   P <rule> <soname> <path>                                     preload at `import torch`
#   W <rule> <quiet-if-fixed 0|1> <line if fixed> <line if not>  warning at `import torch`
#   END
#
# Every field but the fingerprints is hex of UTF-8 (surrogateescape); '-' is None.


class Entry(object):
    __slots__ = ("fp", "post_fp", "stats", "ops", "preloads", "warns")

    def __init__(self, fp, post_fp, stats=(), ops=(), preloads=(), warns=()):
        self.fp = fp
        self.post_fp = post_fp
        self.stats = list(stats)  # [(path, sig)]
        self.ops = list(ops)  # [(rule, op, name, value)]
        self.preloads = list(preloads)  # [(rule, soname, path)]
        self.warns = list(warns)  # [(rule, quiet_if_fixed: bool, line_fixed, line_unfixed)]

    def __eq__(self, other):
        return isinstance(other, Entry) and all(getattr(self, s) == getattr(other, s) for s in self.__slots__)

    def __repr__(self):
        return "Entry(%s)" % ", ".join("%s=%r" % (s, getattr(self, s)) for s in self.__slots__)


def _enc(value):
    if value is None:
        return "-"
    return _b(value).hex()


def _dec(field):
    if field == b"-":
        return None
    return bytes.fromhex(field.decode("ascii")).decode("utf-8", "surrogateescape")


def dump_entries(entries):
    out = [MAGIC.decode("ascii")]
    for e in entries:
        out.append("E %s %s" % (e.fp, e.post_fp))
        out.extend("S %s %s" % (_enc(p), _enc(s)) for p, s in e.stats)
        out.extend("O %s %s %s %s" % tuple(_enc(x) for x in op) for op in e.ops)
        out.extend("P %s %s %s" % tuple(_enc(x) for x in p) for p in e.preloads)
        out.extend("W %s %d %s %s" % (_enc(r), 1 if q else 0, _enc(a), _enc(b)) for r, q, a, b in e.warns)
    out.append("END")
    return ("\n".join(out) + "\n").encode("ascii")


def parse_entries(data):
    """Entries of a cache file's bytes; ValueError (or another Exception) when malformed."""
    lines = data.split(b"\n")
    if lines[0] != MAGIC or len(lines) < 3 or lines[-1] != b"" or lines[-2] != b"END":
        raise ValueError("not a whole cudafix hook cache")
    entries = []
    cur = None
    for line in lines[1:-2]:
        f = line.split(b" ")
        kind = f[0]
        if kind == b"E" and len(f) == 3:
            cur = Entry(f[1].decode("ascii"), f[2].decode("ascii"))
            entries.append(cur)
        elif cur is None:
            raise ValueError("record before entry")
        elif kind == b"S" and len(f) == 3:
            cur.stats.append((_dec(f[1]), _dec(f[2])))
        elif kind == b"O" and len(f) == 5:
            cur.ops.append((_dec(f[1]), _dec(f[2]), _dec(f[3]), _dec(f[4])))
        elif kind == b"P" and len(f) == 4:
            cur.preloads.append((_dec(f[1]), _dec(f[2]), _dec(f[3])))
        elif kind == b"W" and len(f) == 5 and f[2] in (b"0", b"1"):
            cur.warns.append((_dec(f[1]), f[2] == b"1", _dec(f[3]), _dec(f[4])))
        else:
            raise ValueError("bad record")
    return entries


def _trusted(st, uid, want_dir):
    kind_ok = stat.S_ISDIR(st.st_mode) if want_dir else stat.S_ISREG(st.st_mode)
    return kind_ok and st.st_uid == uid and not (st.st_mode & 0o022)


def read_cache(path):
    """(entries, None) or ([], reason).  Never raises."""
    try:
        uid = os.geteuid()
        if not _trusted(os.stat(os.path.dirname(path)), uid, True):
            return [], "cache dir not owned by this user or writable by others"
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0))
        try:
            st = os.fstat(fd)
            if not _trusted(st, uid, False):
                return [], "cache file not owned by this user, writable by others, or not a file"
            if st.st_size > MAX_CACHE_BYTES:
                return [], "cache file too large"
            data = os.read(fd, MAX_CACHE_BYTES + 1)
        finally:
            os.close(fd)
        return parse_entries(data), None
    except FileNotFoundError:
        return [], "no cache yet"
    except Exception as exc:  # noqa: BLE001 - a cache is never worth an exception
        return [], "cache unusable (%s)" % type(exc).__name__


def entry_fresh(entry):
    for path, sig in entry.stats:
        if stat_sig(path) != sig:
            return False
    return True


# -- the hook -------------------------------------------------------------------------------


class State(object):
    """What the hook decided in this process (cudafix.hookplan and tests read it)."""

    def __init__(self):
        self.mode = "fix"
        self.skip = frozenset()
        self.debug = False
        self.syspath = []
        self.fp = None
        self.cache_path = None
        self.entry = None  # the fresh cache entry used, if any
        self.applied = []  # [(rule, op, name, value)] applied to os.environ
        self.preloaded = []  # paths loaded at `import torch`
        self.finder = None
        self.log = []  # what CUDAFIX_DEBUG prints


state = None
_started = False


def _truthy(value):
    return (value or "").strip().lower() not in ("", "0", "no", "false", "off")


def _say(st, msg):
    st.log.append(msg)
    if st.debug:
        try:
            err = sys.stderr
            if err is not None:
                err.write("cudafix: %s\n" % msg)
                err.flush()
        except Exception:  # noqa: BLE001
            pass


def run():
    """Entry point (cudafix.pth / cudafix.start).  Does its work once per process, never raises."""
    global _started, state
    if _started:
        return
    _started = True
    st = State()
    state = st
    try:
        _start(st, os.environ)
    except Exception as exc:  # noqa: BLE001 - never break an interpreter
        try:
            _say(st, "internal error, hook skipped: %s: %s" % (type(exc).__name__, exc))
        except Exception:  # noqa: BLE001
            pass


def _start(st, environ):
    st.debug = _truthy(environ.get("CUDAFIX_DEBUG"))
    if _truthy(environ.get("CUDAFIX_DISABLE")):
        _say(st, "CUDAFIX_DISABLE is set: doing nothing")
        return
    mode = (environ.get("CUDAFIX_MODE") or "fix").strip().lower()
    if mode not in ("fix", "warn", "off"):
        _say(st, "CUDAFIX_MODE=%r is not fix|warn|off: using fix" % mode)
        mode = "fix"
    st.mode = mode
    if mode == "off":
        _say(st, "CUDAFIX_MODE=off: doing nothing")
        return
    st.skip = frozenset(s.strip() for s in (environ.get("CUDAFIX_SKIP") or "").split(",") if s.strip())
    st.syspath = path_part()
    st.fp = fingerprint(environ, st.syspath)
    st.cache_path = os.path.join(cache_dir(sys.prefix, environ), CACHE_FILE)
    entries, why = read_cache(st.cache_path)
    entry = None
    for e in entries:
        if st.fp in (e.fp, e.post_fp) and entry_fresh(e):
            entry = e
            break
    if entry is None:
        _say(st, "%s: the check runs at `import torch` (cache %s)" % (why or "no fresh cache entry for this environment", st.cache_path))
        _install_finder(st)
        return
    st.entry = entry
    _say(st, "cache fresh (%s)" % st.cache_path)
    apply_env(st, entry, environ)
    if _torch_work(st, entry):
        _install_finder(st)
    else:
        _say(st, "nothing to do at `import torch`: no finder installed")


def _active(st, rule):
    return rule not in st.skip


def apply_env(st, entry, environ):
    """Apply the entry's in-process env corrections (mode fix), recording them."""
    for rule, op, name, value in entry.ops:
        if not _active(st, rule):
            _say(st, "skipped %s %s (CUDAFIX_SKIP has %s)" % (op, name, rule))
            continue
        if st.mode != "fix":
            _say(st, "not applying %s %s [%s]: CUDAFIX_MODE=%s" % (op, name, rule, st.mode))
            continue
        if name in LOADER_VARS:
            continue
        try:
            apply_op(environ, op, name, value)
            st.applied.append((rule, op, name, value))
            _say(st, "%s %s%s [%s]" % (op, name, "" if value is None else "=" + value, rule))
        except Exception as exc:  # noqa: BLE001
            _say(st, "could not %s %s: %s" % (op, name, exc))


def _fixed(st, rule):
    return st.mode == "fix" and any(a[0] == rule for a in st.applied)


def _warnings_due(st, entry, environ, preloaded=None):
    warned = set((environ.get(WARNED_VAR) or "").split(","))
    if preloaded is None:  # before `import torch`: assume the preloads will succeed
        preloaded = set(p[0] for p in _preloads_due(st, entry))
    out = []
    for rule, quiet, line_fixed, line_unfixed in entry.warns:
        if not _active(st, rule) or rule in warned:
            continue
        fixed = st.mode == "fix" and (_fixed(st, rule) or rule in preloaded)
        if fixed and quiet:
            continue
        out.append((rule, line_fixed if fixed else line_unfixed))
    return out


def _preloads_due(st, entry):
    if st.mode != "fix":
        return []
    return [p for p in entry.preloads if _active(st, p[0])]


def _torch_work(st, entry):
    return bool(_preloads_due(st, entry) or _warnings_due(st, entry, os.environ))


class TorchFinder(object):
    """A sys.meta_path finder that reacts to ``import torch`` only, once, then steps aside."""

    cudafix = True

    def __init__(self, st):
        self.state = st

    def find_spec(self, name, path=None, target=None):
        if name != "torch":
            return None
        try:
            if not _is_import():
                return None  # importlib.util.find_spec("torch") and the like: not an import
            self.remove()
            at_torch_import(self.state)
        except Exception as exc:  # noqa: BLE001 - torch's import must proceed whatever happens
            try:
                _say(self.state, "internal error at `import torch`: %s: %s" % (type(exc).__name__, exc))
            except Exception:  # noqa: BLE001
                pass
        return None

    def invalidate_caches(self):
        pass

    def remove(self):
        # Rebind, never mutate: importlib is iterating over the current list right now, and
        # removing our item from it would make that loop skip the finder after us.
        if any(f is self for f in sys.meta_path):
            sys.meta_path = [f for f in sys.meta_path if f is not self]


def _is_import():
    """True when the finder was called by the import statement, not by a find_spec probe."""
    try:
        frame = sys._getframe(3)  # 0 _is_import, 1 find_spec, 2 importlib._find_spec
    except (AttributeError, ValueError):
        return True
    for _ in range(2):
        if frame is None:
            return False
        if frame.f_code.co_name in ("_find_and_load_unlocked", "_find_and_load"):
            return True
        frame = frame.f_back
    return False


def _install_finder(st):
    for f in sys.meta_path:
        if getattr(f, "cudafix", False):
            return
    st.finder = TorchFinder(st)
    sys.meta_path.insert(0, st.finder)


def at_torch_import(st):
    """Cold path if needed, then preloads and warnings; called once, just before torch loads."""
    environ = os.environ
    entry = st.entry
    if entry is None:
        try:
            import cudafix.hookplan as hookplan
        except Exception as exc:  # noqa: BLE001 - cudafix gone: a stale hook stays silent
            _say(st, "cudafix package not importable (%s): nothing to check" % type(exc).__name__)
            return
        entry = hookplan.cold(st)
        if entry is None:
            return
        st.entry = entry
        apply_env(st, entry, environ)
    preloads = _preloads_due(st, entry)
    preloaded = set()
    failed = set()
    if preloads:
        import ctypes

        for rule, soname, path in preloads:
            try:
                ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
                st.preloaded.append(path)
                preloaded.add(rule)
                _say(st, "preloaded %s for %s [%s]" % (path, soname, rule))
            except Exception as exc:  # noqa: BLE001
                failed.add(rule)
                _say(st, "could not preload %s: %s" % (path, exc))
    due = _warnings_due(st, entry, environ, preloaded - failed)
    if due:
        import warnings

        for rule, line in due:
            # 1 this function, 2 find_spec, 3 the frame that imports torch (importlib's own
            # frames are skipped by the warnings module)
            warnings.warn(line, CudafixWarning, stacklevel=3)
        old = [r for r in (environ.get(WARNED_VAR) or "").split(",") if r]
        try:
            environ[WARNED_VAR] = ",".join(old + [r for r, _ in due if r not in old])
        except Exception:  # noqa: BLE001
            pass
