"""cudafix's startup hook: runs in every interpreter of the env (docs/hook.md).

Named by cudafix.pth (import line, Python < 3.15) and cudafix.start (PEP 829, >= 3.15); run()
works once per process.  Stdlib modules already loaded at start only; never raises.
"""

# Kept small on purpose: every byte of this module is unmarshalled at every interpreter start.
# What runs at `import torch` (preloads, warnings, the cold recompute) lives in cudafix.hookenv.

import os
import stat
import sys

VERSION = "0.1.0"  # == cudafix.__version__ (tests/test_startup_cache.py checks)
CACHE_FILE = "hook.v1"
MAGIC = b"cudafix-hook-cache 1"
MAX_CACHE_BYTES = 1 << 20

# Variables whose value changes cudafix's verdicts.  The policy variables (CUDAFIX_MODE / _SKIP /
# _DEBUG / _DISABLE) are applied at start, so they are not part of the fingerprint.
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

WARNED_VAR = "CUDAFIX_WARNED"  # rule ids already warned about in this process tree

# Variables the dynamic loader reads at exec: changing them inside a running process does not
# change its own library search and would silently alter every child, so the in-process plan
# never touches them (preloads do that job; activation fixes the variables themselves).
LOADER_VARS = ("LD_LIBRARY_PATH", "LD_PRELOAD")

_M61 = (1 << 61) - 1
_M89 = (1 << 89) - 1
_ENV_B = tuple(n.encode("ascii") for n in ENV_NAMES)


class CudafixWarning(UserWarning):
    """Category of cudafix's warnings at ``import torch`` (filter it like any warning)."""


# -- pure helpers, shared with cudafix.hookenv / hookplan / paths (tests keep them equal) -----

# digest(): deterministic without hashlib (not loaded at start): hash() of str/bytes is salted
# per process, but the value of the bytes modulo two Mersenne primes, plus the length, is not.
def digest(data):
    n = int.from_bytes(data, "little")
    return "%x.%x.%x" % (len(data), n % _M61, n % _M89)


def env_key(prefix):  # == cudafix.paths.env_key
    n = int.from_bytes(os.path.abspath(prefix).encode("utf-8", "surrogateescape"), "little") % _M61
    return "%016x" % (n * 0x9E3779B97F4A7C15 % _M61)


def user_cache_dir(environ):
    xdg = environ.get("XDG_CACHE_HOME")
    if xdg and os.path.isabs(xdg):
        return os.path.join(xdg, "cudafix")
    home = environ.get("HOME")
    if home and os.path.isabs(home):
        return os.path.join(home, ".cache", "cudafix")
    return os.path.join("/tmp", "cudafix-%d" % os.getuid())


def cache_dir(prefix, environ):  # == cudafix.paths.env_cache_dir
    return os.path.join(user_cache_dir(environ), "envs", env_key(prefix))


def stat_sig(path):  # 'mtime_ns:size:ino', '-' when it cannot be stat'ed
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return "-"
    return "%d:%d:%d" % (st.st_mtime_ns, st.st_size, st.st_ino)


# The sys.path part of the fingerprint, taken once at start: each entry with its stat (installing
# or removing a package changes its directory's mtime) and the stat of the first torch/version.py.
def path_part(sys_path=None):
    parts = []
    torch = "torch=-"
    std = os.path.dirname(os.__file__)  # lib/pythonX.Y: the stdlib, its zip and lib-dynload never hold torch
    for entry in sys.path if sys_path is None else sys_path:
        if not isinstance(entry, str) or entry == std or entry.startswith(std + "/lib-dynload") or entry.endswith(".zip"):
            continue
        sig = stat_sig(entry or ".")
        parts.append("path=%s:%s" % (entry, sig))
        if torch == "torch=-" and sig != "-":
            vp = os.path.join(entry or ".", "torch", "version.py")
            vsig = stat_sig(vp)
            if vsig != "-":
                torch = "torch=%s:%s" % (vp, vsig)
    parts.append(torch)
    return parts


def machine_part():
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


# fingerprint(): digest of everything an entry's verdicts depend on, for this env mapping
def fingerprint(environ, syspath_part, machine=None):
    head = "\0".join(["cudafix " + VERSION, sys.version, sys.prefix] + list(machine_part() if machine is None else machine)
                     + list(syspath_part))
    data = getattr(environ, "_data", None) if environ is os.environ else None
    if data is None:  # a plain mapping of str: encoded as os.environ stores its values
        data = {}
        for name in ENV_NAMES:
            v = environ.get(name)
            if v is not None:
                data[name.encode("ascii")] = os.fsencode(v)
    parts = [os.fsencode(head)]
    for name in _ENV_B:
        v = data.get(name)
        parts.append(name if v is None else name + b"=" + v)
    return digest(b"\0".join(parts))


