"""The driver's PTX JIT cache: CUDA_CACHE_MAXSIZE's bounds, one copy for probes and rules.

NVIDIA, "CUDA Environment Variables"
(https://docs.nvidia.com/cuda/cuda-programming-guide/05-appendices/environment-variables.html):
the maximum is 4294967296 (4 GiB) in every edition.  The default is 268435456 (256 MiB) in the
older Programming Guide table and 1073741824 (1 GiB) on desktop/server (256 MiB on embedded) in the
current page; which driver release changed it is not stated (searched for this project, 2026-12-01:
the current and older Programming Guide tables, the CUDA release notes; no edition names it), so
the default's size is unknown for every driver: an unset value is judged against both bounds,
the probe records no size for it (never an assumed one), and status says so.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Optional, Tuple

ENV_DOC = "https://docs.nvidia.com/cuda/cuda-programming-guide/05-appendices/environment-variables.html"
MAX_BYTES = 4294967296
DEFAULT_OLDER_DOCS_BYTES = 268435456
DEFAULT_CURRENT_DOCS_BYTES = 1073741824

DEFAULT_UNKNOWN_NOTE = ("driver default, size unknown: 1 GiB per NVIDIA's current docs (desktop/server), 256 MiB per older "
                        "ones; no NVIDIA document names the driver release that changed it")


def default_bytes(driver_version: Optional[str]) -> Tuple[Optional[int], str]:
    """The driver's default CUDA_CACHE_MAXSIZE for ``driver_version``, or (None, why unknown).
    No cited boundary exists (module docstring), so every driver answers unknown."""
    return None, DEFAULT_UNKNOWN_NOTE
