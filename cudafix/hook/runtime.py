"""The startup hook's work, all of it at `import torch` (stdlib only, Python 3.8).

_cudafix_startup (unmarshalled and run at every interpreter start) only installs a finder for the
name `torch`.  Everything else lives here and runs when that finder sees `import torch`: the
check (fingerprint -> per-env cache entry (cudafix.hook.cache) -> in-process env corrections),
the cold recompute when the cache was stale (through cudafix.hook.plan), library preloads by
absolute path, and the warnings, once per process group.  The check's result lives here, in
``state`` (None until the check ran; :func:`check` runs it and returns it).  Files are read and
written only through cudafix.store.safefs (the one trust check).  Importing this module imports
nothing beyond the stdlib (json for the cache) and cudafix.store."""

import os
import sys

from cudafix import __version__ as VERSION  # the one copy (the package is imported already)
from cudafix.hook import cache
from cudafix.store import paths, safefs

WARNED_VAR = "CUDAFIX_WARNED"  # rule ids already warned about in this process tree
LOADER_VARS = ("LD_LIBRARY_PATH", "LD_PRELOAD")  # never changed in-process (docs/hook.md)

# The variables whose value changes cudafix's verdicts (os.environ's bytes keys): the HOOK rows of
# cudafix/knowledge/env_vars.py, kept a literal so that the hook imports nothing more (tests/test_env_vars.py
# keeps the two equal).  The policy variables (CUDAFIX_*) are not part of the fingerprint.
ENV_B = frozenset(b"""LD_LIBRARY_PATH LD_PRELOAD CUDA_HOME CUDA_PATH CUDA_ROOT CUDA_TOOLKIT_ROOT_DIR
CUDACXX CUDA_VISIBLE_DEVICES CUDA_DEVICE_ORDER CUDA_LAUNCH_BLOCKING CUDA_MODULE_LOADING
CUDA_MODULE_DATA_LOADING CUDA_CACHE_DISABLE CUDA_CACHE_PATH CUDA_CACHE_MAXSIZE CUDA_FORCE_PTX_JIT
CUDA_FORCE_JIT CUDA_DISABLE_PTX_JIT CUDA_DISABLE_JIT CUDA_FORCE_PRELOAD_LIBRARIES
CUDA_MANAGED_FORCE_DEVICE_ALLOC CUDA_DEVICE_MAX_CONNECTIONS CUDA_DEVICE_MAX_COPY_CONNECTIONS
CUDA_LOG_FILE CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY PYTORCH_CUDA_ALLOC_CONF
PYTORCH_ALLOC_CONF PYTORCH_HIP_ALLOC_CONF PYTORCH_NVML_BASED_CUDA_CHECK PYTORCH_NO_CUDA_MEMORY_CACHING
TORCH_CUDA_ARCH_LIST TORCH_USE_CUDA_DSA TORCH_USE_RTLD_GLOBAL TORCH_EXTENSIONS_DIR TRITON_PTXAS_PATH
TRITON_CUOBJDUMP_PATH TRITON_NVDISASM_PATH TRITON_LIBCUDA_PATH NVIDIA_VISIBLE_DEVICES
NVIDIA_DRIVER_CAPABILITIES CONDA_PREFIX CONDA_DEFAULT_ENV CONDA_SHLVL CONDA_OVERRIDE_CUDA VIRTUAL_ENV
PATH PYTHONPATH HOME XDG_CACHE_HOME CUDAFIX_ASSUME_DRIVER CUDAFIX_ASSUME_GPU CUDAFIX_ROOT""".split())

_NO = ("", "0", "no", "false", "off")
_NS = type(sys.implementation)  # types.SimpleNamespace

# ENV_NAMES: the variables of the fingerprint, as str (a test keeps them a superset of what
# cudafix.probes.environment reads)
ENV_NAMES = tuple(sorted(n.decode("ascii") for n in ENV_B))


class CudafixWarning(UserWarning):
    """Category of cudafix's warnings at ``import torch`` (filter it like any warning)."""


state = None  # the check's result in this process (check() sets it once)


# -- what the start computes, written plainly  ---------

