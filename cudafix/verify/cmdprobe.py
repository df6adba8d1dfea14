"""What a `verify --first-run -- CMD` command uses, seen from inside its Python processes.

A directory put first on the command's PYTHONPATH holds a ``sitecustomize.py`` (PROBE below): every
Python process of the command (the program, and any Python it starts) imports it at start-up,
before the program's first line.  It never imports torch and costs a few microseconds per import:

- a finder at the head of ``sys.meta_path`` that only answers for ``torch.backends.cudnn``: it lets
  the real finders find the module and, once the module has run, wraps the setter of its
  ``benchmark`` flag (torch.backends's ContextProp keeps it as ``.setter``) and
  ``torch._C._set_cudnn_benchmark`` (what ``cudnn.flags(benchmark=...)`` calls), so that the program
  setting it True is written down the moment it happens;
- an ``atexit`` record: was torch imported, the flag's last value, was torch._dynamo imported (what
  torch.compile loads), CUDA_MODULE_LOADING at start and at exit (a program may set it itself, and
  torch sets LAZY when it is unset at its CUDA init).

Records are JSON lines appended to the file named by CUDAFIX_FIRSTRUN_PROBE.  Afterwards the env's
own sitecustomize (the next one on sys.path) is imported, as it would have been.  A process that
ignores PYTHONPATH (``python -I``/``-E``) or is not Python writes nothing: then what it uses is
"unknown", never "not used".  Python 3.8 compatible; the probe never raises into the program.
"""

from __future__ import annotations

import json
import os
from typing import Any, Dict, List, Optional

ENV_VAR = "CUDAFIX_FIRSTRUN_PROBE"

PROBE = r'''
# cudafix verify --first-run probe (cudafix/verify/cmdprobe.py): records what this process uses.
import sys as _sys
def _cudafix_probe():
    import atexit, json, os
    out = os.environ.get("CUDAFIX_FIRSTRUN_PROBE")
    if not out:
        return
    start_loading = os.environ.get("CUDA_MODULE_LOADING")
    seen = {"benchmark_set": None}

    def write(rec):
        try:
            rec["pid"] = os.getpid()
            with open(out, "a") as fh:
                fh.write(json.dumps(rec) + "\n")
        except Exception:
            pass

    def wrapped(orig):
        def set_benchmark(val):
            if seen["benchmark_set"] is None or bool(val):
                seen["benchmark_set"] = bool(val)
            if bool(val):
                write({"event": "cudnn.benchmark", "value": True})
            return orig(val)
        set_benchmark._cudafix = True
        return set_benchmark

    def patch(mod):
        # `cudnn.benchmark = x` goes through the property's own reference to the setter;
        # `with cudnn.flags(benchmark=x)` looks torch._C's up at each call: both are wrapped
        prop = type(mod).__dict__.get("benchmark")
        setter = getattr(prop, "setter", None)
        if setter is not None and not getattr(setter, "_cudafix", False):
            prop.setter = wrapped(setter)
        c = getattr(_sys.modules.get("torch"), "_C", None)
        orig = getattr(c, "_set_cudnn_benchmark", None)
        if orig is not None and not getattr(orig, "_cudafix", False):
            c._set_cudnn_benchmark = wrapped(orig)

    class Loader(object):
        def __init__(self, real):
            self._real = real

        def __getattr__(self, name):
            return getattr(self._real, name)

        def create_module(self, spec):
            return self._real.create_module(spec)

        def exec_module(self, module):
            self._real.exec_module(module)
            try:
                patch(_sys.modules.get(module.__name__, module))
            except Exception:
                pass

    class Finder(object):
        busy = False

        def find_spec(self, name, path=None, target=None):
            if name != "torch.backends.cudnn" or self.busy:
                return None
            self.busy = True
            try:
                spec = None
                for f in _sys.meta_path:
                    fs = getattr(f, "find_spec", None)
                    if f is self or fs is None:
                        continue
                    spec = fs(name, path, target)
                    if spec is not None:
                        break
            finally:
                self.busy = False
            if spec is not None and hasattr(spec.loader, "exec_module"):
                spec.loader = Loader(spec.loader)
            return spec

    _sys.meta_path.insert(0, Finder())

    def at_exit():
        rec = {"event": "exit", "argv0": (_sys.argv or [""])[0][-200:], "torch": "torch" in _sys.modules,
               "dynamo": "torch._dynamo" in _sys.modules, "inductor": "torch._inductor" in _sys.modules,
               "benchmark_set": seen["benchmark_set"], "module_loading_start": start_loading,
               "module_loading_exit": os.environ.get("CUDA_MODULE_LOADING")}
        cudnn = _sys.modules.get("torch.backends.cudnn")
        if cudnn is not None:
            try:
                rec["benchmark_final"] = bool(cudnn.benchmark)
            except Exception:
                pass
        write(rec)
    atexit.register(at_exit)

try:
    _cudafix_probe()
except Exception:
    pass
del _cudafix_probe

def _cudafix_chain():
    # the env's own sitecustomize, which this one shadows: import it as site would have
    import importlib
    here = __file__ and __import__("os").path.dirname(__import__("os").path.abspath(__file__))
    saved = list(_sys.path)
    _sys.path[:] = [p for p in _sys.path if __import__("os").path.abspath(p or ".") != here]
    mine = _sys.modules.pop("sitecustomize", None)
    try:
        importlib.import_module("sitecustomize")
    except ImportError:
        if mine is not None:
            _sys.modules["sitecustomize"] = mine
    except Exception:
        # the env's sitecustomize failed: site prints this and goes on; so do we
        import traceback
        traceback.print_exc()
    finally:
        _sys.path[:] = saved
_cudafix_chain()
del _cudafix_chain
'''


