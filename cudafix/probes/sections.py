"""One snapshot, one frozen request, five sections: the probes of `take_snapshot` as steps that run
serially in this process or some of them in children (cudafix/probes/ahead.py), with one answer.

A :class:`Request` is everything a snapshot is taken for (the interpreter, the environment, the
cache, the probe root, the switches).  Its probes fall into five sections, each a function of the
request that fills its fields of a Snapshot (:data:`FIELDS`):

- ``pyenv``: the target interpreter (cudafix/probes/pyenv/interpreter.py), the variables CUDA and
  torch read, the toolkits, torch and torchvision, what pins torch, the libraries torch would load;
- ``torch_import``: `import torch` simulated (cudafix/probes/loader/torchload.py);
- ``machine``: the host, the node, the driver, the PCI hardware, WSL, the JIT cache
  (cudafix/probes/machine/machine.py);
- ``gpus``: NVML, else /proc (cudafix/probes/machine/gpus.py);
- ``extensions``: every CUDA binary the env can import besides torch's own.

:func:`assemble` takes the sections in :data:`ORDER`: each from the child that ran it for this
request (``started``), else here.  A child runs :func:`run` -- the same functions -- so a forked
answer is the serial one by construction; the one input a child works out for itself, the import
simulation's and the extension scan's (the env's sys.path and torch: :data:`INPUTS`), is compared
with the env section's before its answer is used.  Nothing here is imported before the CLI forks
but this module's top, which imports nothing of cudafix's.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

    from cudafix.model.snapshot import Snapshot, TorchBuild

SYSTEM_PREFIXES = ("/", "/usr", "/usr/local")  # sys.prefix of a distribution's or `make install`'s python

_FIELDS = ("python", "env", "cache_dir", "root", "usr_local", "use_nvml", "call_driver_api", "scan_arch", "scan_extensions")


class Request(tuple):
    """What one snapshot is taken for (made by :func:`request`; ``env`` a read-only mapping): a
    tuple with a name per field and no way to change one.  Not a namedtuple: `collections` would
    be imported before the CLI's first fork."""

    __slots__ = ()

    def __new__(cls, *values: Any) -> "Request":
        if len(values) != len(_FIELDS):
            raise TypeError("Request takes %d values (%s), not %d" % (len(_FIELDS), ", ".join(_FIELDS), len(values)))
        return tuple.__new__(cls, values)

    def __repr__(self) -> str:
        return "Request(%s)" % ", ".join("%s=%r" % kv for kv in zip(_FIELDS, self))


for _i, _name in enumerate(_FIELDS):
    setattr(Request, _name, property(lambda self, _i=_i: self[_i]))

_READ_ONLY = type(type.__dict__)  # types.MappingProxyType, without importing types before the fork


def request(python: Optional[str] = None, env: Optional[Mapping[str, str]] = None, cache_dir: Optional[str] = None,
            root: Optional[str] = None, usr_local: Optional[str] = None, use_nvml: bool = True,
            call_driver_api: bool = True, scan_arch: bool = True, scan_extensions: bool = True) -> Request:
    """The request for a snapshot of this machine and one Python env (this one, or ``python``);
    ``root`` / ``usr_local`` move what the probes read (default: store.paths.probe_root(env))."""
    from cudafix.store.paths import probe_root

    env = dict(os.environ if env is None else env)
    root = probe_root(env) if root is None else root
    usr_local = os.path.join(root, "usr/local") if usr_local is None else usr_local
    # a laid-out tree has no live NVML (its libcuda is the tree's own file)
    return Request(python, _READ_ONLY(env), cache_dir, root, usr_local, use_nvml and root == "/",
                   call_driver_api, scan_arch, scan_extensions)


# -- the sections --------------------------------------------------------------------------------


