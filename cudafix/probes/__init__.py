"""Probes: read the machine and a Python environment into a Snapshot (no torch import, no cuInit).

``take_snapshot()`` is the one entry point.  Each probe runs guarded: an exception in one
becomes ``snapshot.probe_errors[name] = "Type: message"`` and the rest still fills.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

    from cudafix.model.snapshot import PythonInfo, Snapshot, TorchBuild

# The model (and json, sysconfig) is imported where a snapshot is made, not here: `status` imports
# this package (for cudafix.probes.ahead) before it forks, and whatever is imported first delays
# the fork.

PYTHON_QUERY_TIMEOUT_S = 30.0
SYSTEM_PREFIXES = ("/", "/usr", "/usr/local")  # sys.prefix of a distribution's or `make install`'s python

# Runs inside the inspected interpreter: stdlib only, Python 2.7/3.x syntax, one JSON line.
_QUERY = (
    "import sys, json\n"
    "try:\n"
    "    import sysconfig; plat = sysconfig.get_platform()\n"
    "except Exception:\n"
    "    plat = ''\n"
    "sys.stdout.write('\\n' + json.dumps({'executable': sys.executable, 'version': '%d.%d.%d' % tuple(sys.version_info[:3]),"
    " 'prefix': sys.prefix, 'path': sys.path, 'platform': plat}) + '\\n')\n"
)


class ProbeError(RuntimeError):
    """A probe could not run at all (its message lands in probe_errors)."""


def parse_python_query(stdout: str) -> Dict[str, Any]:
    """The JSON line the query script printed (the last line that parses; .pth noise ignored)."""
    import json

    for line in reversed(stdout.splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                data = json.loads(line)
            except ValueError:
                continue
            if isinstance(data, dict) and isinstance(data.get("path"), list):
                return data
    raise ProbeError("the interpreter printed no sys.path report")


def query_python(python: str, env: Mapping[str, str], timeout: float = PYTHON_QUERY_TIMEOUT_S) -> Tuple[PythonInfo, List[str]]:
    """sys.path / prefix / version of another interpreter with ONE bounded subprocess.

    ``-c`` (not ``-I -S``): site-packages and .pth files must count, as they do for the user.
    cudafix's own startup hook is switched off in the child (CUDAFIX_DISABLE=1).  It runs in
    ``/`` (safefs.CHILD_CWD): ``-c`` would import a json.py planted in the caller's directory.
    """
    from cudafix.model.snapshot import PythonInfo
    from cudafix.store import runner  # here: `status` on this interpreter never spawns
    from cudafix.store.safefs import CHILD_CWD, env_owners

    child_env = dict(env)
    child_env["CUDAFIX_DISABLE"] = "1"
    # the trusted runner (an interpreter of root's, ours or its env owner's; from /, stdin closed,
    # its group killed on the timeout).  Not -I: the question is the sys.path the user's programs
    # get, PYTHONPATH and the user site included.
    try:
        proc = runner.run([python, "-c", _QUERY], timeout, env=child_env, max_output=1 << 22,
                          owners=env_owners(os.path.dirname(os.path.dirname(python))))
    except OSError as exc:
        raise ProbeError("cannot run %s: %s" % (python, exc.strerror or exc)) from None
    if proc.timed_out:
        raise ProbeError("%s did not answer within %.0f s" % (python, timeout))
    if proc.returncode != 0:
        err = proc.text("stderr").strip().splitlines()
        raise ProbeError("%s exited with %d%s" % (python, proc.returncode, (": " + err[-1]) if err else ""))
    data = parse_python_query(proc.text())
    prefix = str(data.get("prefix") or "")
    info = PythonInfo(executable=str(data.get("executable") or python), version=str(data.get("version") or ""),
                      prefix=prefix, platform=str(data.get("platform") or ""))
    # '' is the child's own cwd (an artifact of -c), not the user's script dir: dropped.
    path = [p for p in data["path"] if isinstance(p, str) and p]
    # An empty or relative PYTHONPATH entry names the current directory: the child (run in `/`)
    # resolved it there; the user's programs resolve it in theirs, as `status` run here would.
    try:
        here = os.getcwd()
    except OSError:
        here = None
    back = {}
    for entry in (env.get("PYTHONPATH") or "").split(os.pathsep) if here else ():
        if not os.path.isabs(entry):
            back[_norm(os.path.join(CHILD_CWD, entry))] = os.path.normpath(os.path.join(here, entry))
    return info, [back.get(_norm(p), p) for p in path]


def _norm(p: str) -> str:
    # the interpreter spells a relative entry resolved in `/` as "//src" (normpath keeps that)
    p = os.path.normpath(p)
    return "/" + p.lstrip("/") if p.startswith("//") else p


def current_python() -> Tuple[PythonInfo, List[str]]:
    import sysconfig

    from cudafix.model.snapshot import PythonInfo

    info = PythonInfo(executable=sys.executable or "", version=_python_version(), prefix=sys.prefix,
                      platform=sysconfig.get_platform())
    return info, list(sys.path)


def _python_version() -> str:
    """platform.python_version() without importing platform (its cost: docs/benchmarks.md):
    CPython's sys.version starts with the version word platform's parser takes, and platform adds
    a patch level of 0 to a bare X.Y.  Anything else is platform's to parse."""
    word = sys.version.split(None, 1)[0] if sys.version.strip() else ""
    plain = word and all(c.isascii() and (c.isalnum() or c in "._+") for c in word)
    if not plain or not word.startswith("%d.%d" % sys.version_info[:2]) or sys.implementation.name != "cpython" \
            or "PyPy" in sys.version or "(" not in sys.version or "[" not in sys.version:
        import platform

        return platform.python_version()
    parts = word.split(".")
    return ".".join(parts + ["0"] if len(parts) == 2 else parts)


