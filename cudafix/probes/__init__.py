"""Probes: read the machine and a Python environment into a Snapshot (no torch import, no cuInit).

``take_snapshot()`` is the one entry point.  Each probe runs guarded: an exception in one
becomes ``snapshot.probe_errors[name] = "Type: message"`` and the rest still fills.  The probes
live in four sections (machine/, pyenv/, loader/, binfmt/: docs/architecture.md); what one
snapshot runs, in which order and where, is cudafix/probes/sections.py's, and the children the
CLI starts for it cudafix/probes/ahead.py's.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Mapping, Optional

    from cudafix.model.snapshot import Snapshot

# Imports nothing of cudafix at its top: `status` imports this package (for cudafix.probes.ahead)
# before it forks, and whatever is imported first delays the fork.
from cudafix.probes.sections import extension_kwargs, kept_dirs, now as _now  # noqa: E402

# The target interpreter's query (cudafix/probes/pyenv/interpreter.py), named here as it always
# was and imported on first use: the CLI's fork does not wait for it.
_INTERPRETER = ("PYTHON_QUERY_TIMEOUT_S", "ProbeError", "current_python", "parse_python_query", "query_python")


def __getattr__(name: str) -> Any:
    if name in _INTERPRETER:
        from cudafix.probes.pyenv import interpreter

        return getattr(interpreter, name)
    raise AttributeError("module %r has no attribute %r" % (__name__, name))


def take_snapshot(python: Optional[str] = None, env: Optional[Mapping[str, str]] = None,
                  cache_dir: Optional[str] = None, *, root: Optional[str] = None, usr_local: Optional[str] = None,
                  use_nvml: bool = True, call_driver_api: bool = True, scan_arch: bool = True,
                  scan_extensions: bool = True, started: Any = None) -> Snapshot:
    """Probe this machine and one Python environment (the current one, or ``python``).

    ``root`` / ``usr_local`` move /sys, /proc, /dev, /etc, /usr/local and what the loader reads,
    for tests (default: store.paths.probe_root(env); docs/wsl.md "One root"); the flags switch
    the heavier probes off.  ``started`` (cudafix.probes.ahead.start): sections already running in
    children for the same request, each taken from there, else run here."""
    from cudafix.probes import sections

    req = sections.request(python, env, cache_dir, root, usr_local, use_nvml, call_driver_api, scan_arch, scan_extensions)
    return sections.assemble(req, started)


__all__ = ["take_snapshot", "query_python", "parse_python_query", "current_python", "ProbeError", "kept_dirs",
           "extension_kwargs", "PYTHON_QUERY_TIMEOUT_S", "_now"]