def _pyenv(req: Request, snap: Snapshot, ctx: Dict[str, Any], **_opts: Any) -> None:
    """The target interpreter first; everything else here follows from its sys.path and prefix,
    which go into ``ctx`` for the sections after it (``ctx["inputs"]``: the import simulation's
    and the extension scan's inputs)."""
    from cudafix.probes.pyenv import environment

    env = dict(req.env)
    sys_path = _probe_python(snap, req.python, env)
    prefix = snap.python.prefix or None
    keep = kept_dirs(prefix, req.root)  # under a probe root, the env's own dirs are still read where they are
    ctx.update(sys_path=sys_path, keep=keep)
    snap.env = _guard(snap, "env", lambda: environment.collect_env(env)) or {}
    _probe_python_env(snap, env, sys_path, prefix, req.usr_local, req.cache_dir, req.scan_arch)
    inputs: Dict[str, Any] = {"torch_import": import_inputs(sys_path, env, snap.python, snap.primary_torch, req.cache_dir,
                                                            req.root, keep)}
    _guard(snap, "libraries", lambda: _probe_libraries(snap, inputs["torch_import"]))
    if req.scan_arch and req.scan_extensions and sys_path is not None:
        inputs["extensions"] = extension_kwargs(sys_path, env, prefix, bool(snap.python.conda_prefix), snap.primary_torch,
                                                snap.python.version, req.cache_dir, req.root, keep)
    ctx["inputs"] = inputs


def _torch_import(req: Request, snap: Snapshot, ctx: Dict[str, Any], helper: bool = False, **_opts: Any) -> None:
    """`import torch` simulated (not on Windows, where torch's DLL loading is
    cudafix/probes/loader/windows.py's, nor without the target's sys.path); ``helper``: torch's
    requirements may be read in a process of their own meanwhile (a child's, cudafix/probes/ahead.py)."""
    inputs = _inputs(req, ctx, "torch_import")
    if inputs is not None and inputs["sys_path"] is not None and not inputs["windows"]:
        _guard(snap, "torch_import", lambda: _probe_torch_import(snap, inputs, helper))


def _machine(req: Request, snap: Snapshot, ctx: Dict[str, Any], **_opts: Any) -> None:
    """The machine's probes, with the env's own directories the env section found (it runs first in
    the same process: serially, in the child of the sections left, or in the parent)."""
    from cudafix.probes.machine import machine

    machine.apply(snap, machine.run(dict(req.env), req.root, req.use_nvml, req.call_driver_api, ctx["keep"], req.cache_dir))


def _gpus(req: Request, snap: Snapshot, ctx: Dict[str, Any], keep_nvml: bool = False, **_opts: Any) -> None:
    from cudafix.probes.machine import gpus

    g = _guard(snap, "gpus", lambda: gpus.probe_gpus(dict(req.env), root=req.root, use_nvml=req.use_nvml, keep_nvml=keep_nvml))
    if g is not None:
        snap.gpus = g


def _extensions(req: Request, snap: Snapshot, ctx: Dict[str, Any], workers: Optional[int] = None, **_opts: Any) -> None:
    from cudafix.probes.pyenv.extensions import probe_extensions

    kwargs = _inputs(req, ctx, "extensions")
    if kwargs is None:  # not scanning, or no sys.path of the target
        return
    more = {"workers": workers} if workers else {}
    got = _guard(snap, "extensions", lambda: probe_extensions(**dict(kwargs, **more)))
    if got is not None:
        snap.extensions = got


def _inputs(req: Request, ctx: Dict[str, Any], section: str) -> Optional[Dict[str, Any]]:
    """The inputs of a section that follows from the env section's facts: the env section's where
    it ran in this process, else (a child forked before it) worked out here, kept in ``ctx`` for
    :func:`assemble` to compare."""
    if "sys_path" in ctx:
        return ctx.get("inputs", {}).get(section)
    got = _own_inputs(req, section)
    ctx.setdefault("inputs", {})[section] = got
    return got