def _now() -> str:
    """The time in UTC to the second, as datetime's isoformat() gives it ("2026-12-01T21:23:29+00:00")."""
    import time

    return time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime())


def _guard(snap: Snapshot, name: str, fn: Callable[[], Any]) -> Any:
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


def take_snapshot(python: Optional[str] = None, env: Optional[Mapping[str, str]] = None,
                  cache_dir: Optional[str] = None, *, root: Optional[str] = None, usr_local: Optional[str] = None,
                  use_nvml: bool = True, call_driver_api: bool = True, scan_arch: bool = True,
                  scan_extensions: bool = True, ahead: Any = None) -> Snapshot:
    """Probe this machine and one Python environment (the current one, or ``python``).

    ``root`` / ``usr_local`` move /sys, /proc, /dev, /etc, /usr/local and what the loader reads,
    for tests (default: store.paths.probe_root(env); docs/wsl.md "One root"); the flags switch
    the heavier probes off.  ``ahead`` (probes/ahead.py, the CLI's): probes already running in
    children, each used where it was started for this snapshot's inputs, else run here."""
    from cudafix import __version__
    from cudafix.model.snapshot import Snapshot
    from cudafix.probes.machine import machine
    from cudafix.probes.pyenv import environment
    from cudafix.store.paths import probe_root

    env = dict(os.environ if env is None else env)
    root = probe_root(env) if root is None else root
    usr_local = os.path.join(root, "usr/local") if usr_local is None else usr_local
    use_nvml = use_nvml and root == "/"  # a laid-out tree has no live NVML (its libcuda is the tree's own file)
    snap = Snapshot(created=_now(), cudafix_version=__version__, source="probed")
    sys_path = _probe_python(snap, python, env)
    prefix = snap.python.prefix or None
    keep = kept_dirs(prefix, root)  # under a probe root, the env's own dirs are still read where they are
    snap.env = _guard(snap, "env", lambda: environment.collect_env(env)) or {}

    # the host, the node, the driver, the hardware, WSL, the JIT cache (cudafix/probes/machine/machine.py)
    machine_key = machine.key(env, root, use_nvml, call_driver_api, keep, cache_dir)
    machine_job = ahead.machine(machine_key) if ahead is not None else None
    if machine_job is None:
        machine.apply(snap, machine.run(*machine_key))
    gpus_job = ahead.gpus(env, root, use_nvml) if ahead is not None else None
    if gpus_job is None:
        _probe_gpus(snap, env, root, use_nvml)
    _probe_python_env(snap, env, sys_path, prefix, usr_local, cache_dir, scan_arch)
    _guard(snap, "libraries", lambda: _probe_libraries(snap, env, sys_path, cache_dir, root, keep))
    _guard(snap, "torch_import", lambda: _probe_torch_import(snap, env, sys_path, cache_dir, root, keep))
    ext_job = ahead.extensions() if ahead is not None else None
    ext_kwargs = None
    if scan_arch and scan_extensions and sys_path is not None:
        ext_kwargs = extension_kwargs(sys_path, env, prefix, bool(snap.python.conda_prefix), snap.primary_torch,
                                      snap.python.version, cache_dir, root, keep)
        if ext_job is None:
            _guard(snap, "extensions", lambda: _probe_extensions(snap, ext_kwargs))
    elif ext_job is not None:
        ext_job.drop()
        ext_job = None
    if machine_job is not None:  # before the Windows probe, which adds to the driver's facts
        got = machine_job.take()
        machine.apply(snap, got[1] if got is not None and got[0] else machine.run(*machine_key))
    if (snap.python.platform or "").startswith("win"):  # native Windows: the DLL side of import torch
        _probe_windows(snap, env, sys_path)
    # What ran ahead, last: the children had the parent's whole run to finish in.
    _take_ahead(snap, gpus_job, lambda: _probe_gpus(snap, env, root, use_nvml), "gpus", lambda v: setattr(snap, "gpus", v))
    _take_ahead(snap, ext_job, lambda: _guard(snap, "extensions", lambda: _probe_extensions(snap, ext_kwargs)), "extensions",
                lambda v: setattr(snap, "extensions", v[1]), lambda v: v[0] == ext_kwargs)
    if ahead is not None:
        ahead.close()
    snap.probe_errors = _in_probe_order(snap.probe_errors)
    return snap


