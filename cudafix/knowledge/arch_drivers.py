"""Which driver branches can drive a GPU architecture at all (a fact of the GPU, not of torch).

A driver older than the first branch that knows an architecture does not drive its GPUs (no
CUDA device at all, whatever torch is installed); NVIDIA also ends support for old
architectures after a last branch.  Sources, quoted per row:

- MATRIX: NVIDIA Data Center Drivers, "CUDA Toolkit, Driver, and Architecture Matrix"
  (architecture, compute capability, first CUDA toolkit support, last driver support):
  https://docs.nvidia.com/datacenter/tesla/drivers/cuda-toolkit-driver-and-architecture-matrix.html
- RN: CUDA Toolkit Release Notes, "CUDA Toolkit and Corresponding Driver Versions" (the minimum
  Linux driver of each toolkit release): https://docs.nvidia.com/cuda/cuda-toolkit-release-notes/index.html
  The first branch that drives an architecture is the branch of the minimum driver of the first
  toolkit that supports it (status DERIVED: MATRIX row + RN row).
- AIE23: NVIDIA AI Enterprise 2.3 release notes, "Support for the NVIDIA H100 GPU" with the
  bare-metal driver 520.61.05: https://docs.nvidia.com/ai-enterprise/2.3/release-notes/index.html

Compute capabilities that are not in a row (sm_62, sm_72, sm_87, sm_103, sm_110, sm_121, ...)
have no answer here: the rule says unknown for them.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Optional, Tuple

from cudafix.knowledge import DERIVED, PRIMARY
from cudafix.model.record import record

MATRIX = "https://docs.nvidia.com/datacenter/tesla/drivers/cuda-toolkit-driver-and-architecture-matrix.html"
RN = "https://docs.nvidia.com/cuda/cuda-toolkit-release-notes/index.html"
AIE23 = "https://docs.nvidia.com/ai-enterprise/2.3/release-notes/index.html"


@record(frozen=True)
class ArchDrivers:
    """One architecture: its compute capabilities and the driver branches that drive it."""

    arch: str
    ccs: Tuple[str, ...]  # "9.0", ...
    first_cuda: str  # MATRIX "First CUDA Toolkit Support"
    min_branch: Optional[int]  # first branch that drives it (None: not established here)
    min_driver: Optional[str]  # the RN minimum driver of ``first_cuda`` (an example of min_branch)
    last_branch: Optional[int]  # MATRIX "Last Driver Support" (None: ongoing)
    sources: Tuple[str, ...]
    status: str = DERIVED


ROWS: Tuple[ArchDrivers, ...] = (
    ArchDrivers("Blackwell", ("10.0", "12.0"), "12.8", 570, "570.26", None,
                (MATRIX + ': "Blackwell | 10.0 12.0 | CUDA 12.8 CUDA 12.8 | Ongoing | Ongoing"',
                 RN + ': "CUDA 12.8 GA >= 570.26"')),
    ArchDrivers("Hopper", ("9.0",), "11.8", 520, "520.61.05", None,
                (MATRIX + ': "Hopper | 9.0 | CUDA 11.8 CUDA 12.0 | Ongoing | Ongoing"',
                 RN + ': "CUDA 11.8 GA >= 520.61.05"',
                 AIE23 + ': "Support for the NVIDIA H100 GPU" with "Bare-metal NVIDIA Graphics Driver for Linux: 520.61.05"')),
    ArchDrivers("Ada", ("8.9",), "11.8", 520, "520.61.05", None,
                (MATRIX + ': "Ada | 8.9 | CUDA 11.8 | Ongoing | Ongoing"', RN + ': "CUDA 11.8 GA >= 520.61.05"')),
    ArchDrivers("Ampere", ("8.0", "8.6"), "11.0", 450, "450.36.06", None,
                (MATRIX + ': "NVIDIA Ampere architecture | 8.0 8.6 | CUDA 11.0 | Ongoing"',
                 RN + ': "CUDA 11.0.1 RC >= 450.36.06"')),
    ArchDrivers("Turing", ("7.5",), "10.0", 410, "410.48", None,
                (MATRIX + ': "Turing | 7.5 | CUDA 10.0 | Ongoing | Ongoing"', RN + ': "CUDA 10.0.130 >= 410.48"')),
    ArchDrivers("Volta", ("7.0",), "9.0", 384, "384.81", 580,
                (MATRIX + ': "Volta | 7.0 | CUDA 9.0 | CUDA 12.x | R580"', RN + ': "CUDA 9.0 (9.0.76) >= 384.81"')),
    ArchDrivers("Pascal", ("6.0", "6.1"), "8.0", 367, "367.48", 580,
                (MATRIX + ': "Pascal | 6.0 6.1 | CUDA 8.0 | CUDA 12.x CUDA 12.x | R580 R580"', RN + ': "CUDA 8.0 (8.0.44) >= 367.48"')),
    # The RN driver table read for this module starts at CUDA 7.0: no first branch for these two.
    ArchDrivers("Maxwell", ("5.0", "5.2", "5.3"), "6.5", None, None, 580,
                (MATRIX + ': "Maxwell | 5.0 5.2 5.3 | CUDA 6.5 | CUDA 12.x CUDA 12.x CUDA 12.x | R580 R580 R580"',), PRIMARY),
    ArchDrivers("Kepler", ("3.0", "3.2", "3.5", "3.7"), "6.0", None, None, 470,
                (MATRIX + ': "Kepler | 3.5 3.7 | CUDA 6.0 | CUDA 11.x CUDA 11.x | R470 R470"; "Kepler | 3.0 3.2 | CUDA 6.0 | CUDA 10..."',), PRIMARY),
)

# The oldest branch any row's lower bound was read for: below it, a missing min_branch is unknown.
OLDEST_KNOWN_BRANCH = 346  # RN: "CUDA 7.0 (7.0.28) >= 346.46"


def row_for_cc(cc: str) -> Optional[ArchDrivers]:
    """The row whose compute capabilities include ``cc`` ("9.0"); None when not tabled."""
    text = str(cc).strip()
    for row in ROWS:
        if text in row.ccs:
            return row
    return None


def drives(row: ArchDrivers, branch: int) -> Optional[bool]:
    """Whether a driver of ``branch`` drives GPUs of ``row``: True / False / None (unknown)."""
    if row.last_branch is not None and branch > row.last_branch:
        return False
    if row.min_branch is not None:
        return branch >= row.min_branch
    return True if branch >= OLDEST_KNOWN_BRANCH else None


__all__ = ["ArchDrivers", "ROWS", "row_for_cc", "drives", "MATRIX", "RN"]
