"""CUDA's small facts, written once: the version integer and the wheel tags.

The integer is CUDA's own encoding, 1000 * major + 10 * minor (cuda.h's CUDA_VERSION,
cuDriverGetVersion / cudaRuntimeGetVersion, torchvision's ``cuda``:
https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__VERSION.html).  The tag is the local
version label PyTorch's wheels carry for a CUDA variant ("cu121" for CUDA 12.1, "cpu" for none:
https://pytorch.org/get-started/previous-versions/).
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Optional, Tuple


def version_text(v: int) -> str:
    """13000 -> "13.0"; ValueError for a number that is not a CUDA version."""
    v = int(v)
    if v < 1000:
        raise ValueError("not a CUDA version number: %r" % v)
    return "%d.%d" % (v // 1000, (v % 1000) // 10)


def version_int(version: str) -> int:
    """"12.1" / "12.1.1" -> 12010 (the inverse of :func:`version_text`); ValueError for junk."""
    from cudafix.model.versions import release

    t = release(version)
    if not t:
        raise ValueError("not a CUDA version: %r" % version)
    return t[0] * 1000 + (t[1] if len(t) > 1 else 0) * 10


def version_text_or_none(v: Optional[int]) -> Optional[str]:
    """The same, None for None or a number below 1000 (no CUDA)."""
    if v is None or int(v) < 1000:
        return None
    return version_text(v)


def major_minor(v: int) -> Tuple[int, int]:
    """12040 -> (12, 4)."""
    v = int(v)
    return v // 1000, (v % 1000) // 10


def major(v: int) -> int:
    """12040 -> 12."""
    return int(v) // 1000


def tag(cuda: Optional[str]) -> str:
    """A CUDA version's wheel tag: "12.1" -> "cu121", "13.0" -> "cu130"; None or "" -> "cpu"."""
    return "cu" + cuda.replace(".", "") if cuda else "cpu"


def tag_of(mm: Tuple[int, int]) -> str:
    """(12, 1) -> "cu121"."""
    return "cu%d%d" % (mm[0], mm[1])
