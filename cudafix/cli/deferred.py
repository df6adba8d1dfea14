"""``inspect`` loaded where it is first used, in the process of `cudafix status` / `check` only.

``dataclasses`` imports ``inspect`` at its top, and ``inspect`` imports ``ast``, ``dis``,
``tokenize`` and ``linecache``: a tenth of a warm `cudafix status` on Python 3.11 (docs/benchmarks.md,
"Issue 23, 2026-12-02").  On Python 3.8-3.11 dataclasses uses
``inspect`` only to write a docstring for a class that has none (``inspect.signature``);
cudafix's classes have one (cudafix/model/record.py needs it), so a `status` never uses it.
From 3.12 dataclasses reads every class's annotations through ``inspect.get_annotations``:
there nothing would be spared, and nothing is done.

While the command runs, ``sys.modules["inspect"]`` is a stand-in: the first attribute anyone
reads of it imports the real module (into ``sys.modules``) and answers from it, then and after.
Its ``__spec__`` is None, which is what the import system reads of a module it finds in
``sys.modules`` (not a use).  After the command the stand-in leaves ``sys.modules`` if it is
still there; a module that imported it meanwhile (dataclasses) keeps a forwarding reference.
"""

from __future__ import annotations

import sys
import types

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Optional


class _Deferred(types.ModuleType):
    """``inspect`` until something reads one of its attributes (``__spec__`` is its own: None)."""

    def __getattr__(self, name: str) -> Any:
        return getattr(_real(self), name)


def _real(stand_in: types.ModuleType) -> types.ModuleType:
    if sys.modules.get("inspect") is stand_in:
        del sys.modules["inspect"]
    import importlib

    return importlib.import_module("inspect")


def defer_inspect() -> Optional[types.ModuleType]:
    """Put the stand-in in place and return it, or None where that spares nothing (3.12+) or
    is too late (inspect, or dataclasses which binds it, already imported)."""
    if sys.version_info >= (3, 12) or "inspect" in sys.modules or "dataclasses" in sys.modules:
        return None
    stand_in = _Deferred("inspect")
    stand_in.__spec__ = None
    sys.modules["inspect"] = stand_in
    return stand_in


def restore(stand_in: Optional[types.ModuleType]) -> None:
    """The stand-in out of ``sys.modules`` (a later ``import inspect`` imports the real one)."""
    if stand_in is not None and sys.modules.get("inspect") is stand_in:
        del sys.modules["inspect"]
