"""cudafix's startup hook (docs/hook.md): run() installs the `import torch` finder; never raises."""

# Named by cudafix.pth (Python < 3.15) and cudafix.start (PEP 829, >= 3.15).  Every interpreter of
# the env unmarshals and runs this module, so it does only this: honour CUDAFIX_DISABLE and
# CUDAFIX_MODE=off, and install a sys.meta_path finder for the name `torch` (no file read, no
# stat).  The check itself (fingerprint, cache, env corrections, recompute, preloads, warnings)
# runs in that finder, at `import torch`: cudafix.hookenv.  Its names (state, ENV_B, find_entry,
# apply_env, fingerprint, read_cache, CudafixWarning, ...) are attributes of this module too
# (module __getattr__); reading `state` before `import torch` runs the check then.

import os
import sys

_started = False


def run():  # entry point (cudafix.pth / cudafix.start): works once per process, never raises
    global _started
    if _started:
        return
    _started = True
    try:
        get = os.environ._data.get  # os.environ's bytes: no KeyError raised inside Mapping.get
        no = (b"", b"0", b"no", b"false", b"off")
        msg = "CUDAFIX_DISABLE is set: doing nothing"
        v = get(b"CUDAFIX_DISABLE")
        if v is None or v.strip().lower() in no:
            msg = "CUDAFIX_MODE=off: doing nothing"
            v = get(b"CUDAFIX_MODE")
            if v is None or v.strip().lower() != b"off":
                # path: the start's sys.path (the cache entry must not depend on the script's dir)
                sys.meta_path.insert(0, type(sys.implementation)(cudafix=True, find_spec=_find_spec, path=sys.path[:]))
                msg = "finder installed: the check runs at `import torch`"
        v = get(b"CUDAFIX_DEBUG")
        if v is not None and v.strip().lower() not in no:
            sys.stderr.write("cudafix: " + msg + "\n")
    except Exception:  # noqa: BLE001 - never break an interpreter
        pass


def _find_spec(name, path=None, target=None):  # the finder's: the work is cudafix.hookenv.on_torch
    if name == "torch":
        try:
            from cudafix import hookenv

            hookenv.on_torch(sys._getframe(1))
        except Exception as exc:  # noqa: BLE001 - torch's import proceeds whatever happens
            try:
                v = os.environ.get("CUDAFIX_DEBUG")
                if v and v.strip().lower() not in ("0", "no", "false", "off"):  # e.g. the package is gone
                    sys.stderr.write("cudafix: at `import torch`: %s: %s\n" % (type(exc).__name__, exc))
            except Exception:  # noqa: BLE001
                pass


def __getattr__(name):  # the rest of the hook's API: cudafix.hookenv.HOOK_API
    if name[:2] != "__":
        from cudafix import hookenv

        if name == "state":
            return hookenv.check()
        if name in hookenv.HOOK_API:
            return getattr(hookenv, name)
    raise AttributeError("module %r has no attribute %r" % (__name__, name))