def _own_inputs(req: Request, section: str) -> Optional[Dict[str, Any]]:
    """A section's inputs worked out without the env section, for this interpreter: its sys.path,
    prefix and primary torch (no arch scan, no conda records: only the torch's directory and
    version.py matter).  None where they cannot be (another interpreter, a scan not asked for)."""
    if req.python is not None or (section == "extensions" and not (req.scan_arch and req.scan_extensions)):
        return None
    from cudafix.probes.pyenv import torch_build
    from cudafix.probes.pyenv.interpreter import current_python

    info, sys_path = current_python()
    prefix = info.prefix or None
    keep = kept_dirs(prefix, req.root)
    torches = torch_build.probe_torch(sys_path, prefix=prefix, scan_arch=False, conda_records=[])
    primary = torches[0] if torches else None
    if section == "torch_import":
        return import_inputs(sys_path, dict(req.env), info, primary, req.cache_dir, req.root, keep)
    conda = bool(prefix and os.path.isdir(os.path.join(prefix, "conda-meta")))
    return extension_kwargs(sys_path, dict(req.env), prefix, conda, primary, info.version, req.cache_dir, req.root, keep)


STEPS: Dict[str, Callable[..., None]] = {"pyenv": _pyenv, "torch_import": _torch_import, "machine": _machine, "gpus": _gpus,
                                         "extensions": _extensions}
# the import simulation's and the extension scan's inputs come from the env section
ORDER = ("pyenv", "torch_import", "machine", "gpus", "extensions")
INPUTS = ("torch_import", "extensions")  # the sections whose inputs a child may work out for itself (_own_inputs)
FIELDS = {
    "pyenv": ("python", "env", "toolkits", "torch", "torchvision", "torch_pinned", "libraries"),
    "torch_import": ("torch_import",),
    "machine": ("host", "node", "driver", "hardware", "wsl", "jit_cache"),
    "gpus": ("gpus",),
    "extensions": ("extensions",),
}


def run(req: Request, names: Sequence[str], **opts: Any) -> Tuple[Dict[str, Tuple[Dict[str, Any], Dict[str, str]]], Dict[str, Any]]:
    """Run the sections ``names`` in this order (a child's work): ``({name: (fields, errors)}, context)``."""
    from cudafix.model.snapshot import Snapshot

    snap = Snapshot(source="probed")
    ctx: Dict[str, Any] = {}
    out: Dict[str, Tuple[Dict[str, Any], Dict[str, str]]] = {}
    for name in names:
        before = set(snap.probe_errors)
        STEPS[name](req, snap, ctx, **opts)
        out[name] = ({f: getattr(snap, f) for f in FIELDS[name]},
                     {k: v for k, v in snap.probe_errors.items() if k not in before})
    return out, ctx


def assemble(req: Request, started: Any = None) -> Snapshot:
    """The snapshot for ``req``: each section from ``started`` (cudafix.probes.ahead.Started, for
    this same request), else run here, in :data:`ORDER`; then the Windows DLL probe, which adds to
    the driver's facts."""
    from cudafix import __version__
    from cudafix.model.snapshot import Snapshot

    if started is not None and started.request != req:  # started for another snapshot: not used
        started.close()
        started = None
    snap = Snapshot(created=now(), cudafix_version=__version__, source="probed")
    ctx: Dict[str, Any] = {}
    for name in ORDER:
        got = started.answer(name) if started is not None else None
        if got is not None and name in INPUTS and got[2].get("inputs", {}).get(name) != ctx.get("inputs", {}).get(name):
            got = None  # probed for other inputs than the env section found
        if got is None:
            STEPS[name](req, snap, ctx)
            continue
        fields, errors, child_ctx = got
        for f, v in fields.items():
            setattr(snap, f, v)
        snap.probe_errors.update(errors)
        if name == "pyenv":
            ctx.update(child_ctx)
    if started is not None:
        started.close()
    if (snap.python.platform or "").startswith("win"):  # native Windows: the DLL side of import torch
        _probe_windows(snap, dict(req.env), ctx.get("sys_path"))
    snap.probe_errors = _in_probe_order(snap.probe_errors)
    return snap


