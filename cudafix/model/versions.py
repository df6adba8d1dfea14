"""Version strings, parsed one way everywhere: PEP 440 through `packaging.version`.

torch ("2.14.1+cu130"), CUDA ("12.1.105"), driver ("580.95.05") and library versions all have a
dotted numeric release; what cudafix compares is that release.  A string that is not PEP 440 as a
whole (nvcc's "13.0.r13.0", "12.4 update 1") is read up to the end of its leading dotted number,
which is then parsed the same way.  `packaging` is imported on first use: the startup hook's warm
path never parses versions.
"""

from __future__ import annotations

import re

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Optional, Tuple

from cudafix.model.lazyre import lazy_re

_LEADING = lazy_re(r"^\s*v?(\d+(?:\.\d+)*)")
# A release with at most a local part ("12.1.105", "2.14.1+cu130"): packaging's own grammar for
# those two pieces (packaging/version.py VERSION_PATTERN, ASCII digits), so its release tuple is
# the dotted numbers as ints, read here without importing packaging (its cost: docs/benchmarks.md).
_PLAIN = re.compile(r"([0-9]+(?:\.[0-9]+)*)(?:\+[a-z0-9]+(?:[-_.][a-z0-9]+)*)?", re.IGNORECASE | re.ASCII)


def parse(text: Optional[str]):  # -> Optional[packaging.version.Version]
    """The PEP 440 version in ``text`` (or its leading dotted number); None for junk."""
    from packaging.version import InvalidVersion, Version

    s = str(text or "").strip()
    if not s:
        return None
    try:
        return Version(s)
    except InvalidVersion:
        m = _LEADING.match(s)
        return Version(m.group(1)) if m else None


def release(text: Optional[str]) -> Tuple[int, ...]:
    """"12.1.105" -> (12, 1, 105); "2.4.1+cu121" -> (2, 4, 1); junk -> ()."""
    m = _PLAIN.fullmatch(str(text or "").strip())
    if m:
        return tuple(int(p) for p in m.group(1).split("."))
    v = parse(text)
    return tuple(v.release) if v is not None else ()


def major_minor(text: Optional[str]) -> Optional[Tuple[int, int]]:
    """"12.4.1" -> (12, 4); "13" -> (13, 0); junk -> None."""
    t = release(text)
    return (t + (0,))[:2] if t else None  # type: ignore[return-value]


def local(text: Optional[str]) -> Optional[str]:
    """The local part: "2.14.1+cu130" -> "cu130"; None when there is none."""
    v = parse(text)
    return v.local if v is not None else None


def public(text: Optional[str]) -> str:
    """"2.14.1+cu130" -> "2.14.1" (the text before "+", unchanged otherwise)."""
    return str(text or "").split("+", 1)[0].strip()
