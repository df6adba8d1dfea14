"""Child process of `cudafix verify --first-run`: one fresh interpreter, one first run, timed.

A YOLO-shaped convolutional detector (random weights, nothing downloaded: a backbone of
Conv-BN-SiLU blocks with stride-2 downsampling and a 1x1 detection head at three scales, the
shape of a YOLOv5/v8 model) runs its first and following iterations.  The parent repeats this in
fresh processes under controlled changes (JIT cache fresh or warm, cudnn.benchmark, module
loading, torch.compile) and attributes the differences; this child only measures.

Prints one JSON object on stdout.  Python 3.8 compatible; depends only on torch and the stdlib.
Usage: firstrun_child.py [--batch N] [--imgsz N] [--half] [--benchmark] [--compile] [--iters N]
                         [--load SPEC ...] [--load-only] [--device cuda|cpu]
(SPEC: the parent's trusted-loader answer for one module, JSON: path, real, dev, ino)
"""

from __future__ import annotations

import argparse
import importlib.machinery
import importlib.util
import json
import os
import sys
import time
from typing import Any, Dict, List, Optional

# (out_channels, stride) per Conv-BN-SiLU block: ten blocks, 5 downsamplings (stride 32 at the end)
BACKBONE = [(16, 2), (32, 2), (32, 1), (64, 2), (64, 1), (128, 2), (128, 1), (256, 2), (256, 1), (256, 1)]
HEAD_FROM = (4, 6, 9)  # blocks whose outputs feed the detection head (strides 8, 16, 32)
NUM_OUT = 3 * (80 + 5)  # 3 anchors x (80 classes + box + objectness), as YOLOv5's Detect


def _dir_bytes(path: str, limit: int = 50000) -> Optional[int]:
    if not os.path.isdir(path):
        return None
    total = 0
    for n, (root, _d, files) in enumerate(os.walk(path)):
        for name in files:
            try:
                total += os.path.getsize(os.path.join(root, name))
            except OSError:
                pass
        if n > limit:
            break
    return total


def _jit_cache_path() -> str:
    return os.environ.get("CUDA_CACHE_PATH") or os.path.join(os.path.expanduser("~"), ".nv", "ComputeCache")