# The cache's place: cudafix.store.paths (this runs at `import torch`, where importing it costs nothing
# that matters; the start module computes no path).
env_key = paths.env_key
user_cache_dir = paths.user_cache_dir


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


# -- CUDAFIX_DEBUG ------------------------------------------------------------------------------

def say(st, msg):
    """Record a decision; print it (one line, stderr) under CUDAFIX_DEBUG=1."""
    st.log.append(msg)
    if st.debug:
        try:
            err = sys.stderr
            if err is not None:
                err.write("cudafix: %s\n" % msg)
                err.flush()
        except Exception:  # noqa: BLE001
            pass


def say_ops(st, entry):
    """The lines for what apply_env did with the entry's corrections."""
    failed = {id(op): exc for op, exc in st.failed}
    applied = {id(op) for op in st.applied}
    for op in entry[3]:
        rule, name, value = op[0], op[2], op[3]
        if id(op) in applied:
            say(st, "%s %s%s [%s]" % (op[1], name, "" if value is None else "=" + value, rule))
        elif id(op) in failed:
            say(st, "could not %s %s: %s" % (op[1], name, failed[id(op)]))
        else:
            say(st, "not applied: %s %s [%s]" % (op[1], name, rule))


def explain(st):
    """Under CUDAFIX_DEBUG=1, after check(): one line per decision it made, and why."""
    get = os.environ.get
    if (get("CUDAFIX_DISABLE") or "").strip().lower() not in _NO:
        return say(st, "CUDAFIX_DISABLE is set: doing nothing")
    mode = (get("CUDAFIX_MODE") or "fix").strip().lower()
    if mode not in ("fix", "warn", "off"):
        say(st, "CUDAFIX_MODE=%r is not fix|warn|off: using fix" % mode)
    if st.mode == "off":
        return say(st, "CUDAFIX_MODE=off: doing nothing")
    if st.error is not None:
        return say(st, "internal error, hook skipped: %s: %s" % (type(st.error).__name__, st.error))
    if st.entry is None:
        entries, why = cache.read_cache(st.cache_path, (st.fp,))
        if why is None:
            why = "no fresh cache entry"
        return say(st, "%s: the check runs now, at `import torch` (cache %s)" % (why, st.cache_path))
    say(st, "cache fresh (%s)" % st.cache_path)
    say_ops(st, st.entry)


# -- the check, at `import torch` (it ran at every interpreter start before 2026-11-30) -------

def find_finder():
    """The hook's finder in sys.meta_path, or None."""
    for f in sys.meta_path:
        if not isinstance(f, type) and getattr(f, "cudafix", False) is True:
            return f
    return None


def check(finder=None):
    """The check, once per process: policy, fingerprint, this env's cache entry, its in-process env
    corrections.  Run by the finder at `import torch`; returns the state (this module's ``state``).  Never raises."""
    global state
    st = state
    if st is not None:
        return st
    # active: not disabled nor off; why: what the check found (CUDAFIX_DEBUG says it);
    # failed: [(op, exception)]
    st = state = _NS(mode="fix", active=False, skip=frozenset(), debug=False, syspath=[], fp=None,
                          cache_path=None, entry=None, applied=[], preloaded=[], finder=None, log=[],
                          failed=[], error=None)
    try:
        environ = os.environ
        get = environ.get
        st.debug = (get("CUDAFIX_DEBUG") or "").strip().lower() not in _NO
        on = (get("CUDAFIX_DISABLE") or "").strip().lower() in _NO
        mode = (get("CUDAFIX_MODE") or "fix").strip().lower()
        if on and mode in ("warn", "off"):
            st.mode = mode  # (an unknown mode: the default, fix)
        if on and mode != "off":
            st.active = True
            skip = get("CUDAFIX_SKIP")
            if skip:
                st.skip = frozenset(map(str.strip, skip.split(",")))
            st.finder = finder = finder if finder is not None else find_finder()
            # the sys.path of the start (saved by the finder), not today's: `-c` and scripts add
            # their own directory, which must not make a new cache entry per directory
            start_path = getattr(finder, "path", None)
            st.syspath = path_part(start_path if isinstance(start_path, list) else None)
            # the loader's variables as the loader used them (at exec), the rest as they are now
            st.fp = fingerprint(loader_environ(environ), st.syspath)
            st.cache_path = os.path.join(cache_dir(sys.prefix, environ), cache.CACHE_FILE)
            st.entry = cache.lookup(st.cache_path, st.fp)
            if st.entry is not None:
                apply_env(st, st.entry, environ)
    except Exception as exc:  # noqa: BLE001 - never break an interpreter
        st.error = exc
    if st.debug:
        try:
            explain(st)
        except Exception:  # noqa: BLE001
            pass
    return st


