"""Reproduce the failure modes cudafix is about, on a real GPU, and measure before/after.

Run on the GPU machine with the python that holds torch (docs/gpu.md gives the exact commands):

    python3 bench/gpu/experiments.py OUTDIR [--only NAME,...]

Each experiment runs its measurements in fresh child processes (CUDA state and environment
variables must not leak between cases) and writes OUTDIR/<name>.json.  Experiments:

  yolo-cpu-fallback   CUDA_VISIBLE_DEVICES='' : yolov9c (random weights) ms/image CPU vs GPU
  launch-blocking     CUDA_LAUNCH_BLOCKING=1  : yolov9c batch 8 fp16 ms/batch, with vs without
  module-loading      CUDA_MODULE_LOADING=EAGER vs default: first CUDA op time + device memory
  ptx-jit             a PTX-only (compute_75) module of many kernels on this GPU: per-start time
                      with no usable JIT cache (too small / unwritable) vs a big enough cache
  compat-libcuda      the image's cuda-compat libcuda first on LD_LIBRARY_PATH: what torch does
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any, Dict, List, Optional

HERE = os.path.dirname(os.path.abspath(__file__))
PY = sys.executable


def _env(update: Dict[str, Optional[str]]) -> Dict[str, str]:
    """os.environ with ``update`` applied (None: unset)."""
    env = dict(os.environ)
    for k, v in update.items():
        if v is None:
            env.pop(k, None)
        else:
            env[k] = v
    return env


def child(code: str, env_update: Dict[str, Optional[str]], timeout: float = 600) -> Dict[str, Any]:
    """Run python code in a fresh interpreter; its last stdout line must be JSON."""
    env = _env(env_update)
    t0 = time.perf_counter()
    p = subprocess.run([PY, "-c", code], capture_output=True, text=True, env=env, timeout=timeout)
    wall = time.perf_counter() - t0
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
    out: Dict[str, Any] = json.loads(lines[-1]) if lines else {}
    out["_wall_s"] = round(wall, 3)
    out["_rc"] = p.returncode
    if p.returncode != 0 or not lines:
        out["_stderr_tail"] = p.stderr.strip().splitlines()[-6:]
    return out


YOLO_CODE = r"""
import json, os, time, torch
os.environ.setdefault("YOLO_OFFLINE", "1")
from ultralytics import YOLO
batch, half, iters = {batch}, {half}, {iters}
dev = "cuda" if torch.cuda.is_available() else "cpu"
m = YOLO("yolov9c.yaml").model.to(dev).eval()
x = torch.randn(batch, 3, 640, 640, device=dev)
if half and dev == "cuda":
    m = m.half(); x = x.half()
with torch.inference_mode():
    for _ in range(3):
        m(x)
    if dev == "cuda": torch.cuda.synchronize()
    ts = []
    for _ in range(iters):
        t = time.perf_counter(); m(x)
        if dev == "cuda": torch.cuda.synchronize()
        ts.append((time.perf_counter() - t) * 1e3)
