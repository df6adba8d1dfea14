"""Nominal dense peak throughput and memory bandwidth, for `cudafix verify` (measured vs. nominal).

NONE of these numbers is in the team's reference notes: they are NVIDIA datasheet figures
written from memory, so every row is ``unconfirmed`` and must be presented as "nominal
(unconfirmed)", never as a pass/fail threshold.  Tensor-core figures are *dense* (NVIDIA's
datasheets often print 2x "with sparsity").  GeForce FP16/BF16 figures are with FP32 accumulate.
"""

from __future__ import annotations

import dataclasses
from typing import Optional, Tuple

from cudafix.knowledge import UNCONFIRMED
from cudafix.knowledge.gpus import normalize_name

_SRC = "NVIDIA product datasheet for the named SKU (figures from memory, not checked against the reference)"


@dataclasses.dataclass(frozen=True)
class GpuPeak:
    product: str
    pattern: str  # substring of the normalised NVML name (see gpus.normalize_name)
    fp32_tflops: float  # non-tensor FP32
    tf32_tflops: float  # tensor, dense
    fp16_tflops: float  # tensor, dense
    bf16_tflops: float  # tensor, dense
    mem_bw_gbps: float  # GB/s (10^9 bytes/s)
    source: str = _SRC
    status: str = UNCONFIRMED


GPU_PEAKS: Tuple[GpuPeak, ...] = (
    GpuPeak("H200 SXM", "H200", 67.0, 494.7, 989.4, 989.4, 4800.0),
    GpuPeak("H100 SXM5 80GB HBM3", "H100 80GB HBM3", 67.0, 494.7, 989.4, 989.4, 3350.0),
    GpuPeak("A100 SXM4 80GB", "A100 SXM4 80GB", 19.5, 156.0, 312.0, 312.0, 2039.0),
    GpuPeak("A100 SXM4 40GB", "A100 SXM4 40GB", 19.5, 156.0, 312.0, 312.0, 1555.0),
    GpuPeak("L40S", "L40S", 91.6, 183.0, 362.0, 362.0, 864.0),
    GpuPeak("L4", "L4", 30.3, 60.0, 121.0, 121.0, 300.0),
    GpuPeak("GeForce RTX 4090", "RTX 4090", 82.6, 82.6, 165.2, 165.2, 1008.0),
)


def peak_for(name: str) -> Optional[GpuPeak]:
    """The row for an NVML product name ("NVIDIA H100 80GB HBM3"), None if not listed.

    Whole-word match, so "L4" does not match "L40S" and "H100 PCIe" does not match the SXM row.
    """
    norm = " %s " % normalize_name(name)
    for row in GPU_PEAKS:
        if " %s " % row.pattern in norm:
            return row
    return None
