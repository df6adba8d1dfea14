"""`cudafix verify`: is the GPU really being used?

Runs cudafix/verify/child.py in a child interpreter of the env (that child imports torch; cudafix's
own process never does), then judges the measurements:

  GPU used      torch sees the GPUs and runs native kernels at a plausible speed     exit 0
  degraded      GPU used, but slowed: PTX JIT at first use, throughput far under the
                GPU's expected peak, CUDA_LAUNCH_BLOCKING=1, or fewer devices than
                the driver reports                                                    exit 1
  CPU fallback  torch cannot use a GPU (CPU-only build, no driver, hidden devices…)    exit 3
  no torch      the env has no importable torch                                      exit 4
(exit 2 is reserved for "cudafix itself could not run", as for `cudafix check`.)
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from typing import Any, Dict, List, Optional

GPU_USED = "GPU used"
DEGRADED = "degraded"
CPU_FALLBACK = "CPU fallback"
NO_TORCH = "no torch"
EXIT_CODES = {GPU_USED: 0, DEGRADED: 1, CPU_FALLBACK: 3, NO_TORCH: 4}

# Below this fraction of the expected dense peak we call throughput degraded.  Generous on
# purpose: a cold GPU, clocks and small sizes (--quick) legitimately land well under peak.
PEAK_FRACTION_FLOOR = 0.25


@dataclasses.dataclass
class VerifyResult:
    """The verdict of `cudafix verify`, its reasons and the measurements behind it."""

    verdict: str
    reasons: List[str]
    measurements: Dict[str, Any]
    expected_peaks: Dict[str, Any]
    findings: List[Dict[str, Any]]

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.verdict]

    def to_dict(self) -> Dict[str, Any]:
        return {
            "schema": "cudafix.verify/1",
            "verdict": self.verdict,
            "exit_code": self.exit_code,
            "reasons": self.reasons,
            "measurements": self.measurements,
            "expected_peaks": self.expected_peaks,
            "findings": self.findings,
        }


class VerifyError(RuntimeError):
    """cudafix could not run the check (one line for the user)."""


def run_child(python: str, quick: bool, timeout: float) -> Dict[str, Any]:
    child = os.path.join(os.path.dirname(os.path.abspath(__file__)), "child.py")
    from cudafix.store import runner
    from cudafix.store.safefs import env_owners

    # the trusted runner: -I, from /, stdin closed, its own process group, bounded output
    try:
        proc = runner.run(runner.python_argv(python, child, *(["--quick"] if quick else [])), timeout,
                          owners=env_owners(os.path.dirname(os.path.dirname(python))))
    except OSError as exc:
        raise VerifyError("cannot run %s: %s" % (python, exc)) from None
    if proc.timed_out:
        raise VerifyError("the torch check did not finish within %ds (a PTX JIT stall looks like this: "
                          "run `cudafix status`)" % timeout)
    lines = [ln for ln in proc.text().splitlines() if ln.startswith("{")]
    if not lines:
        tail = (proc.text("stderr").strip().splitlines() or ["no output"])[-1]
        raise VerifyError("the torch check in %s failed: %s" % (python, tail))
    try:
        return json.loads(lines[-1])
    except ValueError:
        raise VerifyError("the torch check printed unreadable output") from None


def _expected_peaks(devices: List[Dict[str, Any]]) -> Dict[str, Any]:
    from cudafix.knowledge import gpu_peaks

    if not devices:
        return {}
    row = gpu_peaks.peak_for(devices[0]["name"])
    if row is None:
        return {}
    return dataclasses.asdict(row) if dataclasses.is_dataclass(row) else dict(row)


def _has_native_sass(arch_list: List[str], cc: str) -> bool:
    """torch.cuda.get_arch_list() has SASS this GPU runs (same major, minor <= the GPU's)."""
    from cudafix.knowledge import arch

    sass = [a for a in arch_list if a.startswith("sm_")]
    return any(arch.sass_runs_on(a, cc) for a in sass)


def judge(m: Dict[str, Any], peaks: Dict[str, Any], snapshot_gpu_count: Optional[int],
          findings: List[Dict[str, Any]]) -> VerifyResult:
    reasons: List[str] = []
    blocking = [f["message"] for f in findings if f.get("severity") == "error"]
    if "torch_import_error" in m or "torch" not in m:
        err = m.get("torch_import_error", "torch is not installed in this env")
        return VerifyResult(NO_TORCH, ["import torch failed: %s" % err] + blocking, m, peaks, findings)
    if not m.get("torch_cuda"):
        reasons.append("torch %s is a CPU-only build (torch.version.cuda is None)" % m.get("torch"))
        return VerifyResult(CPU_FALLBACK, reasons + blocking, m, peaks, findings)
    if not m.get("is_available") or "cuda_error" in m:
        if "cuda_error" in m:
            reasons.append("first CUDA operation failed: %s" % m["cuda_error"])
        else:
            reasons.append("torch.cuda.is_available() is False")
        reasons.extend("torch warned: %s" % w for w in m.get("cuda_warnings", []))
        if m.get("env", {}).get("CUDA_VISIBLE_DEVICES") is not None:
            reasons.append("CUDA_VISIBLE_DEVICES=%r" % m["env"]["CUDA_VISIBLE_DEVICES"])
        return VerifyResult(CPU_FALLBACK, reasons + blocking, m, peaks, findings)

    if m.get("jit_cache_growth_bytes"):
        reasons.append("the first kernels were JIT-compiled from PTX (the JIT cache grew by %d bytes)"
                       % m["jit_cache_growth_bytes"])
    devices = m.get("devices", [])
    for d in devices:
        if not _has_native_sass(m.get("arch_list", []), d["compute_capability"]):
            reasons.append("%s (sm_%s) has no native kernels in this torch (arch list: %s)"
                           % (d["name"], d["compute_capability"].replace(".", ""), " ".join(m.get("arch_list", []))))
    if m.get("env", {}).get("CUDA_LAUNCH_BLOCKING") == "1":
        reasons.append("CUDA_LAUNCH_BLOCKING=1 serialises every kernel launch")
    if snapshot_gpu_count is not None and m.get("device_count", 0) < snapshot_gpu_count:
        reasons.append("torch sees %d GPU(s), the driver reports %d" % (m.get("device_count", 0), snapshot_gpu_count))
    for dtype in ("fp16", "bf16", "tf32", "fp32"):
        got = m.get("matmul", {}).get(dtype, {}).get("tflops")
        want = peaks.get(dtype + "_tflops") if peaks else None
        if got is not None and want:
            if got < PEAK_FRACTION_FLOOR * want:
                reasons.append("%s matmul %.1f TFLOP/s is under %d%% of the expected %.0f"
                               % (dtype, got, PEAK_FRACTION_FLOOR * 100, want))
    verdict = DEGRADED if reasons else GPU_USED
    return VerifyResult(verdict, reasons, m, peaks, findings)


def verify(python: Optional[str] = None, quick: bool = False, timeout: float = 600.0) -> VerifyResult:
    python = python or sys.executable
    snapshot_gpus: Optional[int] = None
    findings: List[Dict[str, Any]] = []
    try:
        from cudafix import rules
        from cudafix.probes import take_snapshot

        snap = take_snapshot(python=None if python == sys.executable else python)
        if not snap.gpus.unknown.get("gpus"):
            snapshot_gpus = len(snap.visible_gpus())
        findings = [f.to_dict() for f in rules.findings(rules.run(snap)) if f.severity in ("error", "warning")]
    except Exception as exc:  # the snapshot is context for the verdict, not a precondition
        findings = [{"rule": "cudafix", "severity": "info", "message": "snapshot failed: %s" % exc}]
    m = run_child(python, quick, timeout)
    if "child_error" in m:
        raise VerifyError("the torch check crashed: %s" % m["child_error"])
    return judge(m, _expected_peaks(m.get("devices", [])), snapshot_gpus, findings)


def render_text(r: VerifyResult) -> str:
    m = r.measurements
    out = ["cudafix verify: %s" % r.verdict]
    for reason in r.reasons:
        out.append("  - %s" % reason)
    if "torch" in m:
        out.append("torch %s (CUDA %s), import %.2f s" % (m["torch"], m.get("torch_cuda"), m.get("import_torch_s", 0)))
    if m.get("is_available"):
        out.append("CUDA init + first tensor: %.3f s; first kernel %.2f ms, second %.2f ms"
                   % (m.get("cuda_init_s", 0), m.get("first_kernel_ms", 0), m.get("second_kernel_ms", 0)))
        for d in m.get("devices", []):
            out.append("GPU%d %s  sm_%s  %d MiB" % (d["index"], d["name"], d["compute_capability"].replace(".", ""),
                                                   d["memory_mib"]))
        mm = m.get("matmul", {})
        for dtype in ("fp32", "tf32", "fp16", "bf16"):
            if dtype in mm:
                want = r.expected_peaks.get(dtype + "_tflops") if r.expected_peaks else None
                out.append("  matmul %-4s %7.1f TFLOP/s%s" % (dtype, mm[dtype]["tflops"],
                                                           "  (expected peak %.0f)" % want if want else ""))
        cp = m.get("copy", {})
        for kind in ("pinned", "pageable"):
            if kind in cp:
                out.append("  copy %-8s H2D %6.1f GB/s  D2H %6.1f GB/s" % (kind, cp[kind]["h2d_gbs"], cp[kind]["d2h_gbs"]))
    return "\n".join(out)