def apply_env(st, entry, environ):  # the entry's in-process corrections that the policy allows
    for op in entry[3]:
        if st.mode == "fix" and op[0] not in st.skip and op[2] not in LOADER_VARS:
            try:
                apply_op(environ, op[1], op[2], op[3])
                st.applied.append(op)
            except Exception as exc:  # noqa: BLE001
                st.failed.append((op, exc))


def apply_op(environ, op, name, value):  # == cudafix.model.fixes.EnvOp.apply
    if op == "set":
        environ[name] = value or ""
    elif op == "unset":
        environ.pop(name, None)
    elif op == "prepend-path" or op == "remove-path":
        old = environ.get(name)
        parts = []
        for p in (old or "").split(":"):
            if p != value and (p or op == "remove-path"):
                parts.append(p)
        if op == "prepend-path":
            environ[name] = ":".join([value or ""] + parts)
        elif old is not None and len(parts) != len(old.split(":")):
            if any(parts):
                environ[name] = ":".join(parts)
            else:
                del environ[name]
    else:
        raise ValueError("unknown op %r" % (op,))


def is_import(frame):
    """True when find_spec was called by an import, not by a probe (importlib.util.find_spec)."""
    frame = frame.f_back if frame is not None else None  # the caller of importlib's _find_spec
    return frame is None or frame.f_code.co_name in ("_find_and_load_unlocked", "_find_and_load")


def remove_finder(finder):
    # Rebind, never mutate: importlib is iterating over the current list right now, and removing
    # our item from it would make that loop skip the finder after us.
    if any(f is finder for f in sys.meta_path):
        sys.meta_path = [f for f in sys.meta_path if f is not finder]


def on_torch(frame):
    """The finder saw the name ``torch``; ``frame`` is its caller's (importlib's _find_spec)."""
    finder = find_finder()
    if finder is None:
        return
    if frame is not None and frame.f_code.co_name == "_find_spec" and not is_import(frame):
        return  # a find_spec probe: stay installed for the real import
    remove_finder(finder)
    st = check(finder)
    if st.active and st.error is None:
        at_torch_import(st)


def preloads_due(st, entry):
    if st.mode != "fix":
        return []
    return [p for p in entry[4] if p[0] not in st.skip]


def warnings_due(st, entry, environ, preloaded):
    """[(rule, line)] still to say in this process tree."""
    warned = (environ.get(WARNED_VAR) or "").split(",")
    applied = [a[0] for a in st.applied]
    out = []
    for rule, quiet, line_fixed, line_unfixed in entry[5]:
        if rule in st.skip or rule in warned:
            continue
        fixed = st.mode == "fix" and (rule in preloaded or rule in applied)
        if not (fixed and quiet):
            out.append((rule, line_fixed if fixed else line_unfixed))
    return out


# Once per process group, not once per sibling (issue 18 item 7).  CUDAFIX_WARNED covers the
# process tree below a process that warned; a launcher that never imports torch and starts N
# workers (multiprocessing spawn/fork/forkserver, pools, xargs -P, DataLoader workers) has no such
# process, but all of them share its process group.  So each warning is claimed with an empty
# marker file per (process group, its leader's start time, rule), created O_CREAT|O_EXCL in the
# env's cache dir: of racing siblings exactly one creates it and warns.  A shell with job control
# gives each command line its own group, so the next run of a script warns again.  The leader's
# start time (/proc/<pgid>/stat) tells a reused pgid apart; markers of dead groups are removed.

