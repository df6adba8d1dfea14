"""The user's program of the `verify --first-run -- CMD` proof: imports the PTX-only extension
and runs it.  Prints its own timings (the direct measurement): first call = JIT + launch."""

import json
import sys
import time

t0 = time.perf_counter()
import torch  # noqa: E402

import cfx_ptx75  # noqa: E402

t1 = time.perf_counter()
x = torch.ones(1 << 16, device="cuda")
torch.cuda.synchronize()
t2 = time.perf_counter()
err = cfx_ptx75.run(x)
torch.cuda.synchronize()
t3 = time.perf_counter()
cfx_ptx75.run(x)
torch.cuda.synchronize()
t4 = time.perf_counter()
print(json.dumps({"import_s": round(t1 - t0, 4), "context_s": round(t2 - t1, 4), "first_call_s": round(t3 - t2, 4),
                  "second_call_s": round(t4 - t3, 4), "cuda_error": err, "nkernels": cfx_ptx75.nkernels()}))
sys.exit(1 if err else 0)
