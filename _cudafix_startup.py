"""cudafix's startup hook, warm path (docs/hook.md): run() works once per process, never raises."""

# Named by cudafix.pth (Python < 3.15) and cudafix.start (PEP 829, >= 3.15).  Every interpreter of
# the env unmarshals and runs this module, so it holds only the warm check (fingerprint -> cache
# entry -> env corrections -> a finder if `import torch` has work), with os and sys only (loaded
# at every start), written for few bytes of bytecode and few allocated objects: each KB costs ~5 us
# to unmarshal, and each object brings the interpreter's next garbage collection closer
# (docs/benchmarks.md).  The same computations, written plainly, are cudafix.hookenv's
# fingerprint / path_part / machine_part / cache_dir / parse_entries, used by the cold path and
# kept equal to this module by tests (test_startup_robust.py, test_startup_cache.py).  hookenv's names (ENV_NAMES,
# fingerprint, parse_entries, say, CudafixWarning, ...) stay reachable as attributes of this module
# (module __getattr__ at the end).

import os
import sys

VERSION = "0.1.0"  # == cudafix.__version__ (tests/test_startup_cache.py checks)
CACHE_FILE = "hook.v1"
MAGIC = b"cudafix-hook-cache 1"
MAX_CACHE_BYTES = 1 << 20
WARNED_VAR = "CUDAFIX_WARNED"  # rule ids already warned about in this process tree
LOADER_VARS = ("LD_LIBRARY_PATH", "LD_PRELOAD")  # never changed in-process (docs/hook.md)