ts.sort()
print(json.dumps({{"device": dev, "cuda_available": torch.cuda.is_available(), "batch": batch, "half": half,
                  "median_ms": ts[len(ts)//2], "ms_per_image": ts[len(ts)//2] / batch, "iters": iters}}))
"""


def exp_yolo_cpu_fallback() -> Dict[str, Any]:
    gpu = child(YOLO_CODE.format(batch=1, half=False, iters=30), {"CUDA_VISIBLE_DEVICES": None})
    cpu = child(YOLO_CODE.format(batch=1, half=False, iters=5), {"CUDA_VISIBLE_DEVICES": ""})
    ratio = cpu.get("ms_per_image", 0) / gpu["ms_per_image"] if gpu.get("ms_per_image") else None
    return {"gpu": gpu, "cuda_visible_devices_empty": cpu, "slowdown": round(ratio, 1) if ratio else None}


def exp_launch_blocking() -> Dict[str, Any]:
    base = child(YOLO_CODE.format(batch=8, half=True, iters=30), {"CUDA_LAUNCH_BLOCKING": None})
    blk = child(YOLO_CODE.format(batch=8, half=True, iters=30), {"CUDA_LAUNCH_BLOCKING": "1"})
    ratio = blk.get("median_ms", 0) / base["median_ms"] if base.get("median_ms") else None
    return {"default": base, "launch_blocking_1": blk, "slowdown": round(ratio, 2) if ratio else None}


MODLOAD_CODE = r"""
import json, os, time, torch
t = time.perf_counter()
x = torch.ones(1, device="cuda"); torch.cuda.synchronize()
first = time.perf_counter() - t
free, total = torch.cuda.mem_get_info()
print(json.dumps({"first_cuda_op_s": round(first, 3), "device_used_mib": (total - free) // (1 << 20),
                  "CUDA_MODULE_LOADING": os.environ.get("CUDA_MODULE_LOADING")}))
"""


def exp_module_loading() -> Dict[str, Any]:
    runs: Dict[str, List[Dict[str, Any]]] = {"default": [], "EAGER": []}
    for _ in range(3):
        runs["default"].append(child(MODLOAD_CODE, {"CUDA_MODULE_LOADING": None}))
        runs["EAGER"].append(child(MODLOAD_CODE, {"CUDA_MODULE_LOADING": "EAGER"}))
    med = {k: statistics.median(r["first_cuda_op_s"] for r in v) for k, v in runs.items()}
    mem = {k: statistics.median(r["device_used_mib"] for r in v) for k, v in runs.items()}
    return {"runs": runs, "median_first_op_s": med, "median_device_used_mib": mem,
            "slowdown": round(med["EAGER"] / med["default"], 1)}


def _build_ptx_only(workdir: str, kernels: int = 400) -> str:
    src = os.path.join(workdir, "jit.cu")
    with open(src, "w") as fh:
        fh.write("#include <cstdio>\n#include <cuda_runtime.h>\n")
        fh.write("template <int K> __global__ void k(float* p) { int i = threadIdx.x;\n"
                 "  float v = p[i]; for (int j = 0; j < 64; ++j) v = v * 1.0001f + K * 0.5f + sinf(v);\n"
                 "  p[i] = v; }\n")
        fh.write("int main() { float* p; cudaMalloc(&p, 1024 * sizeof(float));\n")
        for i in range(kernels):
            fh.write("  k<%d><<<1, 256>>>(p);\n" % i)
        fh.write("  cudaError_t e = cudaDeviceSynchronize(); printf(\"%s\\n\", cudaGetErrorString(e));"
                 " return e != cudaSuccess; }\n")
    exe = os.path.join(workdir, "ptxonly")
    subprocess.run(["nvcc", "-O2", "-gencode", "arch=compute_75,code=compute_75", "-o", exe, src],
                   check=True, capture_output=True, timeout=600)
    return exe


def _time_exe(exe: str, env_update: Dict[str, Optional[str]]) -> Dict[str, Any]:
    env = _env(env_update)
    t0 = time.perf_counter()
    p = subprocess.run([exe], capture_output=True, text=True, env=env, timeout=600)
    return {"s": round(time.perf_counter() - t0, 3), "rc": p.returncode, "out": p.stdout.strip()[-80:]}


def _dir_size(path: str) -> int:
    return sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(path) for f in fs)


def exp_ptx_jit() -> Dict[str, Any]:
    work = tempfile.mkdtemp(prefix="cudafix-ptx-")
    exe = _build_ptx_only(work)
    out: Dict[str, Any] = {"kernels": 400, "target": "compute_75 PTX only (no SASS for this GPU)"}
    cases = {
        "cache_64KiB": {"CUDA_CACHE_MAXSIZE": str(64 * 1024)},
        "cache_unwritable": {"CUDA_CACHE_PATH": "/proc/cudafix-unwritable/ComputeCache"},
        "cache_disabled": {"CUDA_CACHE_DISABLE": "1"},
        "cache_default_size": {},
        "cache_4GiB": {"CUDA_CACHE_MAXSIZE": str(4 * 1024 ** 3)},
    }
    for name, upd in cases.items():
        cache = os.path.join(work, "cache-" + name)
        env = {"CUDA_CACHE_PATH": cache, "CUDA_CACHE_MAXSIZE": None, "CUDA_CACHE_DISABLE": None}
        env.update(upd)
        first = _time_exe(exe, env)
        second = _time_exe(exe, env)
        third = _time_exe(exe, env)
        size = _dir_size(cache) if os.path.isdir(cache) else None
        out[name] = {"env": upd, "first_s": first, "second_s": second, "third_s": third, "cache_bytes": size}
    shutil.rmtree(work, ignore_errors=True)
    return out


COMPAT_CODE = r"""
import json, torch
r = {"is_available": None}
import warnings
with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter("always")
    r["is_available"] = torch.cuda.is_available()
r["warnings"] = [str(x.message).splitlines()[0] for x in w]
try:
    torch.zeros(1, device="cuda"); torch.cuda.synchronize(); r["first_op"] = "ok"
except Exception as e:
    r["first_op"] = "%s: %s" % (type(e).__name__, str(e).splitlines()[0])
maps = open("/proc/self/maps").read()
r["libcuda_loaded"] = sorted({l.split()[-1] for l in maps.splitlines() if "libcuda.so" in l})
print(json.dumps(r))
"""


def exp_compat_libcuda() -> Dict[str, Any]:
    import glob

    compat = sorted(glob.glob("/usr/local/cuda*/compat/libcuda.so.*"))
    out: Dict[str, Any] = {"compat_files": compat}
    if not compat:
        return out
    cdir = os.path.dirname(compat[0])
    ld = os.environ.get("LD_LIBRARY_PATH", "")
    out["kernel_module"] = open("/sys/module/nvidia/version").read().strip()
    out["default"] = child(COMPAT_CODE, {})
    out["compat_first"] = child(COMPAT_CODE, {"LD_LIBRARY_PATH": cdir + (":" + ld if ld else "")})
    return out


EXPERIMENTS = {
    "module-loading": exp_module_loading,
    "ptx-jit": exp_ptx_jit,
    "compat-libcuda": exp_compat_libcuda,
    "yolo-cpu-fallback": exp_yolo_cpu_fallback,
    "launch-blocking": exp_launch_blocking,
}


def main() -> None:
    outdir = sys.argv[1]
    only = None
    if "--only" in sys.argv:
        only = sys.argv[sys.argv.index("--only") + 1].split(",")
    os.makedirs(outdir, exist_ok=True)
    for name, fn in EXPERIMENTS.items():
        if only and name not in only:
            continue
        t0 = time.perf_counter()
        try:
            res = fn()
        except Exception as exc:
            res = {"error": "%s: %s" % (type(exc).__name__, exc)}
        res["_experiment_wall_s"] = round(time.perf_counter() - t0, 1)
        with open(os.path.join(outdir, name + ".json"), "w") as fh:
            json.dump(res, fh, indent=1)
        print(name, json.dumps(res)[:600], flush=True)


if __name__ == "__main__":
    main()