# -- the guard, and the Python env section's steps ----------------------------------------------


def now() -> str:
    """The time in UTC to the second, as datetime's isoformat() gives it ("2026-12-01T21:23:29+00:00")."""
    import time

    return time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime())


def _guard(snap: Snapshot, name: str, fn: Callable[[], Any]) -> Any:
    """An exception in one probe is its error (``probe_errors[name]``); the others still run."""
    try:
        return fn()
    except Exception as exc:
        snap.probe_errors[name] = "%s: %s" % (type(exc).__name__, exc)
        return None


def alloc_conf_keys(env: Mapping[str, str]) -> List[str]:
    """The keys of PYTORCH_CUDA_ALLOC_CONF / PYTORCH_ALLOC_CONF as any torch parser would split them."""
    import re

    out: List[str] = []
    for name in ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF"):
        for item in re.split(r"[\s,]+", env.get(name) or ""):
            key = item.replace(" ", "").split(":", 1)[0].strip("[]")
            if key and key not in out:
                out.append(key)
    return out



def _probe_python(snap: Snapshot, python: Optional[str], env: Mapping[str, str]) -> Optional[List[str]]:
    """The target interpreter into ``snap.python``; its sys.path (None: it could not be asked)."""
    got: List[List[str]] = []

    def run() -> None:
        from cudafix.probes.pyenv.interpreter import current_python, query_python

        info, sys_path = current_python() if python is None else query_python(python, env)
        if info.prefix and os.path.isdir(os.path.join(info.prefix, "conda-meta")):
            info.conda_prefix = info.prefix
        snap.python = info
        got.append(sys_path)

    _guard(snap, "python", run)
    if python is not None and "python" in snap.probe_errors:
        snap.python.executable = python
    return got[0] if got else None


def _probe_python_env(snap: Snapshot, env: Mapping[str, str], sys_path: Optional[List[str]], prefix: Optional[str],
                      usr_local: str, cache_dir: Optional[str], scan_arch: bool) -> None:
    """The toolkits, then what the env has installed: torch, torchvision, what pins torch."""
    from cudafix.probes.pyenv import toolkits, torch_build

    tk = _guard(snap, "toolkits", lambda: toolkits.probe_toolkits(env, prefix=prefix, sys_path=sys_path, usr_local=usr_local,
                                                                  cache_dir=cache_dir))
    if tk is not None:
        snap.toolkits = tk
    conda_records = snap.toolkits.conda_packages if tk is not None and prefix and snap.python.conda_prefix else None
    if sys_path is None:
        snap.probe_errors.setdefault("torch", "no sys.path of the target interpreter (see probe_errors['python'])")
        return
    alloc_names = alloc_conf_keys(env)
    t = _guard(snap, "torch", lambda: torch_build.probe_torch(sys_path, prefix=prefix, cache_dir=cache_dir, scan_arch=scan_arch,
                                                             conda_records=conda_records, alloc_names=alloc_names))
    if t is not None:
        snap.torch = t
    tv = _guard(snap, "torchvision", lambda: torch_build.probe_torchvision(sys_path, prefix=prefix, conda_records=conda_records))
    if tv is not None:
        snap.torchvision = tv
    pinned = _guard(snap, "torch_pinned", lambda: torch_build.probe_torch_pinned(sys_path))
    if pinned is not None:
        snap.torch_pinned = pinned


def _probe_libraries(snap: Snapshot, inputs: Dict[str, Any]) -> None:
    from cudafix.probes.loader.libraries import probe_libraries  # type: ignore  # the loader-simulation module

    snap.libraries = probe_libraries(inputs["torch_dir"], inputs["env"], cache_dir=inputs["cache_dir"], root=inputs["root"],
                                     keep=inputs["keep"], sys_path=inputs["sys_path"])


