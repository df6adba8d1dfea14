"""NVML's side of the GPU probe (cudafix/probes/machine/gpus.py): whether a driver is there to ask, pynvml's
import, and NVML's start and end.

Light on purpose (os and cudafix.probes.machine.host only): `status` asks :func:`nvidia_driver_present` before it forks the GPU
probe (cudafix/probes/ahead.py), and whatever is imported first delays that fork.

NVML is started on a second thread while this one imports pynvml (:func:`begin`): importing
pynvml is Python's work and nvmlInit plus the first device handle the driver's, of a similar size
on the H200 image (docs/benchmarks.md, "Figures behind the code"), and ctypes lets the GIL go for
a foreign call.  The thread only starts NVML and
attaches its devices (nvmlInit_v2 is lazy: "GPUs are discovered and initialized in
nvmlDeviceGetHandleBy* functions"); every fact the probe reports still comes from pynvml's own
calls, which find NVML started.  This is sound because NVML counts its initializations and
shuts down "only ... when the reference count reaches zero", and "is thread-safe so it is safe
to make simultaneous NVML calls from multiple threads" (NVML API reference: Initialization and
Cleanup, https://docs.nvidia.com/deploy/nvml-api/group__nvmlInitializationAndCleanup.html, and
Thread-safety, https://docs.nvidia.com/deploy/nvml-api/nvml-api-reference.html).  Where the
thread fails (no library, no permission, a bad GPU), pynvml's own call meets the same failure
and reports it, as without the thread.
"""

from __future__ import annotations

import os

from cudafix.probes.machine.host import join_root

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Dict, Optional

# Where an NVIDIA GPU driver shows itself without loading anything: the kernel module (also the
# open one) in sysfs / procfs, Jetson's nvgpu, and WSL2 (no nvidia module: the host driver is
# reached through /dev/dxg, its user-space libraries live in /usr/lib/wsl/lib).
DRIVER_MARKERS = ("/sys/module/nvidia", "/proc/driver/nvidia", "/sys/module/nvgpu", "/dev/dxg", "/usr/lib/wsl/lib")

# The name pynvml loads NVML by on Linux (pynvml._LoadNvmlLibrary): the same name is the same
# loaded library, so the thread's start is the one pynvml finds.
LIBRARY = "libnvidia-ml.so.1"
NVML_SUCCESS = 0


def nvidia_driver_present(root: str = "/") -> Optional[str]:
    """The first DRIVER_MARKERS path that exists (``None``: no NVIDIA driver on this machine)."""
    for marker in DRIVER_MARKERS:
        if os.path.exists(join_root(root, marker)):
            return marker
    return None


PYCACHE = "pycache"  # under the per-user cache dir (cudafix.store.paths.user_cache_dir)


def import_pynvml(env: Optional[Dict[str, str]] = None):  # type: ignore[no-untyped-def]
    """``import pynvml``; where the env keeps no bytecode of it and Python writes none
    (PYTHONDONTWRITEBYTECODE, as in the H200 image: compiled again on every `status`), its
    bytecode goes to and comes from cudafix's private per-user cache (``sys.pycache_prefix``
    there, for this one import).  Python itself checks that bytecode against the source's mtime
    and size; a cache directory another user could write (cudafix.store.safefs) is not used."""
    import sys

    if "pynvml" in sys.modules or not sys.dont_write_bytecode or sys.pycache_prefix:
        import pynvml  # type: ignore

        return pynvml
    from importlib.machinery import PathFinder
    from importlib.util import cache_from_source

    spec = PathFinder.find_spec("pynvml")
    origin = getattr(spec, "origin", None) or ""
    prefix = None
    if origin.endswith(".py") and os.path.isabs(origin) and not os.path.exists(cache_from_source(origin)):
        from cudafix.store import paths, safefs

        d = os.path.join(paths.user_cache_dir(env), PYCACHE)
        fd = safefs.open_dir(d, create=True)
        if fd is not None:
            os.close(fd)
            prefix = d
    if prefix is None:
        import pynvml  # type: ignore

        return pynvml
    sys.dont_write_bytecode, sys.pycache_prefix = False, prefix
    try:
        import pynvml  # type: ignore
    finally:
        sys.dont_write_bytecode, sys.pycache_prefix = True, None
    return pynvml


class _Start:
    """nvmlInit_v2 and a handle per device, on a thread of their own (see the module's text)."""

    def __init__(self) -> None:
        import _thread
        import ctypes  # here, not on the thread: pynvml imports it too

        self._ctypes = ctypes
        self._lib: Any = None  # set once nvmlInit_v2 succeeded there: one nvmlShutdown is ours
        self._done = _thread.allocate_lock()
        self._done.acquire()
        try:
            _thread.start_new_thread(self._run, ())
        except Exception:  # no thread to be had: pynvml starts NVML itself
            self._done.release()

    def _run(self) -> None:
        try:
            ctypes = self._ctypes
            from cudafix.store import trustload

            # the trusted loader: a copy on LD_LIBRARY_PATH only if root or we own it
            lib, why = trustload.load_soname(LIBRARY, os.environ.get("LD_LIBRARY_PATH"))
            if lib is None:
                raise OSError(why)
            if lib.nvmlInit_v2() == NVML_SUCCESS:
                self._lib = lib
                count, handle = ctypes.c_uint(0), ctypes.c_void_p()
                if lib.nvmlDeviceGetCount_v2(ctypes.byref(count)) == NVML_SUCCESS:
                    for i in range(min(count.value, 64)):
                        lib.nvmlDeviceGetHandleByIndex_v2(i, ctypes.byref(handle))
        except Exception:
            pass
        finally:
            self._done.release()

    def end(self) -> None:
        """Wait for the thread (it has finished wherever pynvml's own calls have: NVML serves them
        after it) and undo its nvmlInit_v2: no thread is left inside NVML at exit."""
        self._done.acquire()
        lib, self._lib = self._lib, None
        if lib is not None:
            try:
                lib.nvmlShutdown()
            except Exception:
                pass


_STARTED: Optional[_Start] = None


def begin() -> None:
    """Start NVML on a second thread (once; :func:`shutdown` ends it).  Only where a driver is
    present: without one, nvmlInit can only fail."""
    global _STARTED
    if _STARTED is None:
        _STARTED = _Start()


def shutdown() -> None:
    """nvmlShutdown for pynvml's nvmlInit (it counts them), where pynvml was imported, and for the
    thread's (:func:`begin`)."""
    import sys

    global _STARTED
    pynvml = sys.modules.get("pynvml")
    if pynvml is not None:
        try:
            pynvml.nvmlShutdown()
        except Exception:
            pass
    started, _STARTED = _STARTED, None
    if started is not None:
        started.end()
