"""GPU-to-GPU link bandwidth per direction, for `cudafix verify --nccl` (measured bus bandwidth vs the link).

NVLink: NVIDIA's NVLink page (https://www.nvidia.com/en-us/data-center/nvlink/) gives the total
bandwidth per GPU of each generation (3rd 600 GB/s over 12 links, 4th 900 GB/s over 18 links, 5th
1.8 TB/s over 18 links), both directions together: per link and direction that is 25, 25 and 50 GB/s.
PCIe: per lane and direction after line coding (PCI-SIG's base specifications, 8/16/32/64 GT/s;
128b/130b coding for gen 3-5, as tabulated at https://en.wikipedia.org/wiki/PCI_Express#History_and_revisions).
These are nominal: NCCL's bus bandwidth (nccl-tests' definition, doc/PERFORMANCE.md of
https://github.com/NVIDIA/nccl-tests) reaches a fraction of it, so `verify --nccl` calls a run
degraded only under FAST_FRACTION of the link.
"""

from __future__ import annotations

from typing import Optional

from cudafix.knowledge import PRIMARY, SECONDARY

# compute capability major -> (NVLink generation, GB/s per link and direction); source: NVIDIA's NVLink page
NVLINK_PER_LINK_GBS = {8: (3, 25.0), 9: (4, 25.0), 10: (5, 50.0)}
NVLINK_STATUS = PRIMARY
# PCIe generation -> GB/s per lane and direction
PCIE_PER_LANE_GBS = {1: 0.25, 2: 0.5, 3: 0.985, 4: 1.969, 5: 3.938, 6: 7.563}
PCIE_STATUS = SECONDARY

# A run is the fast path when its largest size reaches this fraction of the nominal link
# (cudafix's choice: well under what NCCL reaches on a healthy link, well over a fallback path).
FAST_FRACTION = 0.5


def nvlink_gbs(cc_major: int, links: int) -> Optional[float]:
    row = NVLINK_PER_LINK_GBS.get(cc_major)
    return None if row is None or links <= 0 else row[1] * links


def pcie_gbs(gen: Optional[int], width: Optional[int]) -> Optional[float]:
    if not gen or not width or gen not in PCIE_PER_LANE_GBS:
        return None
    return round(PCIE_PER_LANE_GBS[gen] * width, 2)
