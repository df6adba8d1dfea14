"""Child process of `cudafix verify`: imports torch and measures what the GPU really does.

Runs in a separate interpreter (never in the user's process: importing torch and initialising
CUDA must not happen in cudafix's own process: a parent that called cuInit breaks CUDA in
forked children).  Prints one JSON object
on stdout.  Python 3.8 compatible; depends only on torch and the stdlib.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any, Dict, List, Optional


def _dir_bytes(path: str, limit: int = 20000) -> Optional[int]:
    """Total size of files under path (bounded walk); None when it does not exist."""
    if not os.path.isdir(path):
        return None
    total = 0
    seen = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            seen += 1
            if seen > limit:
                return total
            try:
                total += os.path.getsize(os.path.join(root, name))
            except OSError:
                pass
    return total


def _jit_cache_path() -> str:
    return os.environ.get("CUDA_CACHE_PATH") or os.path.join(os.path.expanduser("~"), ".nv", "ComputeCache")


def _time_matmul(torch: Any, dtype: Any, n: int, iters: int, tf32: bool = False) -> Dict[str, Any]:
    torch.backends.cuda.matmul.allow_tf32 = tf32
    a = torch.randn(n, n, device="cuda", dtype=dtype)
    b = torch.randn(n, n, device="cuda", dtype=dtype)
    for _ in range(3):
        a @ b
    torch.cuda.synchronize()
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        a @ b
    end.record()
    torch.cuda.synchronize()
    ms = start.elapsed_time(end) / iters
    torch.backends.cuda.matmul.allow_tf32 = False
    return {"n": n, "ms": round(ms, 4), "tflops": round(2.0 * n ** 3 / (ms / 1e3) / 1e12, 2)}


def _time_copy(torch: Any, nbytes: int, pinned: bool, iters: int) -> Dict[str, float]:
    host = torch.empty(nbytes, dtype=torch.uint8, pin_memory=pinned)
    dev = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
    out: Dict[str, float] = {}
    for direction in ("h2d", "d2h"):
        dev.copy_(host) if direction == "h2d" else host.copy_(dev)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(iters):
            if direction == "h2d":
                dev.copy_(host, non_blocking=pinned)
            else:
                host.copy_(dev, non_blocking=pinned)
        torch.cuda.synchronize()
        secs = (time.perf_counter() - t0) / iters
        out[direction + "_gbs"] = round(nbytes / secs / 1e9, 2)
    return out


def measure(quick: bool) -> Dict[str, Any]:
    result: Dict[str, Any] = {"python": sys.version.split()[0], "env": {}}
    for name in ("CUDA_VISIBLE_DEVICES", "CUDA_LAUNCH_BLOCKING", "CUDA_MODULE_LOADING", "CUDA_CACHE_MAXSIZE",
                 "CUDA_CACHE_DISABLE", "CUDA_CACHE_PATH", "LD_LIBRARY_PATH"):
        if name in os.environ:
            result["env"][name] = os.environ[name]
    t0 = time.perf_counter()
    try:
        import torch
    except Exception as exc:  # the env's torch is broken: that is the finding
        result["torch_import_error"] = "%s: %s" % (type(exc).__name__, str(exc).splitlines()[0] if str(exc) else "")
        return result
    result["import_torch_s"] = round(time.perf_counter() - t0, 3)
    result["torch"] = torch.__version__
    result["torch_cuda"] = torch.version.cuda
    t0 = time.perf_counter()
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        available = torch.cuda.is_available()
        count = torch.cuda.device_count() if available else 0
    result["is_available"] = bool(available)
    result["device_count"] = count
    result["cuda_warnings"] = [str(w.message).splitlines()[0] for w in caught][:5]
    if not available:
        return result
    result["arch_list"] = list(torch.cuda.get_arch_list())
    cache_before = _dir_bytes(_jit_cache_path())
    try:
        torch.cuda.init()
        x = torch.ones(1, device="cuda")
        torch.cuda.synchronize()
        result["cuda_init_s"] = round(time.perf_counter() - t0, 3)
        t1 = time.perf_counter()
        y = (x * 2 + 1).sum()
        torch.cuda.synchronize()
        result["first_kernel_ms"] = round((time.perf_counter() - t1) * 1e3, 3)
        t1 = time.perf_counter()
        y = (x * 3 + 1).sum()
        torch.cuda.synchronize()
        result["second_kernel_ms"] = round((time.perf_counter() - t1) * 1e3, 3)
        del y
    except Exception as exc:
        result["cuda_error"] = "%s: %s" % (type(exc).__name__, str(exc).splitlines()[0])
        return result
    cache_after = _dir_bytes(_jit_cache_path())
    result["jit_cache_growth_bytes"] = (
        None if cache_before is None and cache_after is None else (cache_after or 0) - (cache_before or 0)
    )
    devices: List[Dict[str, Any]] = []
    for i in range(count):
        p = torch.cuda.get_device_properties(i)
        devices.append({
            "index": i,
            "name": p.name,
            "compute_capability": "%d.%d" % (p.major, p.minor),
            "memory_mib": int(p.total_memory // (1024 * 1024)),
            "uuid": str(getattr(p, "uuid", "")) or None,
        })
    result["devices"] = devices
    n = 2048 if quick else 8192
    iters = 10 if quick else 20
    matmul: Dict[str, Any] = {}
    try:
        matmul["fp32"] = _time_matmul(torch, torch.float32, n, iters)
        matmul["tf32"] = _time_matmul(torch, torch.float32, n, iters, tf32=True)
        matmul["fp16"] = _time_matmul(torch, torch.float16, n, iters)
        matmul["bf16"] = _time_matmul(torch, torch.bfloat16, n, iters)
    except Exception as exc:
        matmul["error"] = "%s: %s" % (type(exc).__name__, str(exc).splitlines()[0])
    result["matmul"] = matmul
    nbytes = (64 if quick else 256) * 1024 * 1024
    copies: Dict[str, Any] = {}
    try:
        copies["pinned"] = _time_copy(torch, nbytes, True, 5 if quick else 10)
        copies["pageable"] = _time_copy(torch, nbytes, False, 3 if quick else 5)
    except Exception as exc:
        copies["error"] = "%s: %s" % (type(exc).__name__, str(exc).splitlines()[0])
    result["copy"] = copies
    return result


def main() -> None:
    quick = "--quick" in sys.argv[1:]
    try:
        out = measure(quick)
    except Exception as exc:  # report, never a traceback
        out = {"child_error": "%s: %s" % (type(exc).__name__, exc)}
    sys.stdout.write(json.dumps(out) + "\n")


if __name__ == "__main__":
    main()