def _probe_python(snap: Snapshot, python: Optional[str], env: Mapping[str, str]) -> Optional[List[str]]:
    """The target interpreter into ``snap.python``; its sys.path (None: it could not be asked)."""
    got: List[List[str]] = []

    def run() -> None:
        info, sys_path = current_python() if python is None else query_python(python, env)
        if info.prefix and os.path.isdir(os.path.join(info.prefix, "conda-meta")):
            info.conda_prefix = info.prefix
        snap.python = info
        got.append(sys_path)

    _guard(snap, "python", run)
    if python is not None and "python" in snap.probe_errors:
        snap.python.executable = python
    return got[0] if got else None


def _probe_gpus(snap: Snapshot, env: Mapping[str, str], root: str, use_nvml: bool) -> None:
    from cudafix.probes.machine import gpus

    g = _guard(snap, "gpus", lambda: gpus.probe_gpus(env, root=root, use_nvml=use_nvml))
    if g is not None:
        snap.gpus = g


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


def _probe_libraries(snap: Snapshot, env: Mapping[str, str], sys_path: Optional[List[str]], cache_dir: Optional[str],
                     root: str, keep: Tuple[str, ...]) -> None:
    from cudafix.probes.loader.libraries import probe_libraries  # type: ignore  # the loader-simulation module

    primary = snap.primary_torch
    snap.libraries = probe_libraries(primary.package_dir if primary else None, env, cache_dir=cache_dir, root=root, keep=keep,
                                     sys_path=sys_path)


def _probe_torch_import(snap: Snapshot, env: Mapping[str, str], sys_path: Optional[List[str]], cache_dir: Optional[str],
                        root: str, keep: Tuple[str, ...]) -> None:
    """`import torch` simulated (cudafix/probes/loader/torchload.py); not on Windows, where torch's DLL
    loading is cudafix/probes/loader/windows.py's, nor without the target's sys.path."""
    from cudafix.probes.loader.torchload import probe_torch_import

    if sys_path is None or (snap.python.platform or "linux").startswith("win"):
        return
    primary = snap.primary_torch
    snap.torch_import = probe_torch_import(primary.package_dir if primary else None, sys_path, env,
                                           python_version=snap.python.version or "",
                                           executable=snap.python.executable, cache_dir=cache_dir, root=root, keep=keep)


def _probe_extensions(snap: Snapshot, kwargs: Dict[str, Any]) -> None:
    from cudafix.probes.pyenv.extensions import probe_extensions

    snap.extensions = probe_extensions(**kwargs)


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


def _take_ahead(snap: Snapshot, job: Any, here: Callable[[], Any], name: str, use: Callable[[Any], None],
                fits: Callable[[Any], bool] = lambda value: True) -> None:
    """A probe's answer from its child: used where it ``fits`` this snapshot's inputs; its
    error recorded as the serial run records it; without an answer, the probe runs ``here``."""
    if job is None:
        return
    got = job.take()
    if got is not None and got[0] and fits(got[1]):
        use(got[1])
    elif got is not None and not got[0]:
        snap.probe_errors[name] = got[1]
    else:  # no answer, or one for other inputs than this snapshot's
        here()


# The order take_snapshot runs its probes in without a head start: probe_errors keeps it.
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


def extension_kwargs(sys_path: List[str], env: Mapping[str, str], prefix: Optional[str], conda: bool,
                     primary: Optional[TorchBuild], python_version: str, cache_dir: Optional[str], root: str,
                     keep: Tuple[str, ...]) -> Dict[str, Any]:
    """The arguments of the extension scan (probe_extensions) for an env and its primary torch."""
    from cudafix.probes.pyenv.extensions import extension_tag

    tag = extension_tag(python_version, primary.cuda, primary.hip) if primary else None
    return {"sys_path": list(sys_path), "env": dict(env), "prefix": prefix, "conda": conda,
            "torch_dir": primary.package_dir if primary else None, "cache_dir": cache_dir, "tag": tag,
            "root": root, "keep": tuple(keep)}


__all__ = ["take_snapshot", "query_python", "parse_python_query", "ProbeError"]