def apply_op(environ, op, name, value):  # == cudafix.fixes.EnvOp.apply
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


# -- the cache file (written by cudafix.hookenv.dump_entries) ---------------------------------
#
#   cudafix-hook-cache 1
#   E <fingerprint> <fingerprint after the entry's env ops>      one per entry, newest first
#   S <path> <stat sig>                                          files the entry depends on
#   O <rule> <op> <name> <value>                                 in-process env correction
#   P <rule> <soname> <path>                                     preload at `import torch`
#   W <rule> <quiet-if-fixed 0|1> <line if fixed> <line if not>  warning at `import torch`
#   END
#
# Fields but the fingerprints: hex of UTF-8 (surrogateescape), '-' for None.  Parsed with
# bytes.split / bytes.fromhex only: nothing that can execute or crash on garbage.  An entry is a
# list [fp, post_fp, stats, ops, preloads, warns].

_ARITY = {b"S": 3, b"O": 5, b"P": 4, b"W": 5}


def _dec(field):
    if field == b"-":
        return None
    return bytes.fromhex(field.decode("ascii")).decode("utf-8", "surrogateescape")


# parse_entries(): the entries of a cache file's bytes (only those whose fingerprints are in
# ``want``, if given); ValueError (or another Exception) when malformed: then "no cache".
def parse_entries(data, want=None):
    lines = data.split(b"\n")
    if lines[0] != MAGIC or len(lines) < 3 or lines[-1] != b"" or lines[-2] != b"END":
        raise ValueError("not a whole cudafix hook cache")
    entries = []
    cur = None
    for line in lines[1:-2]:
        f = line.split(b" ")
        kind = f[0]
        if kind == b"E" and len(f) == 3:
            fp, post = f[1].decode("ascii"), f[2].decode("ascii")
            cur = [fp, post, [], [], [], []] if want is None or fp in want or post in want else None
            if cur is not None:
                entries.append(cur)
            continue
        if _ARITY.get(kind) != len(f):
            raise ValueError("bad record")
        if cur is None:
            continue
        if kind == b"S":
            cur[2].append((_dec(f[1]), _dec(f[2])))
        elif kind == b"O":
            cur[3].append((_dec(f[1]), _dec(f[2]), _dec(f[3]), _dec(f[4])))
        elif kind == b"P":
            cur[4].append((_dec(f[1]), _dec(f[2]), _dec(f[3])))
        elif f[2] in (b"0", b"1"):
            cur[5].append((_dec(f[1]), f[2] == b"1", _dec(f[3]), _dec(f[4])))
        else:
            raise ValueError("bad W record")
    return entries


# trusted(): ours, of the right kind, and writable by nobody else (DESIGN constraint 6)
def trusted(st, uid, want_dir):
    kind_ok = stat.S_ISDIR(st.st_mode) if want_dir else stat.S_ISREG(st.st_mode)
    return kind_ok and st.st_uid == uid and not (st.st_mode & 0o022)


def read_cache(path, want=None):  # (entries, None) or ([], reason); never raises
    try:
        uid = os.geteuid()
        if not trusted(os.stat(os.path.dirname(path)), uid, True):
            return [], "cache dir not owned by this user or writable by others"
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0))
        try:
            st = os.fstat(fd)
            if not trusted(st, uid, False):
                return [], "cache file not owned by this user, writable by others, or not a file"
            if st.st_size > MAX_CACHE_BYTES:
                return [], "cache file too large"
            data = os.read(fd, MAX_CACHE_BYTES + 1)
        finally:
            os.close(fd)
        return parse_entries(data, want), None
    except FileNotFoundError:
        return [], "no cache yet"
    except Exception as exc:  # noqa: BLE001 - a cache is never worth an exception
        return [], "cache unusable (%s)" % type(exc).__name__


def entry_fresh(entry):
    return all(stat_sig(path) == sig for path, sig in entry[2])


# -- the hook -------------------------------------------------------------------------------

state = None  # what the hook decided in this process (a SimpleNamespace; see _new_state)
_started = False


