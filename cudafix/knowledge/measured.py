"""What a problem costs the user, measured on this project's H200 machine (driver 580.159.04,
torch 2.11.0+cu130): docs/gpu.md, raw outputs in docs/gpu-raw/.  Rule texts quote these rows
rather than carrying their own copies of the figures."""

from __future__ import annotations

from cudafix.model.record import record


@record(frozen=True)
class Measurement:
    """One before/after measurement: the workload, both figures, and where the raw output is."""

    workload: str
    figures: str
    source: str

    def evidence(self) -> str:
        return "measured on an H200 (%s; %s): %s" % (self.workload, self.source, self.figures)


LAUNCH_BLOCKING = Measurement("yolov9c, batch 8, fp16, 640 px", "44.1 ms per batch with CUDA_LAUNCH_BLOCKING=1 vs 14.8 ms without",
                              "docs/gpu.md")
MODULE_LOADING_EAGER = Measurement("torch 2.11.0+cu130, first CUDA op",
                                   "3.01 s and 1260 MiB device memory with EAGER vs 0.34 s and 620 MiB lazy",
                                   "docs/gpu.md, docs/gpu-raw/module-loading.json")
CPU_FALLBACK = Measurement("yolov9c, batch 1", "223 ms/image on the CPU vs 19 ms/image on the GPU", "docs/gpu.md")
