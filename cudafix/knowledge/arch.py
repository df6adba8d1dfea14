"""Binary compatibility of CUDA device code, as functions (https://docs.nvidia.com/cuda/cuda-programming-guide/01-introduction/cuda-platform.html).

- SASS (cubin) ``sm_XY`` runs on a GPU of compute capability X.Z with Z >= Y: same major only.
- ``sm_XYa`` (arch-specific, e.g. sm_90a, sm_100a) runs only on exactly CC X.Y
  (https://developer.nvidia.com/blog/nvidia-blackwell-and-nvidia-cuda-12-9-introduce-family-specific-architecture-features).
- ``sm_XYf`` (family-specific, CUDA 12.9+) runs on the same major (family) with minor >= Y.
  The family rule is NVIDIA's definition (the blog post above); it does not
  give a per-family table, so treat 'f' results as **unconfirmed** beyond the same-major rule.
- PTX ``compute_XY`` is JIT-compiled by the driver for any GPU with CC >= X.Y (slow first start,
  cached in CUDA_CACHE_PATH); ``compute_XYa`` only for exactly X.Y.

Arch numbers: ``sm_XY`` -> X = n // 10, Y = n % 10 (sm_90 -> 9.0, sm_120 -> 12.0, sm_121 -> 12.1).
"""

from __future__ import annotations

import collections
import re

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import List, NamedTuple, Optional, Sequence, Tuple

from cudafix.model.record import record
from cudafix.model.lazyre import lazy_re

SOURCE = "https://docs.nvidia.com/cuda/cuda-programming-guide/01-introduction/cuda-platform.html (binary and PTX compatibility); https://developer.nvidia.com/blog/nvidia-blackwell-and-nvidia-cuda-12-9-introduce-family-specific-architecture-features"

_ARCH_RE = lazy_re(r"^\s*(sm|compute|lto)_(\d{2,3})([af]?)\s*$", re.IGNORECASE)


@record(frozen=True)
class Arch:
    """A parsed fatbin target: sm_XY / compute_XY with its a/f variant."""

    kind: str  # "sass" | "ptx"
    major: int
    minor: int
    variant: str = ""  # "" | "a" (arch-specific) | "f" (family-specific)

    @property
    def number(self) -> int:
        return self.major * 10 + self.minor

    @property
    def cc(self) -> str:
        return "%d.%d" % (self.major, self.minor)

    def __str__(self) -> str:
        return "%s_%d%s" % ("sm" if self.kind == "sass" else "compute", self.number, self.variant)


def parse_arch(s: str) -> Arch:
    """"sm_90" / "sm_90a" / "sm_100f" / "compute_37" -> :class:`Arch`; ValueError otherwise."""
    m = _ARCH_RE.match(str(s))
    if not m:
        raise ValueError("not a CUDA arch name: %r (expected sm_XY or compute_XY)" % (s,))
    prefix, digits, variant = m.group(1).lower(), int(m.group(2)), m.group(3).lower()
    kind = "ptx" if prefix == "compute" else "sass"
    return Arch(kind, digits // 10, digits % 10, variant)


def parse_cc(cc: str) -> Tuple[int, int]:
    """"9.0" -> (9, 0); also accepts "sm_90" / "90"."""
    text = str(cc).strip()
    m = re.match(r"^(\d{1,2})\.(\d)$", text)
    if m:
        return int(m.group(1)), int(m.group(2))
    m = re.match(r"^(?:sm_)?(\d{2,3})$", text, re.IGNORECASE)
    if m:
        n = int(m.group(1))
        return n // 10, n % 10
    raise ValueError("not a compute capability: %r (expected X.Y)" % (cc,))


def cc_to_sm(cc: str) -> str:
    major, minor = parse_cc(cc)
    return "sm_%d%d" % (major, minor)


def sass_runs_on(sass: str, cc: str) -> bool:
    """Whether SASS ``sass`` (sm_XY[a|f]) runs on a GPU of compute capability ``cc``."""
    a = parse_arch(sass)
    major, minor = parse_cc(cc)
    if a.kind != "sass":
        raise ValueError("%s is PTX, not SASS" % sass)
    if a.major != major:
        return False
    if a.variant == "a":
        return a.minor == minor
    return a.minor <= minor  # plain and family-specific: same major, GPU minor >= code minor


def ptx_runs_on(ptx: str, cc: str) -> bool:
    """Whether PTX ``compute_XY`` can be JIT-compiled for a GPU of ``cc`` (CC >= X.Y)."""
    a = parse_arch(ptx)
    major, minor = parse_cc(cc)
    if a.kind != "ptx":
        raise ValueError("%s is SASS, not PTX" % ptx)
    if a.variant == "a":
        return (a.major, a.minor) == (major, minor)
    if a.variant == "f":
        return a.major == major and a.minor <= minor
    return (a.major, a.minor) <= (major, minor)


if TYPE_CHECKING:
    class Fit(NamedTuple):
        kind: str  # "sass" | "ptx" | "none"
        entry: Optional[str]  # the sm_/compute_ entry used (the best one), None for "none"
else:  # the same tuple without importing typing at run time (issue 23)
    Fit = collections.namedtuple("Fit", ("kind", "entry"))


def fit(sass: Sequence[str], ptx: Sequence[str], cc: str) -> Fit:
    """How a GPU of ``cc`` runs code built for ``sass`` + ``ptx``: best SASS, else best PTX, else none.

    Best = the highest compatible arch (closest to the GPU).  Returns ``Fit(kind, entry)``.
    """
    best_sass: Optional[Arch] = None
    for s in sass:
        a = parse_arch(s)
        if a.kind == "sass" and sass_runs_on(s, cc):
            if best_sass is None or (a.number, a.variant != "") > (best_sass.number, best_sass.variant != ""):
                best_sass = a
    if best_sass is not None:
        return Fit("sass", str(best_sass))
    best_ptx: Optional[Arch] = None
    for p in ptx:
        a = parse_arch(p)
        if a.kind == "ptx" and ptx_runs_on(p, cc):
            if best_ptx is None or a.number > best_ptx.number:
                best_ptx = a
    if best_ptx is not None:
        return Fit("ptx", str(best_ptx))
    return Fit("none", None)


def parse_arch_list(text: str) -> Tuple[List[str], List[str]]:
    """A TORCH_CUDA_ARCH_LIST string -> (sass, ptx).

    "3.7+PTX;5.0;6.0" -> (["sm_37", "sm_50", "sm_60"], ["compute_37"]).  Separators ';' or ' ';
    "X.Y+PTX" embeds SASS sm_XY *and* PTX compute_XY; "9.0a" -> sm_90a.
    """
    sass: List[str] = []
    ptx: List[str] = []
    for item in re.split(r"[;\s]+", text.strip()):
        if not item:
            continue
        m = re.match(r"^(\d{1,2})\.(\d)([af]?)(\+PTX)?$", item, re.IGNORECASE)
        if not m:
            raise ValueError("bad TORCH_CUDA_ARCH_LIST entry %r in %r" % (item, text))
        num = "%d%d%s" % (int(m.group(1)), int(m.group(2)), m.group(3).lower())
        if "sm_" + num not in sass:
            sass.append("sm_" + num)
        if m.group(4) and "compute_" + num not in ptx:
            ptx.append("compute_" + num)
    return sass, ptx
