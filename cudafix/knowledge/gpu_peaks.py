"""Nominal dense peak throughput and memory bandwidth, for `cudafix verify` (measured vs. nominal).

Only figures found in public copies of NVIDIA's datasheets are listed (status ``secondary``);
they are shown as "nominal", never as a tight pass/fail threshold.  Tensor-core figures are *dense* (NVIDIA's
datasheets often print 2x "with sparsity").  GeForce FP16/BF16 figures are with FP32 accumulate.
"""

from __future__ import annotations

from typing import Optional, Tuple

from cudafix.knowledge import SECONDARY
from cudafix.knowledge.gpus import normalize_name
from cudafix.model.record import record

_ITKB = ("itkb.uw.cz, 'NVIDIA H200 vs B300: precisions, cores, and what the datasheet numbers mean' "
         "(2026-06-22): per-GPU SXM dense figures, FP16/BF16 ~989 TFLOPS, 4.8 TB/s")
_AIWIKI = "aiwiki.ai/wiki/nvidia_h200 (2026-06-21): H200 = H100's GH100 silicon, 141 GB HBM3e at 4.8 TB/s"
_LZW = "lzwjava.github.io/nvidia-h200-gpu-specs-en: H100 SXM 3.35 TB/s vs H200 SXM 4.8 TB/s, same compute"


@record(frozen=True)
class GpuPeak:
    """Nominal dense throughput and memory bandwidth of one GPU product."""

    product: str
    pattern: str  # substring of the normalised NVML name (see gpus.normalize_name)
    fp32_tflops: Optional[float]  # non-tensor FP32; None = no cited figure
    tf32_tflops: Optional[float]  # tensor, dense
    fp16_tflops: Optional[float]  # tensor, dense
    bf16_tflops: Optional[float]  # tensor, dense
    mem_bw_gbps: Optional[float]  # GB/s (10^9 bytes/s)
    source: str
    status: str = SECONDARY


# Only rows with a cited figure.  Secondary: third-party copies of NVIDIA's datasheet (dense,
# i.e. without 2:4 sparsity).  The H200 row also matches the H200 NVL (PCIe), whose clocks
# and so peaks are lower: `verify` presents these as nominal, and judges "degraded" only far
# below them (cudafix.verify.PEAK_FRACTION_FLOOR).
GPU_PEAKS: Tuple[GpuPeak, ...] = (
    GpuPeak("H200 SXM", "H200", None, None, 989.0, 989.0, 4800.0, source=_ITKB + "; " + _AIWIKI),
    GpuPeak("H100 SXM5 80GB HBM3", "H100 80GB HBM3", None, None, 989.0, 989.0, 3350.0,
            source=_ITKB + " (H200 shares H100's compute); " + _LZW),
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