def group_key(pid=None):
    """'<pgid>.<start time of the group's leader>' ('<pgid>.0' when the leader is gone)."""
    pgid = os.getpgid(0 if pid is None else pid)
    return "%d.%s" % (pgid, _start_time(pgid) or "0")


def _start_time(pid):
    try:
        fd = os.open("/proc/%d/stat" % pid, os.O_RDONLY | os.O_CLOEXEC)
        try:
            data = os.read(fd, 4096)
        finally:
            os.close(fd)
        return data[data.rindex(b")") + 2:].split()[19].decode("ascii")  # field 22: starttime
    except (OSError, ValueError, IndexError):
        return None


def claim_warnings(st, due):
    """The warnings of ``due`` no other process of this group said yet (all of them when the
    markers cannot be kept: then once per process tree, as CUDAFIX_WARNED does)."""
    d = None
    try:
        key = group_key()
        d = safefs.open_dir(os.path.dirname(st.cache_path), create=True) if st.cache_path else None
        if d is None:
            return due
        out = []
        for rule, line in due:
            name = "warned.%s.%s" % (key, rule)
            if not rule.replace("-", "").replace("_", "").isalnum() or safefs.create_once(d, name):
                out.append((rule, line))
            else:
                say(st, "not warning [%s]: already said in process group %s" % (rule, key))
        if out:
            _prune_markers(d)
        return out
    except Exception:  # noqa: BLE001 - never lose a warning to the marker mechanism
        return due
    finally:
        if d is not None:
            os.close(d)


def _prune_markers(d):
    for name in os.listdir(d):
        if name.startswith("warned."):
            parts = name.split(".")
            try:
                alive = _start_time(int(parts[1])) == parts[2] or parts[2] == "0" and os.getpgid(int(parts[1])) == int(parts[1])
            except (OSError, ValueError, IndexError):
                alive = False
            if not alive:
                try:
                    os.unlink(name, dir_fd=d)
                except OSError:
                    pass


def at_torch_import(st):
    """Called once by the hook's finder, just before torch's own import proceeds."""
    environ = os.environ
    entry = st.entry
    if entry is None:
        try:
            from cudafix.hook import plan as hookplan
        except Exception as exc:  # noqa: BLE001 - a broken install: say nothing unless asked
            say(st, "cudafix package not importable (%s): nothing checked" % type(exc).__name__)
            return
        entry = hookplan.cold(st)
        if entry is None:
            return
        st.entry = entry
        apply_env(st, entry, environ)
        say_ops(st, entry)
    preloaded = []
    preloads = preloads_due(st, entry)
    if preloads:
        import ctypes

        owners = safefs.env_owners(sys.prefix)
        lib_path = (exec_loader_vars() or environ).get("LD_LIBRARY_PATH")
        for rule, soname, path in preloads:
            why = safefs.preload_refusal(path, lib_path, owners)  # checked again: files change
            if why is not None:
                say(st, "not preloading %s for %s: %s [%s]" % (path, soname, why, rule))
                continue
            try:
                # by its real path: the directories checked are the ones the loader opens
                ctypes.CDLL(os.path.realpath(path), mode=ctypes.RTLD_GLOBAL)
                st.preloaded.append(path)
                preloaded.append(rule)
                say(st, "preloaded %s for %s [%s]" % (path, soname, rule))
            except Exception as exc:  # noqa: BLE001
                say(st, "could not preload %s: %s" % (path, exc))
    failed = [p[0] for p in preloads if p[0] not in preloaded]
    due = warnings_due(st, entry, environ, [r for r in preloaded if r not in failed])
    if due:
        due = claim_warnings(st, due)
    if due:
        import warnings

        for rule, line in due:
            # 1 this function, 2 on_torch, 3 the finder's find_spec, 4 the frame that imports
            # torch (the warnings module skips importlib's own frames)
            warnings.warn(line, CudafixWarning, stacklevel=4)
        old = [r for r in (environ.get(WARNED_VAR) or "").split(",") if r]
        try:
            environ[WARNED_VAR] = ",".join(old + [r for r, _ in due if r not in old])
        except Exception:  # noqa: BLE001
            pass
