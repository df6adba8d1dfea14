"""The probes that read the machine alone: the host, the node, the driver, the PCI hardware, WSL
and the JIT cache.  None of them needs what another probe found, only the inputs of
:func:`run`; so ``take_snapshot`` (cudafix/probes/__init__.py) runs them as one step, and the
CLI's `status` runs that step in a child of its own (cudafix/probes/ahead.py) beside the child
that probes the Python environment.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Dict, List, Mapping, Tuple

    from cudafix.model.snapshot import Snapshot

# In the order they run (and take_snapshot's PROBE_ORDER keeps their errors in).
NAMES = ("host", "node", "driver", "hardware", "wsl", "jit_cache")


def key(env: Mapping[str, str], root: str, use_nvml: bool, call_driver_api: bool, keep: Tuple[str, ...],
        cache_dir: Any) -> Tuple[Any, ...]:
    """Every input of :func:`run`: a result is used only for the inputs it was taken with."""
    return (dict(env), root, use_nvml, call_driver_api, tuple(keep), cache_dir)


def run(env: Mapping[str, str], root: str, use_nvml: bool, call_driver_api: bool, keep: Tuple[str, ...],
        cache_dir: Any) -> Dict[str, Tuple[bool, Any]]:
    """``{name: (True, value) | (False, "Type: message")}`` for each of NAMES: an exception in one
    probe is its error, as take_snapshot's ``_guard`` records it, and the others still run."""
    from cudafix.probes.machine import driver, host, node, pci
    from cudafix.probes.machine.wsl import probe_wsl
    from cudafix.probes.pyenv import environment

    env = dict(env)
    calls: List[Tuple[str, Callable[[], Any]]] = [
        ("host", host.probe_host),
        ("node", lambda: node.probe_node(env, root=root)),
        ("driver", lambda: driver.probe_driver(env, root=root, call_driver_api=call_driver_api, keep=keep,
                                               cache_dir=cache_dir)),
        ("hardware", lambda: pci.probe_hardware(root=root)),
        ("wsl", lambda: probe_wsl(env, root=root, use_nvml=use_nvml)),
        ("jit_cache", lambda: environment.probe_jit_cache(env, root=root, keep=keep)),
    ]
    out: Dict[str, Tuple[bool, Any]] = {}
    for name, call in calls:
        try:
            out[name] = (True, call())
        except Exception as exc:
            out[name] = (False, "%s: %s" % (type(exc).__name__, exc))
    return out


def apply(snap: Snapshot, results: Dict[str, Tuple[bool, Any]]) -> None:
    """Put :func:`run`'s results into ``snap`` the way take_snapshot always has: a probe that
    failed leaves its default (``host``: {}, ``hardware``: None) and names its error."""
    for name in NAMES:
        ok, value = results[name]
        if not ok:
            snap.probe_errors[name] = value
            value = None
        if name == "host":
            snap.host = value or {}
        elif name == "hardware":
            snap.hardware = value
        elif value is not None:
            setattr(snap, name, value)
