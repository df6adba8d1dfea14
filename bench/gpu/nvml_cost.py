"""What NVML costs `cudafix status` on this machine: importing pynvml, nvmlInit, and the queries
the GPU probe makes per GPU, each timed alone (fresh process; min of 5 in-process repeats for
the queries).  Usage: python3 bench/gpu/nvml_cost.py"""

from __future__ import annotations

import json
import time

t = time.perf_counter()
import pynvml  # noqa: E402

out = {"import_pynvml_s": time.perf_counter() - t}
t = time.perf_counter()
pynvml.nvmlInit()
out["nvmlInit_s"] = time.perf_counter() - t
n = pynvml.nvmlDeviceGetCount()
best = None
for _ in range(5):
    t = time.perf_counter()
    for i in range(n):
        h = pynvml.nvmlDeviceGetHandleByIndex(i)
        pynvml.nvmlDeviceGetName(h)
        pynvml.nvmlDeviceGetUUID(h)
        pynvml.nvmlDeviceGetMemoryInfo(h)
        pynvml.nvmlDeviceGetCudaComputeCapability(h)
        pynvml.nvmlDeviceGetPciInfo(h)
        try:
            pynvml.nvmlDeviceGetMigMode(h)
        except pynvml.NVMLError:
            pass
    dt = time.perf_counter() - t
    best = dt if best is None else min(best, dt)
out.update(gpus=n, queries_s=best, driver=str(pynvml.nvmlSystemGetDriverVersion()))
t = time.perf_counter()
pynvml.nvmlShutdown()
out["nvmlShutdown_s"] = time.perf_counter() - t
print(json.dumps({k: round(v, 5) if isinstance(v, float) else v for k, v in out.items()}))