def install(base: str) -> str:
    """Write the probe under ``base`` (a private scratch dir of ours, tempfile.mkdtemp's); returns
    the directory to put first on PYTHONPATH."""
    from cudafix.store.fsutil import atomic_write, scratch_dirs

    (d,) = scratch_dirs(base, ["probe-site"])
    atomic_write(os.path.join(d, "sitecustomize.py"), PROBE.encode())
    return d


def child_env(env: Dict[str, str], site_dir: str, record: str) -> Dict[str, str]:
    """``env`` with the probe on PYTHONPATH (first) and its record file named."""
    e = dict(env)
    old = e.get("PYTHONPATH")
    e["PYTHONPATH"] = site_dir + (os.pathsep + old if old else "")
    e[ENV_VAR] = record
    return e


def read(record: str) -> List[Dict[str, Any]]:
    out: List[Dict[str, Any]] = []
    try:
        with open(record) as fh:
            for line in fh:
                try:
                    rec = json.loads(line)
                except ValueError:
                    continue
                if isinstance(rec, dict):
                    out.append(rec)
    except OSError:
        pass
    return out


def summarize(records: List[Dict[str, Any]]) -> Dict[str, Any]:
    """One run's records (all its Python processes) -> what the command used.  ``python`` False:
    no Python process of the command reported (not Python, or it ignored PYTHONPATH)."""
    exits = [r for r in records if r.get("event") == "exit"]
    bench = any(r.get("event") == "cudnn.benchmark" for r in records) or any(
        r.get("benchmark_set") or r.get("benchmark_final") for r in exits)
    loading: Optional[str] = None
    set_by_program = False
    for r in exits:
        if r.get("torch") or r.get("module_loading_exit"):
            end = (r.get("module_loading_exit") or "").upper() or None
            start = (r.get("module_loading_start") or "").upper() or None
            if end == "EAGER" or loading is None:
                loading = end
            if end == "EAGER" and start != "EAGER":
                set_by_program = True
    return {"python": bool(records), "processes": len(exits), "torch": any(r.get("torch") for r in exits),
            "cudnn_benchmark": bench, "dynamo": any(r.get("dynamo") for r in exits),
            "module_loading": loading, "module_loading_set_by_program": set_by_program}