def build_detector(torch: Any) -> Any:
    nn = torch.nn

    class ConvBNSiLU(nn.Module):
        def __init__(self, c1: int, c2: int, k: int, s: int) -> None:
            super().__init__()
            self.conv = nn.Conv2d(c1, c2, k, s, k // 2, bias=False)
            self.bn = nn.BatchNorm2d(c2)
            self.act = nn.SiLU()

        def forward(self, x: Any) -> Any:
            return self.act(self.bn(self.conv(x)))

    class Detector(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            blocks = []
            c = 3
            for c2, s in BACKBONE:
                blocks.append(ConvBNSiLU(c, c2, 3, s))
                c = c2
            self.blocks = nn.ModuleList(blocks)
            self.head = nn.ModuleList(nn.Conv2d(BACKBONE[i][0], NUM_OUT, 1) for i in HEAD_FROM)

        def forward(self, x: Any) -> Any:
            feats = []
            for i, b in enumerate(self.blocks):
                x = b(x)
                if i in HEAD_FROM:
                    feats.append(x)
            outs = [h(f).flatten(2) for h, f in zip(self.head, feats)]
            return torch.cat(outs, 2).sigmoid()

    return Detector()


def _trustload() -> Any:
    """cudafix's trusted loader (store/trustload.py, stdlib only), imported from this file's own
    install: the child runs with -I, so nothing of cudafix is on its sys.path."""
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    spec = importlib.util.spec_from_file_location("_cudafix_trustload", os.path.join(here, "store", "trustload.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return mod


def _load(arg: str) -> None:
    """Load an extension module the parent checked (a JSON spec: its real path and identity, from
    the trusted loader), as its importer would (torch already imported): a Python extension
    through the import system, any other shared object by dlopen.  A file that is not the one
    checked is refused (OSError / ImportError), never loaded."""
    m = json.loads(arg)
    path = m["real"]
    tl = _trustload()
    if not any(path.endswith(s) for s in importlib.machinery.EXTENSION_SUFFIXES) or os.path.basename(path).startswith("lib"):
        import ctypes

        tl.load_opened(path, m["dev"], m["ino"], getattr(ctypes, "RTLD_GLOBAL", 0))
        return
    tl.import_extension(os.path.basename(path).split(".", 1)[0], path, m["dev"], m["ino"])


def _sync(torch: Any, dev: str) -> None:
    if dev == "cuda":
        torch.cuda.synchronize()


def _timed_iters(torch: Any, m: Any, x: Any, dev: str, n: int) -> List[float]:
    ts = []
    for _ in range(n):
        t = time.perf_counter()
        m(x)
        _sync(torch, dev)
        ts.append(time.perf_counter() - t)
    return ts


def measure(a: argparse.Namespace) -> Dict[str, Any]:
    out: Dict[str, Any] = {"schema": "cudafix.verify.first-run-child/1", "python": sys.version.split()[0],
                           "prefix": sys.prefix,
                           "batch": a.batch, "imgsz": a.imgsz, "half": a.half, "benchmark": a.benchmark,
                           "compile": a.compile, "env": {k: os.environ[k] for k in (
                               "CUDA_MODULE_LOADING", "CUDA_CACHE_PATH", "CUDA_CACHE_MAXSIZE", "CUDA_CACHE_DISABLE",
                               "TORCHINDUCTOR_CACHE_DIR", "CUDA_LAUNCH_BLOCKING") if k in os.environ}}
    t0 = time.perf_counter()
    try:
        import torch
    except Exception as exc:
        out["torch_import_error"] = "%s: %s" % (type(exc).__name__, (str(exc).splitlines() or [""])[0])
        return out
    out["import_torch_s"] = round(time.perf_counter() - t0, 4)
    out["torch"] = torch.__version__
    out["torch_cuda"] = torch.version.cuda
    dev = a.device
    # the program pays cuInit and the device count before its first tensor, and under
    # CUDA_MODULE_LOADING=EAGER part of the loading lands here (docs/benchmarks.md): timed too
    t = time.perf_counter()
    if dev == "cuda" and not torch.cuda.is_available():
        out["cuda_available"] = False
        return out
    out["init_s"] = round(time.perf_counter() - t, 4)
    out["cuda_available"] = dev == "cuda"
    torch.backends.cudnn.benchmark = bool(a.benchmark)
    cache_before = _dir_bytes(_jit_cache_path())
    t = time.perf_counter()
    for path in a.load:  # before the context: under EAGER loading the context loads (and JITs) them
        _load(path)
    out["load_s"] = round(time.perf_counter() - t, 4)
    t = time.perf_counter()
    torch.ones(1, device=dev)
    _sync(torch, dev)
    out["context_s"] = round(time.perf_counter() - t, 4)
    if dev == "cuda":
        out["device"] = torch.cuda.get_device_name(0)
    if a.load_only:
        out["jit_cache_growth_bytes"] = (_dir_bytes(_jit_cache_path()) or 0) - (cache_before or 0)
        return out
    dtype = torch.float16 if a.half and dev == "cuda" else torch.float32
    t = time.perf_counter()
    torch.manual_seed(0)
    m = build_detector(torch).to(dev, dtype).eval()
    if a.compile:
        try:
            m = torch.compile(m)
        except Exception as exc:
            out["compile_error"] = "%s: %s" % (type(exc).__name__, (str(exc).splitlines() or [""])[0])
            return out
    x = torch.randn(a.batch, 3, a.imgsz, a.imgsz, device=dev, dtype=dtype)
    # a second, rectangular shape (letterboxed 4:3, multiple of 32), as a detector meets in real use
    h2 = max(32, (a.imgsz * 3 // 4) // 32 * 32)
    x2 = torch.randn(a.batch, 3, h2, a.imgsz, device=dev, dtype=dtype)
    _sync(torch, dev)
    out["setup_s"] = round(time.perf_counter() - t, 4)
    try:
        with torch.inference_mode():
            t = time.perf_counter()
            m(x)
            _sync(torch, dev)
            out["first_iter_s"] = round(time.perf_counter() - t, 4)
            ts = _timed_iters(torch, m, x, dev, a.iters)
            out["steady_ms"] = round(sorted(ts)[len(ts) // 2] * 1e3, 3)
            t = time.perf_counter()
            m(x2)
            _sync(torch, dev)
            out["shape2"] = [a.batch, 3, h2, a.imgsz]
            out["shape2_first_s"] = round(time.perf_counter() - t, 4)
            ts = _timed_iters(torch, m, x2, dev, a.iters)
            out["shape2_steady_ms"] = round(sorted(ts)[len(ts) // 2] * 1e3, 3)
    except Exception as exc:  # a compile that fails at first call (no compiler, no triton) is a result
        key = "compile_error" if a.compile else "run_error"
        out[key] = "%s: %s" % (type(exc).__name__, (str(exc).splitlines() or [""])[0][:300])
        return out
    out["jit_cache_growth_bytes"] = (_dir_bytes(_jit_cache_path()) or 0) - (cache_before or 0)
    if dev == "cuda":
        out["max_memory_mib"] = int(torch.cuda.max_memory_allocated() // (1 << 20))
    return out


def parse(argv: List[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="firstrun_child")
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--imgsz", type=int, default=640)
    p.add_argument("--half", action="store_true")
    p.add_argument("--benchmark", action="store_true")
    p.add_argument("--compile", action="store_true")
    p.add_argument("--iters", type=int, default=10)
    p.add_argument("--load", action="append", default=[])
    p.add_argument("--load-only", action="store_true")
    p.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    return p.parse_args(argv)


def main() -> None:
    try:
        out = measure(parse(sys.argv[1:]))
    except Exception as exc:  # report, never a traceback
        out = {"child_error": "%s: %s" % (type(exc).__name__, exc)}
    sys.stdout.write(json.dumps(out) + "\n")


if __name__ == "__main__":
    main()
