"""``lazy_re(pattern, flags)``: ``re.compile(pattern, flags)``, compiled on first use.

cudafix's modules compiled ~35 regular expressions at import and a `cudafix status` on a
healthy machine uses a handful (the cost: docs/benchmarks.md, "Figures behind the code").  The
object answers every attribute of the compiled pattern (``match``, ``search``, ``sub``,
``finditer``, ``pattern`` ...) by compiling it then; it is not a ``re.Pattern``, so it is
never passed to the ``re`` module's functions.
"""

from __future__ import annotations

import re

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


class LazyPattern:
    """A regular expression compiled the first time one of its attributes is read."""

    __slots__ = ("_args", "_compiled")

    def __init__(self, pattern: Any, flags: int = 0) -> None:
        self._args = (pattern, flags)
        self._compiled = None  # type: Any

    def __getattr__(self, name: str) -> Any:  # only names the slots do not hold
        rx = self._compiled
        if rx is None:
            rx = self._compiled = re.compile(*self._args)
        return getattr(rx, name)

    def __repr__(self) -> str:
        return "lazy_re(%r, %r)" % self._args


def lazy_re(pattern: Any, flags: int = 0) -> LazyPattern:
    return LazyPattern(pattern, flags)