def _probe_torch_import(snap: Snapshot, inputs: Dict[str, Any], helper: bool = False) -> None:
    """`import torch` simulated (cudafix/probes/loader/torchload.py)."""
    from cudafix.probes.loader.torchload import probe_torch_import

    snap.torch_import = probe_torch_import(inputs["torch_dir"], inputs["sys_path"], inputs["env"],
                                           python_version=inputs["python_version"], executable=inputs["executable"],
                                           cache_dir=inputs["cache_dir"], root=inputs["root"], keep=inputs["keep"],
                                           helper=helper)


def _probe_windows(snap: Snapshot, env: Mapping[str, str], sys_path: Optional[List[str]]) -> None:
    from cudafix.probes.loader.windows import probe_windows

    primary = snap.primary_torch
    win = _guard(snap, "windows", lambda: probe_windows(primary.package_dir if primary else None, snap.python.version, env,
                                                        cuda=primary.cuda if primary else None,
                                                        exec_prefix=snap.python.prefix, site_dirs=sys_path or []))
    if win is not None:
        snap.windows = win
        if win.driver_version and not snap.driver.libcuda_path:  # the Windows driver: nvcuda.dll, not libcuda
            snap.driver.libcuda_path, snap.driver.libcuda_version = win.nvcuda, win.driver_version
            snap.driver.found_via["libcuda_version"] = win.found_via.get("driver_version", "")
            for k in ("libcuda_path", "libcuda_version"):
                snap.driver.unknown.pop(k, None)


# The order the probes run in serially: probe_errors keeps it, wherever each ran.
PROBE_ORDER = ("host", "node", "python", "env", "driver", "hardware", "gpus", "toolkits", "torch", "torchvision",
               "torch_pinned", "libraries", "torch_import", "extensions", "wsl", "windows", "jit_cache")


def _in_probe_order(errors: Dict[str, str]) -> Dict[str, str]:
    rank = {name: i for i, name in enumerate(PROBE_ORDER)}
    return dict(sorted(errors.items(), key=lambda kv: rank.get(kv[0], len(rank))))


def kept_dirs(prefix: Optional[str], root: str) -> Tuple[str, ...]:
    """The inspected env's own directories, read where they are under a probe root
    (cudafix.probes.machine.host.machine_path, docs/wsl.md) -- unless the prefix is the system's own
    (/usr: a distribution's python), whose libraries the tree has."""
    return (prefix,) if prefix and root != "/" and os.path.normpath(prefix) not in SYSTEM_PREFIXES else ()


def import_inputs(sys_path: Optional[List[str]], env: Mapping[str, str], python: Any, primary: Optional[TorchBuild],
                  cache_dir: Optional[str], root: str, keep: Tuple[str, ...]) -> Dict[str, Any]:
    """The inputs of `import torch` simulated (and of the libraries probe): the env's sys.path and
    primary torch, the interpreter's version, executable and platform (``python``: a PythonInfo)."""
    return {"torch_dir": primary.package_dir if primary else None, "sys_path": None if sys_path is None else list(sys_path),
            "env": dict(env), "python_version": python.version or "", "executable": python.executable,
            "windows": (python.platform or "linux").startswith("win"), "cache_dir": cache_dir, "root": root,
            "keep": tuple(keep)}


def extension_kwargs(sys_path: List[str], env: Mapping[str, str], prefix: Optional[str], conda: bool,
                     primary: Optional[TorchBuild], python_version: str, cache_dir: Optional[str], root: str,
                     keep: Tuple[str, ...]) -> Dict[str, Any]:
    """The arguments of the extension scan (probe_extensions) for an env and its primary torch."""
    from cudafix.probes.pyenv.extensions import extension_tag

    tag = extension_tag(python_version, primary.cuda, primary.hip) if primary else None
    return {"sys_path": list(sys_path), "env": dict(env), "prefix": prefix, "conda": conda,
            "torch_dir": primary.package_dir if primary else None, "cache_dir": cache_dir, "tag": tag,
            "root": root, "keep": tuple(keep)}
