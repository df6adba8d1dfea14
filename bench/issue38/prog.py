"""Issue 38's user program: a YOLO-shaped conv net (batch 8, 640x640, fp16) that sets torch.backends.cudnn.benchmark = True itself and
calls a PTX-only CUDA module (libcfx_ptx75.so through bench/gpu/ptxprog/cfx_ptx75.py, found on
PYTHONPATH), with its own timers.  bench/issue38_h200.sh runs it in fresh processes with an empty and a
warm JIT cache (its own timers: the direct measurement), and under `cudafix verify --first-run --`.

Prints one JSON line: import_s (torch + the module), context_s, ext_first_s / ext_second_s (the
module's 300 kernels, first call = their JIT + launch), fwd_first_s / fwd_second_s (the net's first
forward = cuDNN's autotuning and the JIT of the kernels it tries), total_s (from the first line of
this file).  Stdlib + torch; Python 3.8 compatible.
"""

import json
import sys
import time

t0 = time.perf_counter()
import torch  # noqa: E402

import cfx_ptx75  # noqa: E402

out = {"import_s": round(time.perf_counter() - t0, 4)}
torch.backends.cudnn.benchmark = True


def sync_time(fn):
    t = time.perf_counter()
    r = fn()
    torch.cuda.synchronize()
    return r, round(time.perf_counter() - t, 4)


_, out["context_s"] = sync_time(lambda: torch.ones(1, device="cuda"))
buf = torch.ones(1 << 16, device="cuda")
err, out["ext_first_s"] = sync_time(lambda: cfx_ptx75.run(buf))
_, out["ext_second_s"] = sync_time(lambda: cfx_ptx75.run(buf))
nn = torch.nn


class Net(nn.Module):
    """Conv-BN-SiLU blocks (five stride-2 downsamplings) and 1x1 heads at strides 8/16/32: the shape of
    a YOLO detector, as the built-in one (written here again: this program imports nothing of cudafix)."""

    def __init__(self):
        super().__init__()
        blocks, c = [], 3
        for c2, s in ((16, 2), (32, 2), (32, 1), (64, 2), (64, 1), (128, 2), (128, 1), (256, 2), (256, 1), (256, 1)):
            blocks.append(nn.Sequential(nn.Conv2d(c, c2, 3, s, 1, bias=False), nn.BatchNorm2d(c2), nn.SiLU()))
            c = c2
        self.blocks = nn.ModuleList(blocks)
        self.heads = nn.ModuleList(nn.Conv2d(c, 255, 1) for c in (64, 128, 256))

    def forward(self, x):
        feats = []
        for i, b in enumerate(self.blocks):
            x = b(x)
            if i in (4, 6, 9):
                feats.append(x)
        return torch.cat([h(f).flatten(2) for h, f in zip(self.heads, feats)], 2).sigmoid()


net = Net().to("cuda", torch.float16).eval()
x = torch.randn(8, 3, 640, 640, device="cuda", dtype=torch.float16)
torch.cuda.synchronize()
with torch.inference_mode():
    _, out["fwd_first_s"] = sync_time(lambda: net(x))
    _, out["fwd_second_s"] = sync_time(lambda: net(x))
out["total_s"] = round(time.perf_counter() - t0, 4)
out["cuda_error"] = err
out["benchmark"] = bool(torch.backends.cudnn.benchmark)
print(json.dumps(out))
sys.exit(1 if err else 0)