def _new_state():
    return type(sys.implementation)(  # types.SimpleNamespace, without importing types
        mode="fix", skip=frozenset(), debug=False, syspath=[], fp=None, cache_path=None,
        entry=None, applied=[], preloaded=[], finder=None, log=[])


def _truthy(value):
    return (value or "").strip().lower() not in ("", "0", "no", "false", "off")


def say(st, msg):  # record a decision; print it (one line, stderr) under CUDAFIX_DEBUG=1
    st.log.append(msg)
    if st.debug:
        try:
            err = sys.stderr
            if err is not None:
                err.write("cudafix: %s\n" % msg)
                err.flush()
        except Exception:  # noqa: BLE001
            pass


def run():  # entry point (cudafix.pth / cudafix.start): works once per process, never raises
    global _started, state
    if _started:
        return
    _started = True
    st = state = _new_state()
    try:
        _start(st, os.environ)
    except Exception as exc:  # noqa: BLE001 - never break an interpreter
        try:
            say(st, "internal error, hook skipped: %s: %s" % (type(exc).__name__, exc))
        except Exception:  # noqa: BLE001
            pass


def _start(st, environ):
    st.debug = _truthy(environ.get("CUDAFIX_DEBUG"))
    if _truthy(environ.get("CUDAFIX_DISABLE")):
        return say(st, "CUDAFIX_DISABLE is set: doing nothing")
    mode = (environ.get("CUDAFIX_MODE") or "fix").strip().lower()
    if mode not in ("fix", "warn", "off"):
        say(st, "CUDAFIX_MODE=%r is not fix|warn|off: using fix" % mode)
        mode = "fix"
    st.mode = mode
    if mode == "off":
        return say(st, "CUDAFIX_MODE=off: doing nothing")
    skip = environ.get("CUDAFIX_SKIP")
    if skip:
        st.skip = frozenset(s.strip() for s in skip.split(","))
    st.syspath = path_part()
    st.fp = fingerprint(environ, st.syspath)
    st.cache_path = os.path.join(cache_dir(sys.prefix, environ), CACHE_FILE)
    entries, why = read_cache(st.cache_path, (st.fp,))
    for e in entries:
        if entry_fresh(e):
            st.entry = e
            break
    else:
        say(st, "%s: the check runs at `import torch` (cache %s)" % (why or "no fresh cache entry", st.cache_path))
        return _install_finder(st)
    say(st, "cache fresh (%s)" % st.cache_path)
    apply_env(st, st.entry, environ)
    # work for `import torch`: a preload (mode fix), or a warning not yet said in this process
    # tree that is not a quiet one whose fix was just applied
    warned = (environ.get(WARNED_VAR) or "").split(",")
    applied = [a[0] for a in st.applied]
    if (mode == "fix" and any(p[0] not in st.skip for p in st.entry[4])) or any(
            r not in st.skip and r not in warned and not (q and r in applied) for r, q, _, _ in st.entry[5]):
        return _install_finder(st)
    say(st, "nothing to do at `import torch`: no finder installed")


def apply_env(st, entry, environ):
    """Apply the entry's in-process env corrections (mode fix), recording them."""
    for rule, op, name, value in entry[3]:
        if rule in st.skip or st.mode != "fix" or name in LOADER_VARS:
            say(st, "not applied: %s %s [%s]" % (op, name, rule))
            continue
        try:
            apply_op(environ, op, name, value)
            st.applied.append((rule, op, name, value))
            say(st, "%s %s%s [%s]" % (op, name, "" if value is None else "=" + value, rule))
        except Exception as exc:  # noqa: BLE001
            say(st, "could not %s %s: %s" % (op, name, exc))


class TorchFinder(object):
    """A sys.meta_path finder reacting to the name ``torch`` only (the work: cudafix.hookenv)."""

    cudafix = True

    def __init__(self, st):
        self.state = st

    def find_spec(self, name, path=None, target=None):
        if name == "torch":
            try:
                from cudafix import hookenv

                hookenv.on_torch(self, sys._getframe(1))
            except Exception as exc:  # noqa: BLE001 - torch's import proceeds whatever happens
                try:
                    say(self.state, "at `import torch`: %s: %s" % (type(exc).__name__, exc))
                except Exception:  # noqa: BLE001
                    pass
        return None


def _install_finder(st):
    for f in sys.meta_path:
        if getattr(f, "cudafix", False):
            return
    st.finder = TorchFinder(st)
    sys.meta_path.insert(0, st.finder)
