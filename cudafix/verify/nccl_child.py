"""Child process of `cudafix verify --nccl`: one rank of a loopback NCCL job.

The parent starts one of these per local GPU with RANK, WORLD_SIZE, MASTER_ADDR=127.0.0.1 and a
free MASTER_PORT (and NCCL_DEBUG=INFO, captured from this child's stderr only).  Rank r uses GPU
r.  It times an all-reduce and an all-gather per size and prints one JSON object on stdout; rank
0 also reports the NVML topology (NVLink links up per GPU, PCIe generation and width) through
libnvidia-ml by ctypes (no Python NVML binding needed).  Python 3.8+; torch and the stdlib only.
"""

from __future__ import annotations

import ctypes
import json
import os
import sys
import time
from typing import Any, Dict, List

SIZES = (1 << 20, 16 << 20, 128 << 20)  # bytes per rank
NVML_MAX_LINKS = 18  # NVML_NVLINK_MAX_LINKS


def nvml_topology(count: int) -> Dict[str, Any]:
    import importlib.util

    # cudafix's trusted loader (store/trustload.py), from this file's own install (-I: nothing of
    # cudafix on sys.path): a libnvidia-ml on LD_LIBRARY_PATH only if root or we own it
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    spec = importlib.util.spec_from_file_location("_cudafix_trustload", os.path.join(here, "store", "trustload.py"))
    tl = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tl)  # type: ignore[union-attr]
    nv, why = tl.load_soname("libnvidia-ml.so.1", os.environ.get("LD_LIBRARY_PATH"))
    if nv is None:
        return {"error": "libnvidia-ml.so.1: %s" % why}
    if nv.nvmlInit_v2() != 0:
        return {"error": "nvmlInit failed"}
    gpus: List[Dict[str, Any]] = []
    try:
        for i in range(count):
            h = ctypes.c_void_p()
            if nv.nvmlDeviceGetHandleByIndex_v2(ctypes.c_uint(i), ctypes.byref(h)) != 0:
                gpus.append({"index": i, "error": "no handle"})
                continue
            links = 0
            for link in range(NVML_MAX_LINKS):
                active = ctypes.c_int(0)
                if nv.nvmlDeviceGetNvLinkState(h, ctypes.c_uint(link), ctypes.byref(active)) == 0 and active.value == 1:
                    links += 1
            g: Dict[str, Any] = {"index": i, "nvlinks_up": links}
            for key, fn in (("pcie_gen", "nvmlDeviceGetCurrPcieLinkGeneration"), ("pcie_width", "nvmlDeviceGetCurrPcieLinkWidth"),
                            ("pcie_gen_max", "nvmlDeviceGetMaxPcieLinkGeneration"), ("pcie_width_max", "nvmlDeviceGetMaxPcieLinkWidth")):
                v = ctypes.c_uint(0)
                if getattr(nv, fn)(h, ctypes.byref(v)) == 0:
                    g[key] = v.value
            gpus.append(g)
    finally:
        nv.nvmlShutdown()
    return {"gpus": gpus}


def _time(torch: Any, fn: Any, iters: int) -> float:
    for _ in range(2):
        fn()
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(iters):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t) / iters


def run() -> Dict[str, Any]:
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    out: Dict[str, Any] = {"rank": rank, "world_size": world}
    try:
        import torch
        import torch.distributed as dist
    except Exception as exc:
        out["torch_import_error"] = "%s: %s" % (type(exc).__name__, (str(exc).splitlines() or [""])[0])
        return out
    out["torch"] = torch.__version__
    out["torch_cuda"] = torch.version.cuda
    if not torch.cuda.is_available():
        out["cuda_available"] = False
        return out
    out["cuda_available"] = True
    out["device_count"] = torch.cuda.device_count()
    if not dist.is_available() or not dist.is_nccl_available():
        out["nccl_available"] = False
        return out
    try:
        v = torch.cuda.nccl.version()
        out["nccl_version_torch"] = ".".join(str(x) for x in v) if isinstance(v, tuple) else str(v)
    except Exception as exc:
        out["nccl_version_error"] = str(exc)
    if rank == 0:
        out["topology"] = nvml_topology(world)
    dev = torch.device("cuda", rank)
    torch.cuda.set_device(dev)
    t = time.perf_counter()
    try:
        dist.init_process_group("nccl", init_method="tcp://%s:%s" % (os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"]),
                                rank=rank, world_size=world, device_id=dev)
        x = torch.ones(1, device=dev)
        dist.all_reduce(x)
        torch.cuda.synchronize()
    except Exception as exc:
        out["init_error"] = "%s: %s" % (type(exc).__name__, (str(exc).splitlines() or [""])[0][:400])
        return out
    out["init_s"] = round(time.perf_counter() - t, 4)
    out["self_all_reduce_ok"] = float(x.item()) == float(world)
    results = []
    for nbytes in SIZES:
        n = nbytes // 4
        a = torch.ones(n, device=dev)
        iters = 20 if nbytes <= (16 << 20) else 10
        ar = _time(torch, lambda: dist.all_reduce(a), iters)
        gathered = torch.empty(n * world, device=dev)
        ag = _time(torch, lambda: dist.all_gather_into_tensor(gathered, a), iters)
        # nccl-tests' definitions (PERFORMANCE.md): all-reduce busbw = algbw * 2(n-1)/n,
        # all-gather busbw = algbw * (n-1)/n with algbw over the gathered size
        results.append({"bytes": nbytes,
                        "all_reduce_ms": round(ar * 1e3, 4), "all_reduce_algbw_gbs": round(nbytes / ar / 1e9, 2),
                        "all_reduce_busbw_gbs": round(nbytes / ar / 1e9 * 2 * (world - 1) / world, 2),
                        "all_gather_ms": round(ag * 1e3, 4), "all_gather_algbw_gbs": round(nbytes * world / ag / 1e9, 2),
                        "all_gather_busbw_gbs": round(nbytes * world / ag / 1e9 * (world - 1) / world, 2)})
    out["sizes"] = results
    dist.destroy_process_group()
    return out


def main() -> None:
    try:
        out = run()
    except Exception as exc:  # report, never a traceback
        out = {"child_error": "%s: %s" % (type(exc).__name__, (str(exc).splitlines() or [""])[0][:400])}
    sys.stdout.write(json.dumps(out) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