# The variables whose value changes cudafix's verdicts (os.environ's bytes keys): what the probes
# read (a test keeps this a superset of cudafix.probes.environment.VARIABLES), plus nvcc on PATH,
# torch on PYTHONPATH, the JIT cache's default place and the what-if overrides.  The policy
# variables (CUDAFIX_*) act at start, so they are not part of the fingerprint.  One constant:
# cheaper to unmarshal than 50.
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
PATH PYTHONPATH HOME XDG_CACHE_HOME CUDAFIX_ASSUME_DRIVER CUDAFIX_ASSUME_GPU""".split())

state = None  # what the hook decided in this process (a types.SimpleNamespace, see run)
_started = False
_NS = type(sys.implementation)  # types.SimpleNamespace, without importing types
_NO = ("", "0", "no", "false", "off")
_ARITY = {b"S": 3, b"O": 5, b"P": 4, b"W": 5}


def run():  # entry point (cudafix.pth / cudafix.start): works once per process, never raises
    global _started, state
    if _started:
        return
    _started = True
    st = None
    try:
        # why: what the check found (CUDAFIX_DEBUG says it); failed: [(op, exception)]
        st = state = _NS(mode="fix", skip=frozenset(), debug=False, syspath=[], fp=None, cache_path=None,
                         entry=None, applied=[], preloaded=[], finder=None, log=[], failed=[], error=None)
        env = os.environ
        data = env._data  # os.environ's bytes: dict.get, no KeyError raised inside Mapping.get
        get = data.get
        v = get(b"CUDAFIX_DEBUG")
        st.debug = v is not None and os.fsdecode(v).strip().lower() not in _NO
        v = get(b"CUDAFIX_DISABLE")
        on = v is None or os.fsdecode(v).strip().lower() in _NO
        v = get(b"CUDAFIX_MODE")
        mode = "fix" if v is None else (os.fsdecode(v) or "fix").strip().lower()
        if on and mode in ("warn", "off"):
            st.mode = mode  # (an unknown mode: the default, fix)
        if on and mode != "off":
            v = get(b"CUDAFIX_SKIP")
            if v:
                st.skip = frozenset(map(str.strip, os.fsdecode(v).split(",")))
            # The fingerprint (== hookenv.fingerprint(os.environ, hookenv.path_part(), hookenv.machine_part())):
            # each sys.path entry but the stdlib's with its stat (installing or removing a package
            # changes its directory's mtime), the stat of the first torch/version.py, the driver's
            # version file and the GPUs it lists, this Python, the ENV_B variables.
            std = os.path.dirname(os.__file__)
            parts = st.syspath
            torch = "torch=-"
            for p in sys.path:
                if isinstance(p, str) and p != std and not p.startswith(std + "/lib-dynload") and not p.endswith(".zip"):
                    try:
                        s = os.stat(p or ".")
                        sig = f"{s.st_mtime_ns}:{s.st_size}:{s.st_ino}"
                    except (OSError, ValueError):
                        sig = "-"
                    parts.append(f"path={p}:{sig}")
                    if sig != "-" and torch == "torch=-":
                        try:
                            s = os.stat((p or ".") + "/torch/version.py")
                            torch = f"torch={p or '.'}/torch/version.py:{s.st_mtime_ns}:{s.st_size}:{s.st_ino}"
                        except (OSError, ValueError):
                            pass
            parts.append(torch)
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
            names = sorted(data.keys() & ENV_B)
            text = "\0".join(["cudafix " + VERSION, sys.version, sys.prefix, "driver=" + driver, "gpus=" + gpus, *parts])
            text = (text.encode("utf-8", "surrogateescape") + b"\0\0" + b"\0".join(names) + b"\0\0"
                    + b"\0".join(map(data.get, names)))
            st.fp = fp = f"{len(text):x}.{hash(int.from_bytes(text, 'little')):x}.{hash(int.from_bytes(text, 'big')):x}"
            # the cache (== hookenv.cache_dir(sys.prefix, os.environ) + "/" + CACHE_FILE)
            d = get(b"XDG_CACHE_HOME")
            if d and d[:1] == b"/":
                d = os.fsdecode(d) + ("cudafix" if d[-1:] == b"/" else "/cudafix")
            else:
                d = get(b"HOME")
                d = os.fsdecode(d) + (".cache/cudafix" if d[-1:] == b"/" else "/.cache/cudafix") if d and d[:1] == b"/" else f"/tmp/cudafix-{os.getuid()}"
            p = sys.prefix
            if p[:1] != "/" or "/." in p or "//" in p or p[-1:] == "/":
                p = os.path.abspath(p)  # (else abspath would return it unchanged)
            d = f"{d}/envs/{int.from_bytes(p.encode('utf-8', 'surrogateescape'), 'little') % 2305843009213693951 * 0x9E3779B97F4A7C15 % 2305843009213693951:016x}"
            st.cache_path = path = d + "/" + CACHE_FILE
            # Trusted only if: opened with O_NOFOLLOW (a miss: one failed open), a regular file, it
            # and its directory ours and writable by nobody else, < MAX_CACHE_BYTES, whole.
            e = None
            try:
                fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
                try:
                    s = os.fstat(fd)
                    uid = os.geteuid()
                    if s.st_mode & 0o170022 == 0o100000 and s.st_uid == uid and s.st_size <= MAX_CACHE_BYTES:
                        s2 = os.stat(d)
                        if s2.st_mode & 0o170022 == 0o040000 and s2.st_uid == uid:
                            e = find_entry(os.read(fd, s.st_size + 1), fp, s.st_size)
                finally:
                    os.close(fd)
            except Exception:  # noqa: BLE001 - a cache is never worth an exception: then none
                e = None
            need = e is None  # then the check runs at `import torch`
            if e is not None:
                st.entry = e
                apply_env(st, e, env)
                # work for `import torch`: a preload (mode fix), or a warning not yet said in this
                # process tree that is not a quiet one whose fix was just applied
                for p in e[4]:
                    need = need or st.mode == "fix" and p[0] not in st.skip
                if e[5] and not need:
                    warned = os.fsdecode(get(b"CUDAFIX_WARNED") or b"").split(",")  # WARNED_VAR
                    for r, q, _, _ in e[5]:
                        if r not in st.skip and r not in warned:
                            quiet = False
                            if q:
                                for a in st.applied:
                                    quiet = quiet or a[0] == r
                            need = need or not quiet
            if need:
                for f in sys.meta_path:  # (the classes there would raise inside getattr)
                    need = need and (isinstance(f, type) or not getattr(f, "cudafix", False))
                if need:
                    st.finder = _NS(cudafix=True, state=st, find_spec=_find_spec)
                    sys.meta_path.insert(0, st.finder)
    except Exception as exc:  # noqa: BLE001 - never break an interpreter
        if st is not None:
            st.error = exc
    if st is not None and st.debug:  # one stderr line per decision
        try:
            from cudafix import hookenv

            hookenv.explain(st)
        except Exception:  # noqa: BLE001 - e.g. the package is gone: say nothing
            pass


# find_entry(): in a cache file's bytes, the first entry (file order: newest first) naming fp as
# its fingerprint or its post-correction one whose files are unchanged, or None; ValueError when
# the file is not whole or a candidate malformed.  Fingerprints ('%x.%x.%x') occur on E lines
# only (other fields are hex or '-'), so bytes.find jumps to the candidates; the format, and the
# whole-file parser: cudafix.hookenv.
def find_entry(data, fp, size=None):
    end = len(data) - 5  # the NL before END
    if end < len(MAGIC) or data[:len(MAGIC) + 1] != MAGIC + b"\n" or data[end:] != b"\nEND\n" or size is not None and len(data) > size:
        raise ValueError("not a whole cudafix hook cache")
    key = b" " + fp.encode("ascii")
    i = data.find(key)
    while i >= 0:
        stop = data.find(b"\n", i)
        f = data[data.rfind(b"\n", 0, i) + 1:stop].split(b" ")
        if len(f) == 3 and f[0] == b"E" and key[1:] in f:
            e = [f[1].decode("ascii"), f[2].decode("ascii"), [], [], [], []]
            nxt = data.find(b"\nE ", stop, end)
            for line in data[stop + 1:end if nxt < 0 else nxt].split(b"\n") if stop < end and nxt != stop else ():
                f = line.split(b" ")
                if _ARITY.get(f[0]) != len(f) or f[0] == b"W" and f[2] not in (b"0", b"1"):
                    raise ValueError("bad record")
                rec = []
                for x in f[1:]:
                    rec.append(None if x == b"-" else x == b"1" if len(rec) == 1 and f[0] == b"W"
                               else bytes.fromhex(x.decode("ascii")).decode("utf-8", "surrogateescape"))
                e[b"SOPW".index(f[0]) + 2].append(tuple(rec))
            fresh = True
            for p, sig in e[2]:
                try:
                    s = os.stat(p)
                    fresh = fresh and sig == f"{s.st_mtime_ns}:{s.st_size}:{s.st_ino}"
                except (OSError, ValueError):
                    fresh = fresh and sig == "-"
            if fresh:
                return e
        i = data.find(key, stop)
    return None


def apply_env(st, entry, environ):  # the entry's in-process corrections that the policy allows
    for op in entry[3]:
        if st.mode == "fix" and op[0] not in st.skip and op[2] not in LOADER_VARS:
            try:
                apply_op(environ, op[1], op[2], op[3])
                st.applied.append(op)
            except Exception as exc:  # noqa: BLE001
                st.failed.append((op, exc))


def apply_op(environ, op, name, value):  # == cudafix.fixes.EnvOp.apply
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


# The finder: a SimpleNamespace (no class to build at each start) whose find_spec reacts to the
# name ``torch`` only; the work is cudafix.hookenv.on_torch.
def _find_spec(name, path=None, target=None):
    if name == "torch":
        try:
            from cudafix import hookenv

            hookenv.on_torch(state.finder, sys._getframe(1))
        except Exception as exc:  # noqa: BLE001 - torch's import proceeds whatever happens
            if state.debug:  # e.g. the package is gone
                try:
                    sys.stderr.write("cudafix: at `import torch`: %s: %s\n" % (type(exc).__name__, exc))
                except Exception:  # noqa: BLE001
                    pass


def __getattr__(name):  # the rest of the hook's API: cudafix.hookenv.HOOK_API
    if name[:2] != "__":
        from cudafix import hookenv

        if name in hookenv.HOOK_API:
            return getattr(hookenv, name)
    raise AttributeError("module %r has no attribute %r" % (__name__, name))
